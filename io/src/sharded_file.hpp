#pragma once
// Files whose big datasets are written in row slabs, by one process or by every rank
// of an MPI communicator (run files and checkpoints of a sharded job).
#include "collective_lists.hpp"
#include "common.hpp"

#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>

#include <functional>
#include <string>
#include <vector>

namespace kembed::io::detail {

// A dataset of `rows` rows (x cols; 0: 1-D) whose rows [slab.first, + slab.count)
// come from this process, at `mine`.
struct SlabDataset {
  char const* name;
  hid_t file_type, mem_type;
  std::int64_t rows, cols;
  void const* mine;
};

// float32 rows x cols, and int64 rows (1-D): the datasets kembed writes by slabs.
// (Functions, not braces: HDF5's type macros hold a comma operator nvcc misreads.)
SlabDataset float_rows(char const* name, std::int64_t rows, std::int64_t cols, float const* mine);
SlabDataset int64_rows(char const* name, std::int64_t rows, std::int64_t const* mine);

// Writes `path` crash-safely: the first rank (or the one process) creates the
// temporary file, `header` writes its attributes and groups there, and the datasets
// are created; then each process writes its rows (collectively through MPI-IO when
// `collective` is given), and the first rank publishes the file. One process writes
// its rows first and the header last, so that `header` may wait for what it needs. Any rank's failure
// stops every rank with the same IoFailure, and nothing appears under `path`.
// `bad_input` is this process's objection to its own rows (empty: none): if any rank
// has one, every rank throws the first rank's as InvalidArgument, before any file.
void write_slabs(std::string const& path, std::string const& what, std::function<void(hid_t root)> const& header,
                 std::vector<SlabDataset> const& datasets, RowSlab const& slab, SaveOptions const& options,
                 Collective const* collective, std::string const& bad_input = {});

// Every rank (or the one process) throws the first failing rank's `problem` (empty:
// none failed) as an IoFailure for `path`.
void agree_on_problem(std::string const& path, std::string const& problem, Collective const* collective);
// The first rank's `text`, on every rank (as it is without a communicator).
std::string broadcast_text(Collective const* collective, std::string text);
// This process's rank on `collective` (0 without one).
int rank_in(Collective const* collective);
// The problem an IoFailure for `path` names, without "kembed: <path>: ".
std::string problem_of(std::string const& path, IoFailure const& e);

}  // namespace kembed::io::detail
