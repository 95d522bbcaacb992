#pragma once
// kembed::job::run_backward: the batch job behind `kembed backward`, as a library.
// It reads a batch file in blocks, folds each block into the gradient it carries,
// checkpoints, and writes a run file; memory holds the gradient (this rank's rows)
// and one block, never the table (the gradient does not depend on it) nor the batch.
//
// One code path runs as one process (job::OneProcess) or as every rank of an MPI
// communicator (kembed::mpi::Team, <kembed/mpi/team.hpp>): the team says which rows
// a rank owns, which positions of a block it reads, and how the ranks agree. The
// run file is the same, byte for byte in its datasets, for any number of ranks.
#include <kembed/core/options.hpp>
#include <kembed/embedding.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/job/detail/backward_job.hpp>
#include <kembed/job/settings.hpp>
#include <kembed/job/team.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kembed::job {

// Runs the job on `space` with `team` (collective over the team's ranks). Errors are
// kembed's: InvalidArgument / io::FileError for bad input, io::IoFailure when the
// system fails a write; with many ranks every rank throws the same error, and no
// output file appears.
template <class ExecutionSpace, class Team>
BackwardReport run_backward(ExecutionSpace const& space, Team const& team, BackwardSettings const& settings,
                            Observer const& observer = {}) {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value, "run_backward: a Kokkos execution space");
  static_assert(is_team_v<Team, ExecutionSpace>,
                "run_backward: Team must be a team (kembed/job/team.hpp lists what one has)");
  return detail::BackwardJob<ExecutionSpace, Team>(space, team, settings, observer).run();
}

}  // namespace kembed::job
