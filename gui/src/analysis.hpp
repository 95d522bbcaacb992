#pragma once
// What the inspector shows, computed without Qt: a run (or table) opened without
// reading its gradient (counts, provenance and the gradient's summary come first;
// rows are read by hyperslab when zoomed in), exact count histograms, heatmap bands,
// one pass over the rows for what needs them all, and comparisons.
#include <kembed/core/compare.hpp>
#include <kembed/io/describe.hpp>
#include <kembed/io/row_reader.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/summary.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kembed::inspector {

// Every call into kembed::io (HDF5) from the inspector holds this: HDF5 is not
// thread-safe, and the window reads rows while a background pass reads others.
std::mutex& io_mutex();

// Called with the fraction done; returns false to stop.
using Progress = std::function<bool(double)>;

// Each column's distribution over the rows (NaN left out): mean and standard
// deviation, and percentiles to within 1/8 of a binary order of magnitude (values
// are counted in bins of their sign, exponent and first 3 mantissa bits).
struct ColumnStats {
  static constexpr int bins = 4096;
  static constexpr double levels[] = {0.01, 0.10, 0.25, 0.50, 0.75, 0.90, 0.99};
  std::int64_t rows = 0;  // the rows they are over
  std::vector<double> mean, stddev;
  std::vector<std::array<float, 7>> percentiles;  // at `levels`, per column
  std::vector<float> min, max;                    // exact, NaN left out (NaN for a column of none)
  std::vector<std::int64_t> nan;                  // NaN per column
  bool empty() const noexcept { return mean.empty(); }
};
// The bin of a value (ordered as the values are), and the least value in a bin.
int column_bin(float x);
float column_bin_floor(int bin);

struct Dataset {
  std::string path;
  std::string format;  // "kembed-run-1" or "kembed-embedding-1"
  std::int64_t rows = 0, cols = 0;
  std::vector<std::int64_t> counts;  // per-row counts (runs); empty for tables
  std::int64_t padding_idx = -1;     // the padding row (its gradient is zero), or -1 for none
  std::string sha256;                // the run's stored gradient SHA-256
  bool counts_verified = false;      // the counts matched their stored counts_sha256 (older runs have none)
  // The gradient's (or table's) summary: stored by the job, or computed by the pass.
  io::Summary summary;
  bool summary_stored = false;
  // From the pass over every row (scan): empty until it has run.
  std::vector<float> row_norm;     // Euclidean norm of each row
  std::vector<float> row_max_abs;  // largest |value| of each row
  ColumnStats columns;
  ColumnStats columns_counted;  // the same over the rows with a count above 0 (runs)
  // What produced it, as (field, value) pairs in a fixed order, so that two runs
  // line up side by side.
  std::vector<std::pair<std::string, std::string>> provenance;
  // The settings it was made with: a table's every one, a run's those it records.
  Config settings;
  // What `kembed info` prints of it: format, provenance, attributes, datasets.
  io::FileInfo info;
  std::shared_ptr<io::RowReader> reader;
  // Rows that fail to read (a damaged chunk) read as NaN, and the first failure is
  // reported once to `on_damage` (from whichever thread read them), so that no view
  // ends the program and the window can close the file.
  struct Damage {
    std::mutex mutex;
    std::string first;  // empty: nothing failed
    std::function<void(std::string const&)> on_damage;
  };
  std::shared_ptr<Damage> damage = std::make_shared<Damage>();
  bool damaged() const;

  bool is_run() const noexcept { return io::is_run_format(format); }
  bool is_padding(std::int64_t row) const noexcept { return padding_idx >= 0 && row == padding_idx; }
  bool scanned() const noexcept { return row_norm.size() == std::size_t(rows); }
  std::int64_t bytes() const noexcept { return rows * cols * 4; }
  // Rows [first, first + count), count x cols values, read from the file.
  std::vector<float> read_rows(std::int64_t first, std::int64_t count) const;
};

// "none", or the padding row's number.
std::string padding_text(std::int64_t padding_idx);

// Opens a run or table file (throws kembed::Error with the file's name), reading
// its counts, provenance and stored summary, never its gradient.
Dataset load(std::string const& path);

