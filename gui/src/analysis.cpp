#include "analysis.hpp"

#include <kembed/io/error.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/summary.hpp>
#include <kembed/io/table_file.hpp>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

namespace kembed::inspector {
namespace {


template <class F>
void parallel_rows(std::int64_t rows, F&& f) {
  unsigned const n = std::max(1u, std::min(std::thread::hardware_concurrency(), 16u));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < n; ++t) pool.emplace_back([&, t] { f(rows * t / n, rows * (t + 1) / n); });
  for (auto& th : pool) th.join();
}

std::string short_sha(std::string const& sha) {
  return sha.size() > 16 ? sha.substr(0, 16) + "..." : sha;
}

}  // namespace

std::string padding_text(std::int64_t padding_idx) {
  return padding_idx < 0 ? "none" : std::to_string(padding_idx);
}

std::mutex& io_mutex() {
  static std::mutex m;
  return m;
}

namespace {

// What went wrong, in kembed's words without its "kembed: " prefix where it is kembed's.
std::string message_of(std::exception const& e) {
  auto const* own = dynamic_cast<Error const*>(&e);
  return own ? own->message() : e.what();
}

}  // namespace

std::vector<float> Dataset::read_rows(std::int64_t first, std::int64_t count) const {
  std::vector<float> out(static_cast<std::size_t>(count * cols));
  std::string failure;
  try {
    std::lock_guard<std::mutex> lock(io_mutex());
    reader->read(first, count, out.data());
    return out;
  } catch (std::exception const& e) {
    failure = message_of(e);
  }
  std::fill(out.begin(), out.end(), std::nanf(""));
  std::function<void(std::string const&)> report;
  {
    std::lock_guard<std::mutex> lock(damage->mutex);
    if (!damage->first.empty()) return out;
    damage->first = failure;
    report = damage->on_damage;
  }
  if (report) report(damage->first);
  return out;
}

bool Dataset::damaged() const {
  std::lock_guard<std::mutex> lock(damage->mutex);
  return !damage->first.empty();
}

Dataset load(std::string const& path) {
  std::lock_guard<std::mutex> lock(io_mutex());
  Dataset d;
  d.path = path;
  d.format = io::file_format(path);
  if (io::is_run_format(d.format)) {
    auto run = io::read_run(path, false, false);  // everything but the gradient
    d.rows = run.rows, d.cols = run.cols;
    d.counts = std::move(run.counts);
    d.padding_idx = run.padding_idx;
    d.settings = io::settings_of(run);
    d.sha256 = run.gradient_sha256;
    d.counts_verified = !run.counts_sha256.empty();  // read_run checked them against it
    d.summary = io::read_summary(path);  // checked against its summary_sha256, where it has one
    d.summary_stored = !d.summary.empty();
    std::string inputs;
    auto input = [&](char const* role) {
      for (auto const& in : run.inputs)
        if (in.role == role) return in.path + " (" + short_sha(in.sha256) + ")";
      return std::string("-");
    };
    d.provenance = {{"backend", run.backend},
                    {"threads", std::to_string(run.threads)},
                    {"MPI ranks", std::to_string(run.ranks)},
                    {"plan asked", std::string(to_string(run.plan))},
                    {"plan used", run.plan_used},
                    {"numeric mode", std::string(to_string(run.numeric_mode))},
                    {"scale_grad_by_freq", std::string(to_string(run.scale_grad_by_freq))},
                    {"microbatch", std::to_string(run.microbatch_size)},
                    {"microbatches", std::to_string(run.microbatches)},
                    {"positions", std::to_string(run.positions)},
                    // A bag run's gradient is EmbeddingBag's: the pooling and the bags it folded.
                    {"pooling", run.pooling ? std::string(to_string(*run.pooling)) : "none (one row per position)"},
                    {"bags", run.pooling ? std::to_string(run.bags) : "-"},
                    {"padding row", padding_text(run.padding_idx)},
                    {"table", input("table")},
                    {"batch", input("batch")},
                    {"gradient SHA-256", short_sha(run.gradient_sha256)},
                    {"kembed", run.kembed_version},
                    {"run id", run.run_id},
                    {"created", run.created}};
  } else if (d.format == io::table_format) {
    auto table = io::load_rows(path, 0, 0);  // the settings, no weights
    d.rows = table.config.num_embeddings, d.cols = table.config.embedding_dim;
    d.padding_idx = table.config.padding_idx;
    d.settings = table.config;
    d.provenance = settings_text(table.config);  // every setting the table holds
    d.provenance.emplace_back("kembed", table.kembed_version);
    d.provenance.emplace_back("created by", table.created_by);
  } else {
    throw io::FileError(path, "", "is a '" + d.format + "' file; the inspector opens run files and table files");
  }
  d.info = io::file_info(path);
  // Closed under the lock too, on whichever thread lets go of it last.
  d.reader = std::shared_ptr<io::RowReader>(new io::RowReader(path), [](io::RowReader* r) {
    std::lock_guard<std::mutex> lock(io_mutex());
    delete r;
  });
  return d;
}

