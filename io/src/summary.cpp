#include "common.hpp"
#include "summary_file.hpp"

#include <kembed/io/sha256.hpp>
#include <kembed/io/summary.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kembed::io {
namespace {

constexpr float inf = std::numeric_limits<float>::infinity();

// -0.0 is less than +0.0, so that the least and greatest do not depend on which
// zero came first. NaN never reaches these (it is skipped).
inline bool less(float a, float b) {
  return summary_less(a, b);
}

std::string level_name(std::int64_t block_rows) {
  return "rows_" + std::to_string(block_rows);
}

}  // namespace

std::int64_t summary_finest_block_rows(std::int64_t rows) {
  std::int64_t block = summary_min_block_rows;
  while ((rows + block - 1) / block > summary_max_blocks) block *= 2;
  return block;
}

SummaryBuilder::SummaryBuilder(std::int64_t rows, std::int64_t cols)
    : rows_(rows), cols_(cols), block_rows_(summary_finest_block_rows(rows)) {
  blocks_ = (rows + block_rows_ - 1) / block_rows_;
  auto const n = static_cast<std::size_t>(blocks_ * cols);
  min_.assign(n, inf);
  max_.assign(n, -inf);
  max_abs_.assign(n, -inf);
  counts_.assign(static_cast<std::size_t>(blocks_), 0);
}

void SummaryBuilder::add(std::int64_t first, std::int64_t count, float const* gradient, std::int64_t const* counts) {
  for (std::int64_t r = 0; r < count; ++r) {
    std::int64_t const b = (first + r) / block_rows_;
    if (counts) counts_[std::size_t(b)] += counts[r];
    float* lo = min_.data() + b * cols_;
    float* hi = max_.data() + b * cols_;
    float* top = max_abs_.data() + b * cols_;
    float const* v = gradient + r * cols_;
    for (std::int64_t c = 0; c < cols_; ++c) {
      float const x = v[c];
      if (std::isnan(x)) continue;
      if (less(x, lo[c])) lo[c] = x;
      if (less(hi[c], x)) hi[c] = x;
      top[c] = std::max(top[c], std::fabs(x));
    }
  }
}

void SummaryBuilder::merge(SummaryBuilder const& other) {
  for (std::size_t i = 0; i < min_.size(); ++i) {
    if (less(other.min_[i], min_[i])) min_[i] = other.min_[i];
    if (less(max_[i], other.max_[i])) max_[i] = other.max_[i];
    max_abs_[i] = std::max(max_abs_[i], other.max_abs_[i]);
  }
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
}

std::vector<std::int32_t> SummaryBuilder::keys() const {
  std::vector<std::int32_t> k(3 * min_.size());
  for (std::size_t i = 0; i < min_.size(); ++i)
    k[i] = order_key(min_[i]), k[min_.size() + i] = order_key(max_[i]), k[2 * min_.size() + i] = order_key(max_abs_[i]);
  return k;
}

void SummaryBuilder::set_keys(std::vector<std::int32_t> const& k) {
  for (std::size_t i = 0; i < min_.size(); ++i)
    min_[i] = from_order_key(k[i]), max_[i] = from_order_key(k[min_.size() + i]),
    max_abs_[i] = from_order_key(k[2 * min_.size() + i]);
}

Summary SummaryBuilder::finish() const {
  Summary s;
  s.rows = rows_, s.cols = cols_;
  SummaryLevel level;
  level.block_rows = block_rows_, level.blocks = blocks_;
  level.counts = counts_, level.min = min_, level.max = max_, level.max_abs = max_abs_;
  auto no_value_is_nan = [&](SummaryLevel& l) {
    for (std::size_t i = 0; i < l.min.size(); ++i)
      if (l.max[i] < l.min[i]) l.min[i] = l.max[i] = l.max_abs[i] = std::nanf("");
  };
  while (true) {
    bool const last = level.blocks == 1;
    SummaryLevel up;
    if (!last) {  // pairs of blocks, in row order
      up.block_rows = 2 * level.block_rows, up.blocks = (level.blocks + 1) / 2;
      up.counts.assign(std::size_t(up.blocks), 0);
      up.min.assign(std::size_t(up.blocks * cols_), inf);
      up.max.assign(up.min.size(), -inf);
      up.max_abs.assign(up.min.size(), -inf);
      for (std::int64_t b = 0; b < level.blocks; ++b) {
        up.counts[std::size_t(b / 2)] += level.counts[std::size_t(b)];
        for (std::int64_t c = 0; c < cols_; ++c) {
          auto const i = std::size_t(b * cols_ + c), o = std::size_t(b / 2 * cols_ + c);
          if (less(level.min[i], up.min[o])) up.min[o] = level.min[i];
          if (less(up.max[o], level.max[i])) up.max[o] = level.max[i];
          up.max_abs[o] = std::max(up.max_abs[o], level.max_abs[i]);
        }
      }
    }
    no_value_is_nan(level);
    s.levels.push_back(std::move(level));
    if (last) break;
    level = std::move(up);
  }
  return s;
}

