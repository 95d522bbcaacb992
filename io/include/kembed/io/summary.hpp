#pragma once
// A gradient's multi-resolution summary, stored beside it in a run file (/summary,
// docs/FORMAT.md): per block of 2^k rows, the sum of the rows' counts and, per
// column, the least, the greatest and the largest |value|. A viewer paints any zoom
// of a huge gradient from it without reading the gradient.
//
// Every statistic is exact and does not depend on the order rows are added in, so
// the summary has the same bits however the rows were split (threads, MPI ranks):
// NaN is left out, -0.0 counts as less than +0.0, and a block with no value that is
// not NaN holds NaN.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kembed::io {

// The order the summary's min and max use: the floats' order, with -0.0 below +0.0.
inline bool summary_less(float a, float b) noexcept {
  return a < b || (a == b && std::signbit(a) && !std::signbit(b));
}
// Integers in that order (NaN aside), and back: min and max reduce exactly as integers.
inline std::int32_t order_key(float x) noexcept {
  std::int32_t i;
  std::memcpy(&i, &x, 4);
  return i < 0 ? i ^ 0x7fffffff : i;
}
inline float from_order_key(std::int32_t key) noexcept {
  std::int32_t const i = key < 0 ? key ^ 0x7fffffff : key;
  float x;
  std::memcpy(&x, &i, 4);
  return x;
}

// The finest level has at most this many blocks, of at least summary_min_block_rows
// rows (so that the summary of a small gradient is not larger than the gradient: a
// viewer reads rows that close in); every coarser level up to one block is kept too
// (at most twice the finest level's size in all).
inline constexpr std::int64_t summary_max_blocks = 4096;
inline constexpr std::int64_t summary_min_block_rows = 16;

struct SummaryLevel {
  std::int64_t block_rows = 0;       // a power of two; the last block may hold fewer rows
  std::int64_t blocks = 0;           // ceil(rows / block_rows)
  std::vector<std::int64_t> counts;  // blocks: each block's rows' counts, summed
  std::vector<float> min, max;       // blocks x cols
  std::vector<float> max_abs;        // blocks x cols
};

struct Summary {
  std::int64_t rows = 0, cols = 0;
  std::vector<SummaryLevel> levels;  // finest first; the last has one block
  // As read: whether the file stored summary_sha256 (older files do not) and it
  // matched. A summary without one is unverified until recomputed from the rows.
  bool verified = false;
  bool empty() const noexcept { return levels.empty(); }
};

// SHA-256 of a summary as a run file stores it (attribute summary_sha256,
// docs/FORMAT.md): level by level, finest first, its block_rows (int64), then its
// counts (int64), min, max and max_abs (float32), all little-endian.
std::string summary_sha256(Summary const& summary);
// Whether two summaries hold the same bits (NaN included).
bool same_bits(Summary const& a, Summary const& b);

// Rows per block of the finest level for a gradient of `rows` rows: the least power
// of two, 16 or more, that leaves at most summary_max_blocks blocks.
std::int64_t summary_finest_block_rows(std::int64_t rows);

// Builds a summary from rows added in any order and any pieces.
class SummaryBuilder {
 public:
  SummaryBuilder(std::int64_t rows, std::int64_t cols);
  // Rows [first, first + count): `gradient` holds count x cols values, `counts`
  // (optional) count counts.
  void add(std::int64_t first, std::int64_t count, float const* gradient, std::int64_t const* counts);
  void merge(SummaryBuilder const& other);  // another builder of the same shape
  Summary finish() const;

  // The finest level as it is being built, for a reduction over MPI ranks:
  // order-preserving integer keys of min, max and max_abs (blocks x cols each).
  std::vector<std::int32_t> keys() const;
  void set_keys(std::vector<std::int32_t> const& keys);
  std::vector<std::int64_t>& counts() { return counts_; }
  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t cols() const noexcept { return cols_; }

 private:
  std::int64_t rows_, cols_, block_rows_, blocks_;
  std::vector<float> min_, max_, max_abs_;  // +inf, -inf, -inf where nothing was added
  std::vector<std::int64_t> counts_;
};

// The summary stored in a run file, or an empty one when the file has none (runs
// written before it existed). Throws FileError on a summary that does not fit the
// gradient's shape, that fails its stored summary_sha256, whose block counts are
// negative or whose single block's count is not the run's positions.
Summary read_summary(std::string const& path);

}  // namespace kembed::io