int column_bin(float x) {
  return (io::order_key(x) >> 20) + ColumnStats::bins / 2;  // sign, exponent, 3 mantissa bits
}

float column_bin_floor(int bin) {
  return io::from_order_key(std::int32_t(std::uint32_t(bin - ColumnStats::bins / 2) << 20));
}

namespace {

// One set of rows' column statistics as the pass adds rows: a histogram of each
// column's values by column_bin, their sums and squares, and the least and greatest.
// A piece's own tally counts in 32 bits (half the bytes to clear and merge).
template <class Count>
class ColumnTally {
 public:
  explicit ColumnTally(std::int64_t cols)
      : cols_(cols),
        histogram_(std::size_t(cols) * ColumnStats::bins, 0),
        sum_(std::size_t(cols), 0.0),
        squares_(std::size_t(cols), 0.0),
        min_(std::size_t(cols), INFINITY),
        max_(std::size_t(cols), -INFINITY) {}
  void add(float const* row) {
    ++rows_;
    for (std::int64_t c = 0; c < cols_; ++c) {
      if (std::isnan(row[c])) continue;
      double const x = row[c];
      auto const k = std::size_t(c);
      ++histogram_[k * ColumnStats::bins + std::size_t(column_bin(row[c]))];
      sum_[k] += x, squares_[k] += x * x;
      min_[k] = std::min(min_[k], row[c]), max_[k] = std::max(max_[k], row[c]);
    }
  }
  template <class Other>
  void merge(ColumnTally<Other> const& other) {
    rows_ += other.rows_;
    for (std::size_t i = 0; i < histogram_.size(); ++i) histogram_[i] += other.histogram_[i];
    for (std::size_t c = 0; c < sum_.size(); ++c) {
      sum_[c] += other.sum_[c], squares_[c] += other.squares_[c];
      min_[c] = std::min(min_[c], other.min_[c]), max_[c] = std::max(max_[c], other.max_[c]);
    }
  }
  ColumnStats finish() const;

 private:
  template <class>
  friend class ColumnTally;
  std::int64_t cols_, rows_ = 0;
  std::vector<Count> histogram_;
  std::vector<double> sum_, squares_;
  std::vector<float> min_, max_;
};

template <class Count>
ColumnStats ColumnTally<Count>::finish() const {
  ColumnStats cs;
  cs.rows = rows_;
  for (std::int64_t c = 0; c < cols_; ++c) {
    Count const* h = histogram_.data() + c * ColumnStats::bins;
    std::int64_t n = 0;
    for (int b = 0; b < ColumnStats::bins; ++b) n += h[b];
    cs.nan.push_back(rows_ - n);
    double const mean = n ? sum_[std::size_t(c)] / double(n) : NAN;
    cs.mean.push_back(mean);
    cs.stddev.push_back(n ? std::sqrt(std::max(0.0, squares_[std::size_t(c)] / double(n) - mean * mean)) : NAN);
    cs.min.push_back(n ? min_[std::size_t(c)] : NAN);
    cs.max.push_back(n ? max_[std::size_t(c)] : NAN);
    std::array<float, 7> p{};
    for (int k = 0; k < 7; ++k) {
      auto const rank = std::int64_t(ColumnStats::levels[k] * double(std::max<std::int64_t>(n - 1, 0)));
      std::int64_t seen = 0;
      int b = 0;
      while (b < ColumnStats::bins - 1 && seen + std::int64_t(h[b]) <= rank) seen += h[b++];
      p[std::size_t(k)] = n ? column_bin_floor(b) : NAN;
    }
    cs.percentiles.push_back(p);
  }
  return cs;
}

}  // namespace

