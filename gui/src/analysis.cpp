#include "analysis.hpp"

#include <kembed/io/error.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/table_file.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

namespace kembed::inspector {
namespace {

void compute_heat_levels(Dataset& d);

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

Dataset load(std::string const& path) {
  Dataset d;
  d.path = path;
  d.format = io::file_format(path);
  if (d.format == io::run_format) {
    auto run = io::read_run(path, true, false);
    d.rows = run.rows, d.cols = run.cols;
    d.values = std::move(run.gradient);
    d.counts = std::move(run.counts);
    d.padding_idx = run.padding_idx;
    d.sha256 = run.gradient_sha256;
    std::string inputs;
    auto input = [&](char const* role) {
      for (auto const& in : run.inputs)
        if (in.role == role) return in.path + " (" + short_sha(in.sha256) + ")";
      return std::string("-");
    };
    d.provenance = {{"backend", run.backend},
                    {"threads", std::to_string(run.threads)},
                    {"MPI ranks", std::to_string(run.ranks)},
                    {"plan asked", run.plan},
                    {"plan used", run.plan_used},
                    {"numeric mode", run.numeric_mode},
                    {"microbatch", std::to_string(run.microbatch_size)},
                    {"microbatches", std::to_string(run.microbatches)},
                    {"positions", std::to_string(run.positions)},
                    {"padding row", padding_text(run.padding_idx)},
                    {"table", input("table")},
                    {"batch", input("batch")},
                    {"gradient SHA-256", short_sha(run.gradient_sha256)},
                    {"kembed", run.kembed_version},
                    {"run id", run.run_id},
                    {"created", run.created}};
  } else if (d.format == io::table_format) {
    auto table = io::load_table(path);
    d.rows = table.config.num_embeddings, d.cols = table.config.embedding_dim;
    d.values = std::move(table.weight);
    d.padding_idx = table.config.padding_idx;
    d.provenance = {{"padding row", padding_text(table.config.padding_idx)},
                    {"plan", std::string(to_string(table.config.plan))},
                    {"numeric mode", std::string(to_string(table.config.mode))},
                    {"kembed", table.kembed_version},
                    {"created by", table.created_by}};
  } else {
    throw io::FileError(path, "", "is a '" + d.format + "' file; the inspector opens run files and table files");
  }
  compute_row_stats(d);
  return d;
}

bool verify_sha256(Dataset const& data, std::atomic<bool> const* cancel) {
  io::Sha256 hash;
  auto const* bytes = reinterpret_cast<unsigned char const*>(data.values.data());
  std::size_t const size = data.values.size() * sizeof(float), piece = std::size_t{16} << 20;
  for (std::size_t at = 0; at < size; at += piece) {
    if (cancel && cancel->load()) return false;
    hash.update(bytes + at, std::min(piece, size - at));
  }
  return hash.hex_digest() == data.sha256;
}

void compute_row_stats(Dataset& d) {
  d.row_norm.assign(static_cast<std::size_t>(d.rows), 0.0f);
  d.row_max_abs.assign(static_cast<std::size_t>(d.rows), 0.0f);
  parallel_rows(d.rows, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t r = lo; r < hi; ++r) {
      double sum = 0;
      float top = 0;
      float const* p = d.values.data() + r * d.cols;
      for (std::int64_t c = 0; c < d.cols; ++c) {
        sum += double(p[c]) * double(p[c]);
        top = std::max(top, std::fabs(p[c]));
      }
      d.row_norm[r] = static_cast<float>(std::sqrt(sum));
      d.row_max_abs[r] = top;
    }
  });
  compute_heat_levels(d);
}

Histogram count_histogram(std::vector<std::int64_t> const& counts, int bins, bool logarithmic) {
  Histogram h;
  bins = std::max(bins, 1);
  std::int64_t const top = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  if (!logarithmic) {
    std::int64_t const width = std::max<std::int64_t>(1, (top + bins) / bins);  // ceil((top + 1) / bins)
    for (std::int64_t lo = 0; lo <= top; lo += width) h.lower.push_back(lo), h.upper.push_back(lo + width);
  } else {
    // [0, 1), then edges growing by a constant factor, rounded up to whole counts.
    h.lower.push_back(0), h.upper.push_back(1);
    double const factor = std::pow(double(top + 1), 1.0 / std::max(bins - 1, 1));
    std::int64_t lo = 1;
    for (int i = 1; lo <= top; ++i) {
      std::int64_t hi = std::max<std::int64_t>(lo + 1, std::llround(std::pow(factor, i)));
      if (i == bins - 1 || hi > top) hi = std::max(hi, top + 1);
      h.lower.push_back(lo), h.upper.push_back(hi);
      lo = hi;
    }
  }
  h.rows.assign(h.lower.size(), 0);
  for (auto c : counts) {
    auto const it = std::upper_bound(h.lower.begin(), h.lower.end(), c);
    ++h.rows[std::size_t(it - h.lower.begin()) - 1];
  }
  return h;
}

