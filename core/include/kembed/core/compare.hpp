#pragma once
// Bit-for-bit comparison of two float32 matrices, for `kembed diff` and the
// inspector: which rows differ, and by how much in ULPs and in absolute value.
#include <cstdint>
#include <vector>

namespace kembed {

// Distance between two floats in units in the last place: how many binary32 values
// lie between them. -0.0 and +0.0 are 0 apart (but are still different bits);
// +-inf is one step past +-FLT_MAX. NaN is as far as can be.
std::int64_t ulp_distance(float a, float b) noexcept;

struct RowDifference {
  std::int64_t row = 0;
  std::int64_t columns = 0;      // columns whose bits differ
  std::int64_t max_ulp = 0;      // largest ULP distance in the row ...
  std::int64_t max_ulp_col = 0;  // ... at this column,
  float a = 0, b = 0;            // where the values are these
  double max_abs = 0;            // largest |a - b| in the row (inf for inf against a finite value)
};

struct Comparison {
  std::int64_t rows = 0, cols = 0;
  std::int64_t differing_rows = 0, differing_elements = 0;
  std::int64_t max_ulp = 0, max_ulp_row = -1, max_ulp_col = -1;
  double max_abs = 0;
  std::int64_t max_abs_row = -1, max_abs_col = -1;
  std::vector<RowDifference> differences;  // the first `keep` differing rows, ascending
  bool identical() const noexcept { return differing_elements == 0; }
};

// Compares two row-major rows x cols matrices; keeps at most `keep` differing rows
// (keep < 0: all of them).
Comparison compare(float const* a, float const* b, std::int64_t rows, std::int64_t cols, std::int64_t keep);

}  // namespace kembed