Scan scan(Dataset const& d, Progress const& progress) {
  Scan out;
  out.row_norm.assign(static_cast<std::size_t>(d.rows), 0.0f);
  out.row_max_abs.assign(static_cast<std::size_t>(d.rows), 0.0f);
  // A summary for a file without one, or the stored one's bits to check: what was
  // painted from it is verified once the pass is over.
  std::optional<io::SummaryBuilder> builder;
  if (d.summary.empty() || d.is_run()) builder.emplace(d.rows, d.cols);
  io::Sha256 hash;
  std::int64_t const piece = std::max<std::int64_t>(1, (std::int64_t{16} << 20) / (4 * std::max<std::int64_t>(d.cols, 1)));
  std::vector<float> rows;
  // Each column's values over every row, and over the rows with a count above 0 (a
  // Zipf run's unreferenced rows are zero: most of its rows, hiding the rest).
  ColumnTally<std::int64_t> all(d.cols), counted(d.cols);
  bool const has_counts = d.counts.size() == std::size_t(d.rows);
  std::mutex merging;
  for (std::int64_t first = 0; first < d.rows; first += piece) {
    if (progress && !progress(double(first) / double(d.rows))) return out;
    std::int64_t const n = std::min(piece, d.rows - first);
    rows.resize(static_cast<std::size_t>(n * d.cols));
    try {
      std::lock_guard<std::mutex> lock(io_mutex());
      d.reader->read(first, n, rows.data());
    } catch (std::exception const& e) {  // a damaged chunk: the pass ends, saying why
      out.error = message_of(e);
      out.completed = true;
      out.sha256_ok = false;
      return out;
    }
    if (d.is_run() && d.reader->listed_rows().empty()) {
      hash.update(rows.data(), rows.size() * sizeof(float));
    } else if (d.is_run()) {  // a sparse run's digest: each listed row's number and values
      auto const& listed = d.reader->listed_rows();
      for (auto k = std::lower_bound(listed.begin(), listed.end(), first);
           k != listed.end() && *k < first + n; ++k) {
        hash.update(&*k, sizeof(std::int64_t));
        hash.update(rows.data() + (*k - first) * d.cols, std::size_t(d.cols) * sizeof(float));
      }
    }
    if (builder) builder->add(first, n, rows.data(), d.counts.empty() ? nullptr : d.counts.data() + first);
    parallel_rows(n, [&](std::int64_t lo, std::int64_t hi) {
      ColumnTally<std::int32_t> local_all(d.cols), local_counted(d.cols);
      for (std::int64_t r = lo; r < hi; ++r) {
        double norm = 0;
        float top = 0;
        float const* p = rows.data() + r * d.cols;
        for (std::int64_t c = 0; c < d.cols; ++c) {
          norm += double(p[c]) * double(p[c]);
          top = std::max(top, std::fabs(p[c]));
        }
        local_all.add(p);
        if (has_counts && d.counts[std::size_t(first + r)] > 0) local_counted.add(p);
        out.row_norm[std::size_t(first + r)] = static_cast<float>(std::sqrt(norm));
        out.row_max_abs[std::size_t(first + r)] = top;
      }
      std::lock_guard<std::mutex> lock(merging);
      all.merge(local_all);
      counted.merge(local_counted);
    });
  }
  if (builder && d.summary.empty()) out.summary = builder->finish();
  if (builder && !d.summary.empty()) out.summary_ok = io::same_bits(d.summary, builder->finish());
  out.columns = all.finish();
  if (has_counts) out.columns_counted = counted.finish();
  out.sha256_ok = !d.is_run() || hash.hex_digest() == d.sha256;
  out.completed = true;
  return out;
}

