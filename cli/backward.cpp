// kembed backward configures the batch job (kembed::job, job/) and prints what it
// did; kembed forward streams a batch's ids through the layer's forward.
#include "commands.hpp"
#include "console.hpp"
#include "mpi_session.hpp"

#include <kembed/backends.hpp>
#include <kembed/embedding.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/table_file.hpp>
#include <kembed/job/backward.hpp>
#include <kembed/job/detail/io_worker.hpp>
#include <kembed/job/one_process.hpp>
#include <kembed/job/paths.hpp>
#if defined(KEMBED_CLI_MPI)
#include <kembed/mpi/team.hpp>
#endif

#include <chrono>
#include <future>
#include <cstdio>
#include <optional>
#include <utility>

namespace kembed::cli {
namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Reads positions [first, first + n) of the ids and refuses one outside [0, V) with
// its position and the file's name.
void read_ids(io::BatchReader const& batch, std::string const& path, std::int64_t first, std::int64_t n,
              std::int64_t v, std::vector<std::int64_t>& ids) {
  batch.read(first, n, ids.data(), nullptr);
  for (std::int64_t i = 0; i < n; ++i) {
    auto const id = ids[i];
    if (id < 0 || id >= v) {
      throw io::FileError(path, "/ids",
                          "holds " + std::to_string(id) + " at position " + std::to_string(first + i) +
                              ", outside [0, " + std::to_string(v) + ") (the table's num_embeddings)");
    }
  }
}

job::BackwardSettings settings_of(BackwardArgs const& a) {
  job::BackwardSettings s = a;
  if (a.plan_name) s.plan = parse_plan(*a.plan_name);
  if (a.mode_name) s.mode = parse_mode(*a.mode_name);
  return s;
}

}  // namespace

template <class Space>
int backward(BackwardArgs const& args) {
  auto& console = Console::get();
  auto const t_start = clock_type::now();
  auto const settings = settings_of(args);
  std::optional<Progress> progress;
  job::Observer observer;
  observer.log = [&](std::string const& text) { console.log(text); };
  observer.progress = [&](std::int64_t done, std::int64_t total, std::int64_t start) {
    if (!progress) progress.emplace("backward", total, start);
    progress->update(done);
    if (done == total) progress->finish();
  };
  Space space;
  job::BackwardReport r;
#if defined(KEMBED_CLI_MPI)
  if (mpi_session_active()) {
    r = job::run_backward(space, kembed::mpi::Team(MPI_COMM_WORLD), settings, observer);
  } else
#endif
  {
    r = job::run_backward(space, job::OneProcess(), settings, observer);
  }
  if (console.muted()) return Exit::ok;  // another rank than the first: it reports
  double const done = double(r.positions - r.resumed_from);
  std::printf("run file:   %s\n", r.out.c_str());
  std::printf("gradient:   %s x %s, SHA-256 %s\n", with_commas(r.rows).c_str(), with_commas(r.cols).c_str(),
              r.gradient_sha256.c_str());
  std::string const where = r.backend + " with " + std::to_string(r.threads) + " thread(s)" +
                            (r.ranks > 1 ? " on each of " + std::to_string(r.ranks) + " MPI ranks" : "");
  std::printf("positions:  %s in %s microbatches of %s (%s, plan %s, mode %s, %s)\n", with_commas(r.positions).c_str(),
              with_commas(r.microbatches).c_str(), with_commas(r.microbatch_size).c_str(),
              r.resumed_from ? ("resumed at " + with_commas(r.resumed_from)).c_str() : "one pass",
              r.plan_used.c_str(), r.mode.c_str(), where.c_str());
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
  if (args.microbatch < 1)
    throw InvalidArgument("microbatch", "--microbatch must be at least 1, got " + std::to_string(args.microbatch));
  for (auto const& [option, input] : {std::pair{"--table", args.table}, std::pair{"--ids", args.ids}})
    if (job::same_file(args.out, input))
      throw InvalidArgument("out", "--out " + args.out + " is the same file as " + option + " " + input +
                                       "; the output would replace it. Give --out a path of its own");
  job::check_output_path("--out", args.out);
  auto const t_start = clock_type::now();
  auto table = io::load_table(args.table);
  auto const v = table.config.num_embeddings, d = table.config.embedding_dim;
  Space space;
  Embedding<Space> layer(space, v, d, FloatsRef(table.weight.data(), Shape{v, d}));
  table.weight = {};
  io::BatchReader ids(args.ids, false, args.ids_dataset);
  auto const t = ids.info().positions;
  // The inputs are hashed on a thread of their own; ids are read and y written on
  // another (one HDF5 call at a time, in order), while this thread gathers.
  std::string table_sha, ids_sha;
  std::exception_ptr hash_error;
  job::detail::JoiningThread hasher([&] {
    try {
      table_sha = io::sha256_file(args.table);
      ids_sha = io::sha256_file(args.ids);
    } catch (...) {
      hash_error = std::current_exception();
    }
  });
  io::ForwardWriter out(args.out, t, d, "", "");
  std::int64_t const block = std::min(t, args.microbatch);
  std::vector<std::int64_t> ids_h[2];
  std::vector<float> y_h[2];
  for (int k = 0; k < 2; ++k) {
    ids_h[k].resize(static_cast<std::size_t>(block));
    y_h[k].resize(static_cast<std::size_t>(block * d));
  }
  std::future<void> written[2];
  typename Embedding<Space>::matrix_type y("kembed::cli::y", block, d);
  job::detail::IoWorker io(true);  // after what its tasks use: joined before they go
  auto read = [&](int k, std::int64_t p) {
    return io.submit([&, k, p] { read_ids(ids, args.ids, p, std::min(block, t - p), v, ids_h[k]); });
  };
  Progress progress("forward", t);
  std::future<void> pending = read(0, 0);
  for (std::int64_t p = 0, k = 0; p < t; p += block, k = 1 - k) {
    std::int64_t const n = std::min(block, t - p);
    pending.get();
    if (p + block < t) pending = read(int(1 - k), p + block);
    Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> ids_v(ids_h[k].data(), n);
    auto y_n = Kokkos::subview(y, std::make_pair(std::int64_t{0}, n), Kokkos::ALL);
    layer.forward(space, Kokkos::create_mirror_view_and_copy(typename Space::memory_space(), ids_v), y_n);
    if (written[k].valid()) written[k].get();  // this buffer's last block is in the file
    Kokkos::deep_copy(
        Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(y_h[k].data(), n, d),
        y_n);
    written[k] = io.submit([&, k, p, n] { out.write(p, n, y_h[k].data()); });
    progress.update(p + n);
  }
  for (auto& w : written)
    if (w.valid()) w.get();
  hasher.join();
  if (hash_error) std::rethrow_exception(hash_error);
  out.set_inputs(table_sha, ids_sha);
  progress.finish();
  out.commit();
  std::printf("output:     %s (y: %s x %s float32)\n", args.out.c_str(), with_commas(t).c_str(),
              with_commas(d).c_str());
  std::printf("time:       %s\n", seconds_text(since(t_start)).c_str());
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
