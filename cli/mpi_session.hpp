#pragma once
// `mpiexec -n P kembed backward`: MPI starts only when mpiexec (or srun) started this
// process, so an ordinary run never loads an MPI runtime's daemon nor waits for one.
namespace kembed::cli {

// Whether the environment says a process manager launched this process as one rank.
bool launched_as_rank();
// The ranks the launcher started (1 when not launched as a rank).
int launched_ranks();

// MPI_Init on construction, MPI_Finalize on destruction; ranks other than the first
// are muted (Console), so each message and result appears once.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(MpiSession const&) = delete;
  MpiSession& operator=(MpiSession const&) = delete;
};

// Whether an MpiSession is alive in this process.
bool mpi_session_active();

}  // namespace kembed::cli