void apply(Scan&& s, Dataset& d) {
  d.row_norm = std::move(s.row_norm);
  d.row_max_abs = std::move(s.row_max_abs);
  d.columns = std::move(s.columns);
  d.columns_counted = std::move(s.columns_counted);
  if (!s.summary.empty()) d.summary = std::move(s.summary);
}

Histogram count_histogram(std::vector<std::int64_t> const& counts, int bins, bool logarithmic) {
  // Counts come checked from the file (never negative), but no count may write outside
  // the bins or make them without end: edges saturate at INT64_MAX, and a negative
  // count lands in the first bin.
  constexpr std::int64_t most = INT64_MAX;
  auto plus = [](std::int64_t a, std::int64_t b) { return a > most - b ? most : a + b; };
  Histogram h;
  bins = std::max(bins, 1);
  std::int64_t const top = counts.empty() ? 0 : std::max<std::int64_t>(0, *std::max_element(counts.begin(), counts.end()));
  if (!logarithmic) {
    std::int64_t const width = plus(top / bins, 1);  // ceil((top + 1) / bins), without overflow
    for (std::int64_t i = 0; i < bins && i * width <= top; ++i)
      h.lower.push_back(i * width), h.upper.push_back(plus(i * width, width));
  } else {
    // [0, 1), then edges growing by a constant factor, rounded up to whole counts.
    h.lower.push_back(0), h.upper.push_back(1);
    double const factor = std::pow(double(top) + 1.0, 1.0 / std::max(bins - 1, 1));
    std::int64_t lo = 1;
    for (int i = 1; lo <= top && lo < most; ++i) {
      double const edge = std::min(std::pow(factor, i), 9.0e18);  // below INT64_MAX
      std::int64_t hi = std::max<std::int64_t>(lo + 1, std::llround(edge));
      if (i >= bins - 1 || hi > top) hi = std::max(hi, plus(top, 1));
      h.lower.push_back(lo), h.upper.push_back(hi);
      lo = hi;
    }
  }
  h.rows.assign(h.lower.size(), 0);
  for (auto c : counts) {
    auto const it = std::upper_bound(h.lower.begin(), h.lower.end(), c);
    ++h.rows[it == h.lower.begin() ? 0 : std::size_t(it - h.lower.begin()) - 1];
  }
  return h;
}

namespace {

// -0.0 below +0.0, as the summary orders them.
inline bool less(float a, float b) {
  return io::summary_less(a, b);
}

}  // namespace

ReadRows difference_rows(std::shared_ptr<Dataset const> a, std::shared_ptr<Dataset const> b) {
  return [a = std::move(a), b = std::move(b)](std::int64_t from, std::int64_t n) {
    auto x = a->read_rows(from, n);
    auto const y = b->read_rows(from, n);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] -= y[i];
    return x;
  };
}

Heat heat_bands(Dataset const& d, std::int64_t first, std::int64_t last, int bands, std::int64_t max_read_values) {
  return heat_bands(d.summary, d.rows, d.cols, [&d](std::int64_t from, std::int64_t n) { return d.read_rows(from, n); },
                    first, last, bands, max_read_values);
}