// One pass over every row, in pieces: per-row statistics, the summary (when the file
// has none) and, for a run, whether the gradient matches its stored SHA-256.
struct Scan {
  std::vector<float> row_norm, row_max_abs;
  ColumnStats columns;
  ColumnStats columns_counted;  // over the rows with a count above 0 (runs)
  io::Summary summary;  // empty when the file had one
  bool sha256_ok = true;
  // A stored summary (checked against its summary_sha256 as the file opened) is
  // recomputed from the rows and must have the same bits.
  bool summary_ok = true;
  std::string error;       // a read that failed (a damaged chunk); then nothing else holds
  bool completed = false;  // false when stopped
};
Scan scan(Dataset const& data, Progress const& progress = {});
// Puts a completed scan's results into the dataset.
void apply(Scan&& scan, Dataset& data);
// A dataset whose gradient fits in `budget` bytes is scanned as it opens.
inline constexpr std::int64_t scan_on_open_bytes = std::int64_t{256} << 20;

// Rows per count, in bins the caller chose. Bin i holds the rows whose count is in
// [lower[i], upper[i]); linear bins have equal integer widths, logarithmic ones grow
// by a constant factor (the first holds count 0). Every row lands in exactly one bin.
struct Histogram {
  std::vector<std::int64_t> lower, upper, rows;
};
Histogram count_histogram(std::vector<std::int64_t> const& counts, int bins, bool logarithmic);

// The value a heatmap cell shows for a set of values with least `lo` and greatest
// `hi`: the one of larger magnitude, the positive one on a tie (NaN when both are).
inline float heat_value(float lo, float hi) {
  return -lo > hi ? lo : hi;
}

// The heatmap of rows [first, last) in at most `bands` bands, each band one cell
// per column holding heat_value of its rows. With `bands` or fewer blocks of the
// summary's finest level in view a band is whole blocks of the coarsest level that
// still gives a band per pixel (bands start on block boundaries, so the first may
// begin before `first`); closer in, rows are read from the file and a band is whole
// rows, equal shares of [first, last), unless that is more than `max_read_values`
// values (16 MiB), when the finest level's blocks are shown. Values read per paint stay about
// bands x cols x 2 whatever the row count.
struct Heat {
  std::vector<float> values;        // bands x cols
  std::vector<std::int64_t> first;  // each band's first row, and one past the last band's
  std::int64_t rows_per_band = 0;   // a band's rows (the last may hold fewer)
  bool from_rows = false;           // read from the gradient (else from the summary)
  std::int64_t values_read = 0;
  int bands() const noexcept { return first.empty() ? 0 : int(first.size()) - 1; }
};
Heat heat_bands(Dataset const& data, std::int64_t first, std::int64_t last, int bands,
                std::int64_t max_read_values = std::int64_t{1} << 22);
// The same for any rows x cols matrix given by its summary and a way to read rows
// (count x cols values from `first`): A - B is one.
using ReadRows = std::function<std::vector<float>(std::int64_t first, std::int64_t count)>;
Heat heat_bands(io::Summary const& summary, std::int64_t rows, std::int64_t cols, ReadRows const& read,
                std::int64_t first, std::int64_t last, int bands,
                std::int64_t max_read_values = std::int64_t{1} << 22);
// Rows of A - B, read from both files (the heatmap of the difference, zoomed in).
ReadRows difference_rows(std::shared_ptr<Dataset const> a, std::shared_ptr<Dataset const> b);

// The k rows with the most counts, most first (ties by row id).
std::vector<std::int64_t> top_rows(std::vector<std::int64_t> const& counts, std::size_t k);

struct DiffSummary {
  bool shapes_differ = false;
  bool completed = true;  // false when stopped
  std::int64_t counts_differing_rows = 0;
  Comparison values;  // the first diff_rows_kept differing rows
  float at_max_abs_a = 0, at_max_abs_b = 0;  // the values where |a - b| is largest
  io::Summary difference;  // of A - B, for the heatmap of the difference
  std::vector<std::string> provenance_differs;  // fields whose values differ
  bool identical() const noexcept { return !shapes_differ && values.identical() && counts_differing_rows == 0; }
};
inline constexpr std::int64_t diff_rows_kept = 100000;
// Compares the two gradients row piece by row piece (reading both files).
DiffSummary diff(Dataset const& a, Dataset const& b, Progress const& progress = {});

// The verdict in plain words: a headline, then where the largest difference is and
// how large against the values there, how the differing rows relate to the counts,
// and the likely reason from the two runs' provenance.
std::vector<std::string> explain(Dataset const& a, Dataset const& b, DiffSummary const& s);

std::string hex_bits(float x);  // "0x3f800000"

}  // namespace kembed::inspector
