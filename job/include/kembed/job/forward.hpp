#pragma once
// kembed::job::run_forward: the job behind `kembed forward`, as a library. It reads
// a batch file's ids in blocks, looks each block's rows up in the table and writes
// them to an output file (format kembed-forward-1, dataset /y). Memory holds the
// table and two blocks of ids and rows, never the whole output. Reading the next
// block, writing the last one and hashing the inputs run on threads of their own
// while this one looks up (docs/PERFORMANCE.md, "The whole job").
#include <kembed/embedding.hpp>
#include <kembed/job/detail/forward_job.hpp>
#include <kembed/job/one_process.hpp>
#include <kembed/job/settings.hpp>

namespace kembed::job {

// Runs the job on `space`. Errors are kembed's: InvalidArgument / io::FileError for
// bad input (nothing is written), io::IoFailure when the system fails a write (the
// output is not left half-written).
template <class ExecutionSpace>
ForwardReport run_forward(ExecutionSpace const& space, ForwardSettings const& settings, Observer const& observer = {}) {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value, "run_forward: a Kokkos execution space");
  return detail::run_forward(space, OneProcess(), settings, observer);
}

// The same job over a team (kembed/job/team.hpp): with kembed::mpi::Team, each rank
// holds its range of the table's rows, reads its part of every block of ids, and the
// lookups go to the rows' owners (mpi::ShardedEmbedding); y is written collectively
// and is byte for byte one process's, max_norm included (each block is one forward
// call over every rank). Collective; errors reach every rank.
template <class ExecutionSpace, class Team>
ForwardReport run_forward(ExecutionSpace const& space, Team const& team, ForwardSettings const& settings,
                          Observer const& observer = {}) {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value, "run_forward: a Kokkos execution space");
  return detail::run_forward(space, team, settings, observer);
}

}  // namespace kembed::job