Heat heat_bands(io::Summary const& summary, std::int64_t rows, std::int64_t cols, ReadRows const& read,
                std::int64_t first, std::int64_t last, int bands, std::int64_t max_read_values) {
  struct {
    std::int64_t rows, cols;
    io::Summary const& summary;
  } const d{rows, cols, summary};
  Heat h;
  first = std::clamp<std::int64_t>(first, 0, d.rows);
  last = std::clamp<std::int64_t>(last, first, d.rows);
  std::int64_t const span = last - first;
  bands = int(std::max<std::int64_t>(1, std::min<std::int64_t>(bands, std::max<std::int64_t>(span, 1))));
  if (span == 0) return h;
  std::int64_t const max_read_rows = std::max<std::int64_t>(1, max_read_values / std::max<std::int64_t>(cols, 1));
  auto const& levels = d.summary.levels;
  auto blocks_in_view = [&](std::int64_t b) { return (last + b - 1) / b - first / b; };
  bool const zoomed_in = levels.empty() || blocks_in_view(levels.front().block_rows) <= bands;
  if (zoomed_in && (span <= max_read_rows || levels.empty())) {
    if (span > max_read_rows) return h;  // no summary yet, and too many rows to read
    auto const values = read(first, span);
    h.from_rows = true;
    h.values_read = span * d.cols;
    h.rows_per_band = (span + bands - 1) / bands;
    h.values.assign(std::size_t(bands * d.cols), 0.0f);
    for (int b = 0; b <= bands; ++b) h.first.push_back(first + span * b / bands);
    for (int b = 0; b < bands; ++b)
      for (std::int64_t c = 0; c < d.cols; ++c) {
        float lo = INFINITY, hi = -INFINITY;
        for (std::int64_t r = h.first[std::size_t(b)]; r < h.first[std::size_t(b) + 1]; ++r) {
          float const x = values[std::size_t((r - first) * d.cols + c)];
          if (std::isnan(x)) continue;
          if (less(x, lo)) lo = x;
          if (less(hi, x)) hi = x;
        }
        h.values[std::size_t(b * d.cols + c)] = hi < lo ? NAN : heat_value(lo, hi);
      }
    return h;
  }
  // Bands of whole blocks: the level that gives the most bands (at most `bands`),
  // the coarsest of those on a tie (fewer values to read).
  std::size_t k = levels.size() - 1;
  std::int64_t most = 0;
  for (std::size_t i = levels.size(); i-- > 0;) {
    std::int64_t const nb_i = blocks_in_view(levels[i].block_rows), per = (nb_i + bands - 1) / bands;
    if ((nb_i + per - 1) / per > most) most = (nb_i + per - 1) / per, k = i;
  }
  auto const& level = levels[k];
  std::int64_t const b0 = first / level.block_rows, nb = blocks_in_view(level.block_rows);
  std::int64_t const per_band = (nb + bands - 1) / bands;
  int const n = int((nb + per_band - 1) / per_band);
  h.rows_per_band = per_band * level.block_rows;
  h.values.assign(std::size_t(n * d.cols), 0.0f);
  for (int b = 0; b <= n; ++b) h.first.push_back(std::min(d.rows, (b0 + b * per_band) * level.block_rows));
  for (int b = 0; b < n; ++b)
    for (std::int64_t c = 0; c < d.cols; ++c) {
      float lo = INFINITY, hi = -INFINITY;
      for (std::int64_t i = b0 + b * per_band; i < std::min(b0 + nb, b0 + (b + 1) * per_band); ++i) {
        float const x = level.min[std::size_t(i * d.cols + c)], y = level.max[std::size_t(i * d.cols + c)];
        if (std::isnan(x)) continue;  // a block of NaN only
        if (less(x, lo)) lo = x;
        if (less(hi, y)) hi = y;
        h.values_read += 2;
      }
      h.values[std::size_t(b * d.cols + c)] = hi < lo ? NAN : heat_value(lo, hi);
    }
  return h;
}

std::vector<std::int64_t> top_rows(std::vector<std::int64_t> const& counts, std::size_t k) {
  // A heap of the k best so far: no index of every row (80 MB at 10^7 rows).
  auto better = [&](std::int64_t a, std::int64_t b) { return counts[a] != counts[b] ? counts[a] > counts[b] : a < b; };
  std::vector<std::int64_t> best;
  for (std::size_t i = 0; i < counts.size() && k > 0; ++i) {
    auto const r = std::int64_t(i);
    if (best.size() < k) {
      best.push_back(r);
      std::push_heap(best.begin(), best.end(), better);  // the worst kept on top
    } else if (better(r, best.front())) {
      std::pop_heap(best.begin(), best.end(), better);
      best.back() = r;
      std::push_heap(best.begin(), best.end(), better);
    }
  }
  std::sort(best.begin(), best.end(), better);
  return best;
}

