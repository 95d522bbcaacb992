#include <kembed/core/compare.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace kembed {
namespace {

// Floats in the order of their values as integers: adjacent floats are 1 apart.
std::int64_t ordered(float x) noexcept {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return (b & 0x80000000u) ? -std::int64_t(b & 0x7fffffffu) : std::int64_t(b);
}

}  // namespace

std::int64_t ulp_distance(float a, float b) noexcept {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<std::int64_t>::max();
  return std::llabs(ordered(a) - ordered(b));
}

Comparison compare(float const* a, float const* b, std::int64_t rows, std::int64_t cols, std::int64_t keep) {
  Comparison out;
  out.rows = rows;
  out.cols = cols;
  for (std::int64_t r = 0; r < rows; ++r) {
    float const* pa = a + r * cols;
    float const* pb = b + r * cols;
    if (std::memcmp(pa, pb, std::size_t(cols) * sizeof(float)) == 0) continue;
    RowDifference row;
    row.row = r;
    row.max_ulp = -1;
    for (std::int64_t c = 0; c < cols; ++c) {
      if (std::memcmp(pa + c, pb + c, sizeof(float)) == 0) continue;
      ++row.columns;
      auto const ulp = ulp_distance(pa[c], pb[c]);
      double diff = std::fabs(double(pa[c]) - double(pb[c]));
      if (std::isnan(diff)) diff = std::numeric_limits<double>::infinity();
      if (ulp > row.max_ulp) row.max_ulp = ulp, row.max_ulp_col = c, row.a = pa[c], row.b = pb[c];
      if (diff > row.max_abs) row.max_abs = diff;
      if (ulp > out.max_ulp || out.max_ulp_row < 0) out.max_ulp = ulp, out.max_ulp_row = r, out.max_ulp_col = c;
      if (diff > out.max_abs || out.max_abs_row < 0) out.max_abs = diff, out.max_abs_row = r, out.max_abs_col = c;
    }
    out.differing_elements += row.columns;
    ++out.differing_rows;
    if (keep < 0 || std::int64_t(out.differences.size()) < keep) out.differences.push_back(row);
  }
  return out;
}

}  // namespace kembed