namespace {

constexpr std::int64_t heat_block = 16;  // rows per block of the first level

// Folds `n` values into `o` keeping, per column, the first of largest magnitude.
inline void keep_larger(float* o, float const* p, std::int64_t n) {
  for (std::int64_t c = 0; c < n; ++c)
    if (std::fabs(p[c]) > std::fabs(o[c])) o[c] = p[c];
}

void compute_heat_levels(Dataset& d) {
  d.heat_levels.clear();
  std::int64_t n = (d.rows + heat_block - 1) / heat_block;
  if (n < 2) return;
  std::vector<float> level(static_cast<std::size_t>(n * d.cols), 0.0f);
  parallel_rows(n, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t b = lo; b < hi; ++b)
      for (std::int64_t r = b * heat_block; r < std::min(d.rows, (b + 1) * heat_block); ++r)
        keep_larger(level.data() + b * d.cols, d.values.data() + r * d.cols, d.cols);
  });
  d.heat_levels.push_back(std::move(level));
  while (n > 1) {  // each level pairs the blocks of the one below, in row order
    auto const& below = d.heat_levels.back();
    std::int64_t const m = (n + 1) / 2;
    std::vector<float> up(static_cast<std::size_t>(m * d.cols), 0.0f);
    for (std::int64_t b = 0; b < m; ++b) {
      keep_larger(up.data() + b * d.cols, below.data() + 2 * b * d.cols, d.cols);
      if (2 * b + 1 < n) keep_larger(up.data() + b * d.cols, below.data() + (2 * b + 1) * d.cols, d.cols);
    }
    d.heat_levels.push_back(std::move(up));
    n = m;
  }
}

}  // namespace

std::vector<float> heat_bands(Dataset const& d, std::int64_t first, std::int64_t last, int bands,
                              std::vector<std::int64_t>* band_first_row, std::int64_t* values_read) {
  first = std::clamp<std::int64_t>(first, 0, d.rows);
  last = std::clamp<std::int64_t>(last, first, d.rows);
  std::int64_t const span = last - first;
  bands = int(std::max<std::int64_t>(1, std::min<std::int64_t>(bands, std::max<std::int64_t>(span, 1))));
  std::vector<float> out(static_cast<std::size_t>(bands * d.cols), 0.0f);
  if (band_first_row) band_first_row->assign(static_cast<std::size_t>(bands) + 1, last);
  std::vector<std::int64_t> reads(static_cast<std::size_t>(bands), 0);
  parallel_rows(bands, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t b = lo; b < hi; ++b) {
      std::int64_t const r0 = first + span * b / bands, r1 = first + span * (b + 1) / bands;
      if (band_first_row) (*band_first_row)[b] = r0;
      float* o = out.data() + b * d.cols;
      auto rows = [&](std::int64_t from, std::int64_t to) {
        for (std::int64_t r = from; r < to; ++r) keep_larger(o, d.values.data() + r * d.cols, d.cols);
        reads[b] += (to - from) * d.cols;
      };
      // Raw rows up to the first whole block, then whole blocks from the largest level
      // that fits, left to right (so ties keep the first row), then the rest raw.
      std::int64_t const lo_block = (r0 + heat_block - 1) / heat_block, hi_block = r1 / heat_block;
      if (d.heat_levels.empty() || lo_block >= hi_block) {
        rows(r0, r1);
        continue;
      }
      rows(r0, lo_block * heat_block);
      for (std::int64_t i = lo_block; i < hi_block;) {
        std::size_t k = 0;
        while (k + 1 < d.heat_levels.size() && i % (std::int64_t{2} << k) == 0 &&
               i + (std::int64_t{2} << k) <= hi_block)
          ++k;
        keep_larger(o, d.heat_levels[k].data() + (i >> k) * d.cols, d.cols);
        reads[b] += d.cols;
        i += std::int64_t{1} << k;
      }
      rows(hi_block * heat_block, r1);
    }
  });
  if (values_read) {
    *values_read = 0;
    for (auto n : reads) *values_read += n;
  }
  return out;
}

std::vector<std::int64_t> top_rows(std::vector<std::int64_t> const& counts, std::size_t k) {
  std::vector<std::int64_t> rows(counts.size());
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = std::int64_t(i);
  k = std::min(k, rows.size());
  std::partial_sort(rows.begin(), rows.begin() + std::ptrdiff_t(k), rows.end(), [&](std::int64_t a, std::int64_t b) {
    return counts[a] != counts[b] ? counts[a] > counts[b] : a < b;
  });
  rows.resize(k);
  return rows;
}

DiffSummary diff(Dataset const& a, Dataset const& b) {
  DiffSummary s;
  if (a.rows != b.rows || a.cols != b.cols) {
    s.shapes_differ = true;
    return s;
  }
  s.values = compare(a.values.data(), b.values.data(), a.rows, a.cols, -1);
  if (a.counts.size() == b.counts.size())
    for (std::size_t r = 0; r < a.counts.size(); ++r) s.counts_differing_rows += a.counts[r] != b.counts[r];
  for (auto const& [field, value] : a.provenance)
    for (auto const& [other_field, other] : b.provenance)
      if (field == other_field && value != other) s.provenance_differs.push_back(field);
  return s;
}

std::string hex_bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", b);
  return text;
}

}  // namespace kembed::inspector