std::string summary_sha256(Summary const& s) {
  Sha256 hash;
  for (auto const& level : s.levels) {
    hash.update(&level.block_rows, sizeof(std::int64_t));
    hash.update(level.counts.data(), level.counts.size() * sizeof(std::int64_t));
    std::vector<float> const* const fields[] = {&level.min, &level.max, &level.max_abs};  // nvcc: no braced list
    for (auto const* values : fields) hash.update(values->data(), values->size() * sizeof(float));
  }
  return hash.hex_digest();
}

bool same_bits(Summary const& a, Summary const& b) {
  auto same = [](auto const& x, auto const& y) {
    return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0);
  };
  if (a.rows != b.rows || a.cols != b.cols || a.levels.size() != b.levels.size()) return false;
  for (std::size_t i = 0; i < a.levels.size(); ++i) {
    auto const &x = a.levels[i], &y = b.levels[i];
    if (x.block_rows != y.block_rows || !same(x.counts, y.counts) || !same(x.min, y.min) || !same(x.max, y.max) ||
        !same(x.max_abs, y.max_abs))
      return false;
  }
  return true;
}

namespace detail {

void add_unlisted_zeros(SummaryBuilder& builder, std::int64_t const* rows, std::int64_t n, std::int64_t row_begin,
                        std::int64_t row_end) {
  std::int64_t const block = summary_finest_block_rows(builder.rows());
  std::vector<float> const zeros(static_cast<std::size_t>(builder.cols()), 0.0f);
  std::int64_t const zero_count = 0;
  std::int64_t k = 0;
  for (std::int64_t lo = row_begin; lo < row_end;) {
    std::int64_t const hi = std::min(row_end, (lo / block + 1) * block);
    std::int64_t listed = 0, unlisted = lo;  // the first row of [lo, hi) not listed
    for (; k < n && rows[k] < hi; ++k, ++listed)
      if (rows[k] == unlisted) ++unlisted;
    if (listed < hi - lo) builder.add(unlisted, 1, zeros.data(), &zero_count);
    lo = hi;
  }
}

void write_summary(hid_t file, Summary const& s, SaveOptions const& options) {
  h5::write_string(file, "summary_sha256", summary_sha256(s));
  h5::Handle group = h5::group(H5Gcreate2(file, "summary", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!group.valid()) throw std::runtime_error("creating group 'summary': " + h5::error_text());
  std::vector<std::int64_t> sizes;
  for (auto const& level : s.levels) sizes.push_back(level.block_rows);
  auto list = create_matrix(group, "block_rows", H5T_STD_I64LE, std::int64_t(sizes.size()), 0, options);
  write_block(list, "block_rows", H5T_NATIVE_INT64, 0, std::int64_t(sizes.size()), sizes.data());
  for (auto const& level : s.levels) {
    auto const name = level_name(level.block_rows);
    h5::Handle g = h5::group(H5Gcreate2(group, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (!g.valid()) throw std::runtime_error("creating group 'summary/" + name + "': " + h5::error_text());
    h5::write_int64(g, "block_rows", level.block_rows);
    auto counts = create_matrix(g, "counts", H5T_STD_I64LE, level.blocks, 0, options);
    write_block(counts, "counts", H5T_NATIVE_INT64, 0, level.blocks, level.counts.data());
    // A named array, not a braced list, in range-for: nvcc 11.8 cannot deduce those.
    std::pair<char const*, std::vector<float> const*> const fields[] = {
        {"min", &level.min}, {"max", &level.max}, {"max_abs", &level.max_abs}};
    for (auto const& [field, values] : fields) {
      auto d = create_matrix(g, field, H5T_IEEE_F32LE, level.blocks, s.cols, options);
      write_block(d, field, H5T_NATIVE_FLOAT, 0, level.blocks, values->data());
    }
  }
}

}  // namespace detail

namespace {
// Block counts are sums of row counts: never negative, and the single block's is the
// run's positions (every position counts once, the padding row's too).
void check_summary_counts(std::string const& path, hid_t file, Summary const& s) {
  for (auto const& level : s.levels)
    for (std::size_t b = 0; b < level.counts.size(); ++b)
      if (level.counts[b] < 0)
        throw FileError(path, "/summary/" + level_name(level.block_rows) + "/counts",
                        "holds " + std::to_string(level.counts[b]) + " at block " + std::to_string(b) +
                            "; a count is never negative");
  auto const positions = h5::read_int64(file, "positions");
  auto const total = s.levels.back().counts.front();
  if (positions && total != *positions)
    throw FileError(path, "/summary/" + level_name(s.levels.back().block_rows) + "/counts",
                    "sums to " + std::to_string(total) + " but the run folded positions = " +
                        std::to_string(*positions) + "; the summary is not this run's");
}
}  // namespace

Summary read_summary(std::string const& path) {
  return detail::reading(path, [&] {
    auto file = detail::open_for_reading(path);
    Summary s;
    if (!h5::exists(file, "/summary")) return s;
    s.rows = detail::required_int64(file, path, "num_embeddings");
    s.cols = detail::required_int64(file, path, "embedding_dim");
    if (s.rows < 1 || s.cols < 1)
      throw FileError(path, "", "has a gradient of " + std::to_string(s.rows) + " x " + std::to_string(s.cols) +
                                    ", so its summary cannot fit it");
    std::int64_t n = 0;
    auto list = detail::open_int_vector(file, path, "/summary/block_rows", &n);
    if (n < 1 || n > 64)  // block sizes double from 1 row at most, up to 2^63
      throw FileError(path, "/summary/block_rows", "lists " + std::to_string(n) + " levels; a summary has 1 to 64");
    std::vector<std::int64_t> sizes(std::size_t(std::max<std::int64_t>(n, 0)));
    detail::read_ints(list, path, "/summary/block_rows", 0, n, sizes.data());
    // Any power of two may be the finest (writers may choose it); each next doubles.
    std::int64_t want = sizes.front();
    if (want < 1 || (want & (want - 1)) != 0)
      throw FileError(path, "/summary/block_rows",
                      "starts with blocks of " + std::to_string(want) + " rows, not a power of two");
    for (auto block_rows : sizes) {
      auto const name = "/summary/" + level_name(block_rows);
      if (block_rows != want)
        throw FileError(path, "/summary/block_rows",
                        "lists blocks of " + std::to_string(block_rows) + " rows where " + std::to_string(want) +
                            " were due: the summary does not fit the gradient");
      SummaryLevel level;
      level.block_rows = block_rows, level.blocks = (s.rows + block_rows - 1) / block_rows;
      std::int64_t blocks = 0;
      auto counts = detail::open_int_vector(file, path, name + "/counts", &blocks);
      if (blocks != level.blocks)
        throw FileError(path, name + "/counts", "does not hold one count per block (" + std::to_string(level.blocks) + ")");
      level.counts.resize(std::size_t(blocks));
      detail::read_ints(counts, path, name + "/counts", 0, blocks, level.counts.data());
      std::pair<char const*, std::vector<float>*> const fields[] = {
          {"min", &level.min}, {"max", &level.max}, {"max_abs", &level.max_abs}};
      for (auto [field, values] : fields) {
        auto m = detail::open_float_matrix(file, path, name + "/" + field, false);
        if (m.rows != level.blocks || m.cols != s.cols)
          throw FileError(path, name + "/" + field, "is not (" + std::to_string(level.blocks) + ", " +
                                                        std::to_string(s.cols) + ") like the gradient's blocks");
        detail::check_size(path, name + "/" + field, m.rows, m.cols, 4);  // declared sizes a file cannot back
        detail::check_storage(m.dataset, path, name + "/" + field);
        values->resize(std::size_t(level.blocks * s.cols));
        detail::read_rows(m, path, name + "/" + field, 0, level.blocks, values->data(), false);
      }
      bool const last = level.blocks == 1;
      s.levels.push_back(std::move(level));
      if (last) break;
      if (want > INT64_MAX / 2) break;  // then no level of one block: refused below
      want *= 2;
    }
    if (s.levels.empty() || s.levels.back().blocks != 1)
      throw FileError(path, "/summary/block_rows", "does not reach one block: the summary is incomplete");
    check_summary_counts(path, file, s);
    if (auto const stored = h5::read_string(file, "summary_sha256")) {
      if (*stored != summary_sha256(s))
        throw FileError(path, "/summary",
                        "does not match its SHA-256 (attribute summary_sha256 = " + *stored +
                            "): the file is damaged, or its summary was changed after the run wrote it");
      s.verified = true;
    }
    return s;
  });
}

}  // namespace kembed::io
