#pragma once
// What the inspector shows, computed without Qt: a run (or table) loaded with
// per-row statistics, exact count histograms, heatmap bands, and comparisons.
#include <kembed/core/compare.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kembed::inspector {

struct Dataset {
  std::string path;
  std::string format;  // "kembed-run-1" or "kembed-embedding-1"
  std::int64_t rows = 0, cols = 0;
  std::vector<float> values;         // the gradient (runs) or the table, row-major
  std::vector<std::int64_t> counts;  // per-row counts (runs); empty for tables
  std::int64_t padding_idx = -1;     // the padding row (its gradient is zero), or -1 for none
  std::vector<float> row_norm;       // Euclidean norm of each row
  std::vector<float> row_max_abs;    // largest |value| of each row
  // For the heatmap: level k holds, per block of 16 * 2^k rows and per column, the
  // first value of largest magnitude (as heat_bands defines it), so a band of any
  // height is folded from O(log rows) blocks. 1/8 of the values' size in all.
  std::vector<std::vector<float>> heat_levels;
  std::string sha256;  // the run's stored gradient SHA-256
  // What produced it, as (field, value) pairs in a fixed order, so that two runs
  // line up side by side.
  std::vector<std::pair<std::string, std::string>> provenance;
  bool is_run() const noexcept { return !counts.empty(); }
  bool is_padding(std::int64_t row) const noexcept { return padding_idx >= 0 && row == padding_idx; }
};

// "none", or the padding row's number.
std::string padding_text(std::int64_t padding_idx);

// Loads a run or table file (throws kembed::Error with the file's name). The run's
// SHA-256 is not recomputed here (see verify_sha256): first paint comes first.
Dataset load(std::string const& path);
// Recomputes the gradient's SHA-256 and compares it with the stored one, in pieces;
// false as soon as `cancel` (if given) is set.
bool verify_sha256(Dataset const& data, std::atomic<bool> const* cancel = nullptr);

// Per-row statistics and the heatmap's levels, on all cores.
void compute_row_stats(Dataset& data);

// Rows per count, in bins the caller chose. Bin i holds the rows whose count is in
// [lower[i], upper[i]); linear bins have equal integer widths, logarithmic ones grow
// by a constant factor (the first holds count 0). Every row lands in exactly one bin.
struct Histogram {
  std::vector<std::int64_t> lower, upper, rows;
};
Histogram count_histogram(std::vector<std::int64_t> const& counts, int bins, bool logarithmic);

// Rows [first, last) squeezed into `bands` bands of whole rows; each band holds, per
// column, the value of largest magnitude among its rows (sign kept; the first such
// row on ties; +0.0 when all are zero or NaN), so a single hot row stays visible.
// Returns bands x cols values; `band_rows` gets each band's first row. With the
// dataset's heat_levels the work is at most about bands x cols x 60 values read,
// whatever the row count; `values_read` (if given) receives how many were.
std::vector<float> heat_bands(Dataset const& data, std::int64_t first, std::int64_t last, int bands,
                              std::vector<std::int64_t>* band_first_row = nullptr, std::int64_t* values_read = nullptr);

// The k rows with the most counts, most first (ties by row id).
std::vector<std::int64_t> top_rows(std::vector<std::int64_t> const& counts, std::size_t k);

struct DiffSummary {
  bool shapes_differ = false;
  std::int64_t counts_differing_rows = 0;
  Comparison values;                            // every differing row
  std::vector<std::string> provenance_differs;  // fields whose values differ
  bool identical() const noexcept { return !shapes_differ && values.identical() && counts_differing_rows == 0; }
};
DiffSummary diff(Dataset const& a, Dataset const& b);

std::string hex_bits(float x);  // "0x3f800000"

}  // namespace kembed::inspector