DiffSummary diff(Dataset const& a, Dataset const& b, Progress const& progress) {
  DiffSummary s;
  for (auto const& [field, value] : a.provenance)
    for (auto const& [other_field, other] : b.provenance)
      if (field == other_field && value != other) s.provenance_differs.push_back(field);
  if (a.rows != b.rows || a.cols != b.cols) {
    s.shapes_differ = true;
    return s;
  }
  if (a.counts.size() == b.counts.size())
    for (std::size_t r = 0; r < a.counts.size(); ++r) s.counts_differing_rows += a.counts[r] != b.counts[r];
  auto& v = s.values;
  v.rows = a.rows, v.cols = a.cols;
  io::SummaryBuilder difference(a.rows, a.cols);
  std::vector<float> delta;
  std::int64_t const piece = std::max<std::int64_t>(1, (std::int64_t{16} << 20) / (4 * std::max<std::int64_t>(a.cols, 1)));
  for (std::int64_t first = 0; first < a.rows; first += piece) {
    if (progress && !progress(double(first) / double(a.rows))) {
      s.completed = false;
      return s;
    }
    std::int64_t const n = std::min(piece, a.rows - first);
    auto const x = a.read_rows(first, n), y = b.read_rows(first, n);
    delta.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) delta[i] = x[i] - y[i];
    difference.add(first, n, delta.data(), nullptr);
    auto const keep = diff_rows_kept - std::int64_t(v.differences.size());
    auto part = compare(x.data(), y.data(), n, a.cols, keep);
    v.differing_rows += part.differing_rows;
    v.differing_elements += part.differing_elements;
    if (part.max_ulp > v.max_ulp)  // the first of the largest, as one comparison would
      v.max_ulp = part.max_ulp, v.max_ulp_row = first + part.max_ulp_row, v.max_ulp_col = part.max_ulp_col;
    if (part.max_abs > v.max_abs) {
      v.max_abs = part.max_abs, v.max_abs_row = first + part.max_abs_row, v.max_abs_col = part.max_abs_col;
      auto const at = std::size_t(part.max_abs_row * a.cols + part.max_abs_col);
      s.at_max_abs_a = x[at], s.at_max_abs_b = y[at];
    }
    for (auto& d : part.differences) {
      d.row += first;
      v.differences.push_back(d);
    }
  }
  s.difference = difference.finish();
  return s;
}

namespace {

std::string format(char const* f, ...) __attribute__((format(printf, 1, 2)));
std::string format(char const* f, ...) {
  char text[512];
  va_list args;
  va_start(args, f);
  std::vsnprintf(text, sizeof text, f, args);
  va_end(args);
  return text;
}

std::string field(Dataset const& d, std::string const& name) {
  for (auto const& [f, v] : d.provenance)
    if (f == name) return v;
  return "";
}

}  // namespace

