#include "mpi_session.hpp"

#include "console.hpp"

#include <cstdlib>
#include <string>
#if defined(KEMBED_CLI_MPI)
#include <mpi.h>
#endif

namespace kembed::cli {
namespace {
bool active = false;

// Open MPI, MPICH/Hydra and PMIx launchers (mpiexec, srun) each set one of these.
char const* size_variable() {
  for (char const* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(name)) return name;
  return nullptr;
}
}  // namespace

bool launched_as_rank() {
  return size_variable() != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

int launched_ranks() {
  char const* name = size_variable();
  if (!name) return 1;
  int const n = std::atoi(std::getenv(name));
  return n > 0 ? n : 1;
}

#if defined(KEMBED_CLI_MPI)
MpiSession::MpiSession() {
  int provided = 0;
  // MULTIPLE where the library gives it: the job's I/O thread then reads the next
  // block collectively beside the exchange (mpi::Team); else files stay on this thread.
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) Console::get().set_muted(true);
  active = true;
}
MpiSession::~MpiSession() {
  active = false;
  MPI_Finalize();
}
#else
MpiSession::MpiSession() {}
MpiSession::~MpiSession() {}
#endif

bool mpi_session_active() {
  return active;
}

}  // namespace kembed::cli
