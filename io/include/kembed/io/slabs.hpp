#pragma once
// What one process (all of them) or one MPI rank (its own) holds of a gradient when
// a job writes its run file or a checkpoint: run_file.hpp and job_files.hpp both
// write from these.
#include <cstdint>

namespace kembed::io {

// Rows [first, first + count) of a gradient and its counts: what one process (all of
// them) or one rank (its own rows) holds when a sharded job writes its files.
struct RowSlab {
  std::int64_t first = 0, count = 0;
  float const* gradient = nullptr;       // count x cols
  std::int64_t const* counts = nullptr;  // count
};

// A sparse run's listed rows held by this process: entries [first, first + count)
// of the file's `total` listed rows, all within the table rows [row_begin, row_end)
// this process owns (one process: [0, V); the ranks' ranges cover V in rank order).
struct SparseSlab {
  std::int64_t first = 0, count = 0, total = 0;
  std::int64_t row_begin = 0, row_end = 0;
  std::int64_t const* rows = nullptr;    // count, ascending, global row numbers
  float const* values = nullptr;         // count x cols
  std::int64_t const* counts = nullptr;  // count
};

}  // namespace kembed::io