std::vector<std::string> explain(Dataset const& a, Dataset const& b, DiffSummary const& s) {
  std::vector<std::string> lines;
  auto const& v = s.values;
  if (s.shapes_differ) {
    lines.push_back(format("Different shapes: (%lld, %lld) and (%lld, %lld), so no value can be compared",
                           (long long)a.rows, (long long)a.cols, (long long)b.rows, (long long)b.cols));
    return lines;
  }
  if (s.identical()) {
    lines.push_back(format("Bit-identical: %lld x %lld, every value the same bits", (long long)a.rows, (long long)a.cols));
  } else if (v.identical()) {
    lines.push_back(format("The values are the same bits; counts differ in %lld rows", (long long)s.counts_differing_rows));
  } else {
    lines.push_back(
        format("%lld of %lld rows differ (%lld values); largest difference %lld ULPs (row %lld, column "
               "%lld), %.6g in absolute value",
               (long long)v.differing_rows, (long long)a.rows, (long long)v.differing_elements, (long long)v.max_ulp,
               (long long)v.max_ulp_row, (long long)v.max_ulp_col, v.max_abs));
    double const x = s.at_max_abs_a, y = s.at_max_abs_b, scale = std::max(std::fabs(x), std::fabs(y));
    lines.push_back(format("Largest |a - b| at row %lld, column %lld: a = %.9g, b = %.9g, a relative difference of %.3g "
                           "(of the larger |value| there)",
                           (long long)v.max_abs_row, (long long)v.max_abs_col, x, y,
                           scale > 0 ? std::fabs(x - y) / scale : 0.0));
    if (a.is_run() && a.counts.size() == std::size_t(a.rows) && !v.differences.empty()) {
      std::int64_t total = 0, held = 0;
      std::map<std::int64_t, std::int64_t> all, theirs;  // rows per count: few distinct counts
      for (auto c : a.counts) total += c, ++all[c];
      for (auto const& d : v.differences) held += a.counts[std::size_t(d.row)], ++theirs[a.counts[std::size_t(d.row)]];
      auto median = [](std::map<std::int64_t, std::int64_t> const& rows_per_count) {
        std::int64_t n = 0, seen = 0;
        for (auto const& [c, rows] : rows_per_count) n += rows;
        for (auto const& [c, rows] : rows_per_count)
          if ((seen += rows) > n / 2) return c;
        return std::int64_t{0};
      };
      auto const m_diff = median(theirs), m_all = median(all);
      std::string where = m_diff > m_all ? "the differences are in the hot rows (many terms, where the order of the sum matters)"
                                         : "the differences are spread like the counts";
      lines.push_back(format("The %s%lld differing rows hold %.1f %% of the positions; their median count is %lld against "
                             "%lld for all rows: %s",
                             v.differences.size() < std::size_t(v.differing_rows) ? "first " : "",
                             (long long)v.differences.size(), total > 0 ? 100.0 * double(held) / double(total) : 0.0,
                             (long long)m_diff, (long long)m_all, where.c_str()));
    }
  }
  if (!a.is_run()) {  // tables by every setting they hold (runs: the likely reason below)
    std::string settings;
    for (auto const& d : differences(a.settings, b.settings)) settings += (settings.empty() ? "" : "; ") + d.text();
    if (!settings.empty()) lines.push_back("Settings differ: " + settings);
    return lines;
  }
  // The likely reason, from what produced each run.
  auto const ma = field(a, "numeric mode"), mb = field(b, "numeric mode");
  auto differs = [&](char const* f) { return field(a, f) != field(b, f); };
  if (differs("batch") || s.counts_differing_rows > 0)
    lines.push_back("The runs read different batches (inputs or counts differ): different gradients are expected");
  else if (differs("pooling"))
    lines.push_back("The poolings differ (" + field(a, "pooling") + " vs " + field(b, "pooling") +
                    "): each bag's rows were pooled differently, so different gradients are expected");
  else if (ma != mb)
    lines.push_back("Numeric modes differ (" + ma + " vs " + mb +
                    "): they add each row's terms in different orders, so they are expected to differ in the last bits");
  else if (differs("scale_grad_by_freq"))
    lines.push_back("scale_grad_by_freq differs (" + field(a, "scale_grad_by_freq") + " vs " +
                    field(b, "scale_grad_by_freq") + "): the terms were scaled differently, so different gradients "
                    "are expected");
  else if (field(a, "scale_grad_by_freq") == "call" && differs("microbatch"))
    lines.push_back("scale_grad_by_freq=call counts each microbatch's ids (" + field(a, "microbatch") + " vs " +
                    field(b, "microbatch") + (field(a, "bags") == "-" ? " positions" : " bags") +
                    "), so a difference is expected");
  else if (ma == "fast")
    lines.push_back("Mode fast adds with atomics: its bits may change from run to run on a parallel backend, so a "
                    "difference is expected");
  else if (ma == "deterministic" && differs("microbatch"))
    lines.push_back("Mode deterministic's sums depend on the microbatch boundaries (" + field(a, "microbatch") + " vs " +
                    field(b, "microbatch") + "), so a difference is expected");
  else if (differs("padding row"))
    lines.push_back("The padding rows differ (" + field(a, "padding row") + " vs " + field(b, "padding row") +
                    "): the padding row's gradient is zero");
  else if (!s.identical())
    lines.push_back("Same mode (" + ma +
                    "), batch and padding row: the mode promises the same bits on every backend, thread count, plan "
                    "and rank count, so these runs should be identical. This is a reproducibility failure: please "
                    "report it with both files");
  else {
    std::string varied;
    for (char const* f : {"backend", "threads", "MPI ranks", "plan used", "microbatch"})
      if (differs(f)) varied += std::string(varied.empty() ? "" : ", ") + f;
    lines.push_back(varied.empty() ? "Same mode (" + ma + ") and inputs, as expected"
                                   : "Mode " + ma + " keeps its promise across different " + varied);
  }
  return lines;
}

std::string hex_bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", b);
  return text;
}

}  // namespace kembed::inspector
