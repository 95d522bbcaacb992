// kembed backward configures the batch job (kembed::job, job/) and prints what it
// did; kembed forward streams a batch's ids through the layer's forward.
#include "commands.hpp"
#include "console.hpp"
#include "mpi_session.hpp"

#include <kembed/backends.hpp>
#include <kembed/embedding.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/job/backward.hpp>
#include <kembed/job/forward.hpp>
#include <kembed/job/one_process.hpp>
#if defined(KEMBED_CLI_MPI)
#include <kembed/mpi/team.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <utility>

namespace kembed::cli {
namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

}  // namespace

template <class Space>
int backward(BackwardArgs const& args) {
  auto& console = Console::get();
  auto const t_start = clock_type::now();
  std::optional<Progress> progress;
  job::Observer observer;
  observer.name = flag_of;
  observer.log = [&](std::string const& text) { console.log(text); };
  std::string unit = "positions";
  observer.unit = [&](std::string const& u) { unit = u; };
  observer.progress = [&](std::int64_t done, std::int64_t total, std::int64_t start) {
    if (!progress) progress.emplace("backward", total, start, unit);
    progress->update(done);
    if (done == total) progress->finish();
  };
  Space space;
  job::BackwardReport r;
#if defined(KEMBED_CLI_MPI)
  if (mpi_session_active()) {
    r = job::run_backward(space, kembed::mpi::Team(MPI_COMM_WORLD), args, observer);
  } else
#endif
  {
    r = job::run_backward(space, job::OneProcess(), args, observer);
  }
  if (console.muted()) return Exit::ok;  // another rank than the first: it reports
  // Positions folded by this process (a bag job resumes at a bag: its positions are not known here).
  double const done = double(r.positions - (r.bags > 0 ? 0 : r.resumed_from));
  std::printf("run file:   %s\n", r.out.c_str());
  std::printf("gradient:   %s x %s, SHA-256 %s\n", with_commas(r.rows).c_str(), with_commas(r.cols).c_str(),
              r.gradient_sha256.c_str());
  std::string const where = r.backend + " with " + std::to_string(r.threads) + " thread(s)" +
                            (r.ranks > 1 ? " on each of " + std::to_string(r.ranks) + " MPI ranks" : "");
  std::string const resumed = r.resumed_from ? "resumed at " + with_commas(r.resumed_from) : "one pass";
  if (r.bags > 0)
    std::printf(
        "bags:       %s bags of %s positions, pooling %s, in %s microbatches of %s bags (%s, plan %s, mode %s, "
        "%s)\n",
        with_commas(r.bags).c_str(), with_commas(r.positions).c_str(), r.pooling.c_str(),
        with_commas(r.microbatches).c_str(), with_commas(r.microbatch_size).c_str(), resumed.c_str(),
        r.plan_used.c_str(), r.mode.c_str(), where.c_str());
  else
    std::printf("positions:  %s in %s microbatches of %s (%s, plan %s, mode %s, %s)\n",
                with_commas(r.positions).c_str(), with_commas(r.microbatches).c_str(),
                with_commas(r.microbatch_size).c_str(), resumed.c_str(), r.plan_used.c_str(), r.mode.c_str(),
                where.c_str());
  double const total_here = since(t_start);
  std::printf(
      "time:       %s backward, %s reading, %s writing, %s total (%.3g positions/s reading and folding, %.3g end to "
      "end)\n",
      seconds_text(r.backward_seconds).c_str(), seconds_text(r.read_seconds).c_str(),
      seconds_text(r.write_seconds).c_str(), seconds_text(total_here).c_str(),
              r.backward_seconds + r.read_seconds > 0 ? done / (r.backward_seconds + r.read_seconds) : 0.0,
              total_here > 0 ? done / total_here : 0.0);
  if (r.ranks > 1)
    std::printf("exchange:   %.1f bytes per position between ranks, %s of the first rank's backward\n",
                double(r.bytes_exchanged) / double(std::max<std::int64_t>(r.positions - r.resumed_from, 1)),
                seconds_text(r.exchange_seconds).c_str());
  std::printf("peak memory: %.1f MiB%s\n", double(peak_rss_bytes()) / (1 << 20),
              r.ranks > 1 ? " (the first rank)" : "");
  std::string const program = args.command_line.empty() ? "kembed" : args.command_line.front();
  std::printf("look at it: %s info %s; %s diff %s OTHER.h5\n", program.c_str(), r.out.c_str(), program.c_str(),
              r.out.c_str());
  return Exit::ok;
}

template <class Space>
int forward(ForwardArgs const& args) {
  std::optional<Progress> progress;
  job::Observer observer;
  observer.name = flag_of;
  std::string unit = "positions";
  observer.unit = [&](std::string const& u) { unit = u; };
  observer.progress = [&](std::int64_t done, std::int64_t total, std::int64_t) {
    if (!progress) progress.emplace("forward", total, 0, unit);
    progress->update(done);
    if (done == total) progress->finish();
  };
  Space space;
  job::ForwardReport r;
#if defined(KEMBED_CLI_MPI)
  if (mpi_session_active()) {
    r = job::run_forward(space, kembed::mpi::Team(MPI_COMM_WORLD), args, observer);
  } else
#endif
  {
    r = job::run_forward(space, args, observer);
  }
  if (Console::get().muted()) return Exit::ok;  // another rank than the first: it reports
  std::printf("output:     %s (y: %s x %s float32%s)\n", r.out.c_str(), with_commas(r.positions).c_str(),
              with_commas(r.cols).c_str(),
              r.pooling.empty() ? "" : (", one row per bag, pooling " + r.pooling).c_str());
  std::printf("time:       %s (%s looking up%s, %s waiting for writes)\n", seconds_text(r.total_seconds).c_str(),
              seconds_text(r.forward_seconds).c_str(),
              r.ranks > 1 ? (" on each of " + std::to_string(r.ranks) + " MPI ranks").c_str() : "",
              seconds_text(r.write_seconds).c_str());
  return Exit::ok;
}

// One instantiation per backend the Kokkos found was built with (kembed/backends.hpp).
#if defined(KOKKOS_ENABLE_SERIAL)
template int backward<Kokkos::Serial>(BackwardArgs const&);
template int forward<Kokkos::Serial>(ForwardArgs const&);
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
template int backward<Kokkos::OpenMP>(BackwardArgs const&);
template int forward<Kokkos::OpenMP>(ForwardArgs const&);
#endif
#if defined(KOKKOS_ENABLE_CUDA)
template int backward<Kokkos::Cuda>(BackwardArgs const&);
template int forward<Kokkos::Cuda>(ForwardArgs const&);
#endif
#if defined(KOKKOS_ENABLE_HIP)
template int backward<HipSpace>(BackwardArgs const&);
template int forward<HipSpace>(ForwardArgs const&);
#endif

}  // namespace kembed::cli
