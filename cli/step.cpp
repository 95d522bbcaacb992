// kembed step configures one optimizer step (kembed::job::run_step, job/) and prints
// what it wrote.
#include "commands.hpp"
#include "console.hpp"
#include "mpi_session.hpp"

#include <kembed/backends.hpp>
#include <kembed/job/step.hpp>
#if defined(KEMBED_CLI_MPI)
#include <kembed/mpi/team.hpp>
#endif

#include <cstdio>

namespace kembed::cli {

template <class Space>
int step(StepArgs const& args) {
  job::Observer observer;
  observer.name = flag_of;
  observer.log = [](std::string const& text) { Console::get().log(text); };
  job::StepReport r;
#if defined(KEMBED_CLI_MPI)
  if (mpi_session_active()) {
    r = job::run_step(Space(), kembed::mpi::Team(MPI_COMM_WORLD), args, observer);
  } else
#endif
  {
    r = job::run_step(Space(), args, observer);
  }
  if (Console::get().muted()) return Exit::ok;  // another rank than the first: it reports
  std::printf("table:      %s (%s x %s, SHA-256 %s)\n", r.out.c_str(), with_commas(r.rows).c_str(),
              with_commas(r.cols).c_str(), r.table_sha256.c_str());
  std::printf("state:      %s (%s after step %s, SHA-256 %s)\n", r.state_out.c_str(), r.optimizer.c_str(),
              with_commas(r.step).c_str(), r.state_sha256.c_str());
  std::printf("step:       %s rows updated by a %s gradient (%s with %d thread(s)%s)\n",
              with_commas(r.rows_updated).c_str(), r.sparse ? "row-sparse" : "dense", r.backend.c_str(), r.threads,
              r.ranks > 1 ? (" on each of " + std::to_string(r.ranks) + " MPI ranks").c_str() : "");
  std::printf("time:       %s reading, %s stepping, %s writing, %s total\n", seconds_text(r.read_seconds).c_str(),
              seconds_text(r.step_seconds).c_str(), seconds_text(r.write_seconds).c_str(),
              seconds_text(r.total_seconds).c_str());
  return Exit::ok;
}

// One instantiation per backend the Kokkos found was built with (kembed/backends.hpp).
#if defined(KOKKOS_ENABLE_SERIAL)
template int step<Kokkos::Serial>(StepArgs const&);
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
template int step<Kokkos::OpenMP>(StepArgs const&);
#endif
#if defined(KOKKOS_ENABLE_CUDA)
template int step<Kokkos::Cuda>(StepArgs const&);
#endif
#if defined(KOKKOS_ENABLE_HIP)
template int step<HipSpace>(StepArgs const&);
#endif

}  // namespace kembed::cli
