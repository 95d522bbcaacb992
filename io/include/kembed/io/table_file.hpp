#pragma once
// Table files: a kembed embedding table and its settings in HDF5
// (docs/FORMAT.md, format tag "kembed-embedding-1"), and plain 2-D float datasets
// written by other tools.
#include <kembed/core/options.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kembed::io {

struct Collective;  // an MPI communicator, in <kembed/io/collective.hpp>

inline constexpr char const* table_format = "kembed-embedding-1";

struct SaveOptions {
  bool deflate = false;             // shuffle + deflate: smaller files, slower saves
  int deflate_level = 4;            // 1..9
  std::int64_t rows_per_chunk = 0;  // 0: about 1 MiB chunks
  std::string created_by;           // the creating command; empty: this process's command line
  // JSON stored as the root's `provenance` attribute where not empty: what a table or
  // state made by `kembed step` was made from (its inputs' SHA-256, the optimizer,
  // its settings and the step).
  std::string provenance;
};

// What a table file holds. `weight` is row-major; after load_rows it holds rows
// [first_row, first_row + weight.size() / embedding_dim) of the table.
struct TableFile {
  Config config;
  std::vector<float> weight;
  std::int64_t first_row = 0;
  std::string kembed_version;
  std::string created_by;
  std::string provenance;  // "" where the file has none (see SaveOptions)
};

// Saves crash-safely: the file is written under a temporary name in the same
// folder, synced, and renamed over `path`; a failed save leaves `path` as it was.
void save_table(std::string const& path, float const* weight, Config const& config, SaveOptions const& options = {});

// A table saved by row slabs: rows [first_row, first_row + row_count) of the table
// `config` describes, at `rows` (row-major). With `collective`
// (<kembed/io/collective.hpp>), every rank calls it with the same config and its own
// rows, the slabs covering the table in rank order (kembed::mpi::rows_of), and the
// file's /weight is byte for byte the one process's; a non-finite value on any rank
// stops every rank before anything is written. Without, the slab is the whole table.
void save_table(std::string const& path, float const* rows, std::int64_t first_row, std::int64_t row_count,
                Config const& config, SaveOptions const& options, Collective const* collective = nullptr);
TableFile load_table(std::string const& path);
// Rows [first, first + count) of a kembed table, read by hyperslab.
TableFile load_rows(std::string const& path, std::int64_t first, std::int64_t count);
// Checks that rows [first, first + count) of a kembed table are finite, reading them
// in pieces of at most 16 MiB (a job that does not need the values checks a table
// it names this way); throws FileError naming the first NaN or infinity.
void check_table_finite(std::string const& path, std::int64_t first, std::int64_t count);

// A plain 2-D float dataset at `dataset` in any HDF5 file (h5py's layouts, chunked
// or contiguous, compressed or not, either byte order). float32 loads as it is;
// float64 and float16 are refused unless `convert` is true, then rounded to float32.
TableFile read_table_dataset(std::string const& path, std::string const& dataset, bool convert = false);

}  // namespace kembed::io
