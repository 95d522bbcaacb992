// kembed-job-bench: the batch jobs (`kembed backward`, `kembed forward`) against
// each of their stages alone, measured in the same run on the same files. Backward:
// reading the batch's bytes with HDF5 and nothing else, hashing the two input files,
// folding the positions from memory. Forward: reading the ids, hashing the inputs,
// looking the rows up in memory, writing y with HDF5 (and committing the file). A job
// overlaps its stages (reader, writer and hashing threads), so its time should
// approach its slowest stage's: the report is job / slowest.
//   kembed-job-bench [--positions T] [--rows V] [--dim d] [--threads N] [--dir DIR]
//                    [--plan scan|sort|bucket|auto] [--repeat N] [--cold] [--quick]
// Default 4,000,000 x 64 (a 1.06 GB batch) over V = 100,000 Zipf ids; --cold drops
// the files from the page cache before each stage (the storage's speed counts);
// --quick is 400,000 positions; each stage and job counts its fastest of N runs (2).
// Run it as the CLI runs its jobs: OMP_WAIT_POLICY=passive, and no OMP_PROC_BIND
// (scripts/bench.sh does; the OpenMP runtime reads both before main).
#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/table_file.hpp>
#include <kembed/job/backward.hpp>
#include <kembed/job/forward.hpp>
#include <kembed/job/one_process.hpp>

#include <Kokkos_Core.hpp>

#include <fcntl.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace kembed;
using clock_type = std::chrono::steady_clock;
using Space = Kokkos::DefaultHostExecutionSpace;

namespace {
double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}
void evict(std::string const& p) {
  int fd = ::open(p.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}
}  // namespace

int main(int argc, char** argv) {
  long long t = 4000000, v = 100000, d = 64;
  int threads = 0;
  std::string dir = "/tmp";
  bool cold = false;
  Plan plan = Plan::automatic;
  int repeats = 2;
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    auto value = [&]() -> char const* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kembed-job-bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--positions") t = std::atoll(value());
    else if (a == "--rows") v = std::atoll(value());
    else if (a == "--dim") d = std::atoll(value());
    else if (a == "--threads") threads = std::atoi(value());
    else if (a == "--dir") dir = value();
    else if (a == "--cold") cold = true;
    else if (a == "--plan") plan = parse_plan(value());
    else if (a == "--repeat") repeats = std::max(1, std::atoi(value()));
    else if (a == "--quick") t = 400000;
    else {
      std::fprintf(stderr, "kembed-job-bench: unknown option %s (see the source's first lines)\n", a.c_str());
      return 2;
    }
  }
  if (t < 1 || v < 1 || d < 1) {
    std::fprintf(stderr, "kembed-job-bench: --positions, --rows and --dim must be at least 1\n");
    return 2;
  }
  if (threads > 0) setenv("KOKKOS_NUM_THREADS", std::to_string(threads).c_str(), 1);
  setenv("KOKKOS_DISABLE_WARNINGS", "1", 0);  // Kokkos prints them on stdout, where the report goes
  int kokkos_argc = 1;  // our options are not Kokkos'
  Kokkos::ScopeGuard kokkos(kokkos_argc, argv);
  std::string const base = dir + "/kembed-job-bench-" + std::to_string(::getpid());
  std::string const table = base + "-table.h5", batch = base + "-batch.h5", out = base + "-run.h5";

  // The inputs, written block by block (the batch never has to fit in memory).
  {
    auto const w = synthetic::uniform_floats(v * d, 1);
    Config const c = make_config(v, d, {});
    io::save_table(table, w.data(), c);
    io::BatchWriter writer(batch, t, d, io::BatchMeta{v, "kembed-job-bench zipf(1.1)", 2});
    long long const step = 1 << 18;
    auto const ids = synthetic::zipf_ids(v, t, 1.1, 3);
    for (long long p = 0; p < t; p += step) {
      long long const n = std::min(step, t - p);
      auto const dy = synthetic::uniform_floats(n * d, 4 + std::uint64_t(p));
      writer.write(p, n, ids.data() + p, dy.data());
    }
    writer.commit();
  }
  // Before each stage and job: no output left by the one before (replacing it frees
  // its blocks, which storage may discard meanwhile), no dirty pages (writing them back
  // would be charged to whichever runs next), and with --cold no inputs cached.
  auto const drop = [&] {
    ::unlink(out.c_str());
    ::sync();
    if (cold) evict(table), evict(batch);
  };
  long long const block = 65536;

  // Each stage and each job runs `repeats` times and counts its fastest run: on a
  // shared machine (and a file system that discards freed blocks) a single run can
  // wait on someone else's I/O.
  auto const best = [&](auto&& run) {
    double fastest = 1e300;
    for (int r = 0; r < repeats; ++r) {
      drop();
      auto const t0 = clock_type::now();
      run();
      fastest = std::min(fastest, since(t0));
    }
    return fastest;
  };

  // Backward, stage 1: the batch's bytes through HDF5, nothing else.
  std::vector<std::int64_t> all_ids(static_cast<std::size_t>(t));
  double const read_s = best([&] {
    io::BatchReader reader(batch);
    std::vector<float> dy(std::size_t(block * d));
    for (long long p = 0; p < t; p += block) reader.read(p, std::min(block, t - p), all_ids.data() + p, dy.data());
  });
  // Stage 2: hashing the input files.
  std::int64_t bytes = 0, table_bytes = 0;
  double const hash_s = best([&] {
    io::sha256_file(table, &table_bytes);
    io::sha256_file(batch, &bytes);
  });
  // Stage 3: the fold from memory (the job's calls: one per block).
  double fold_s = 0;
  {
    std::vector<float> all_dy(static_cast<std::size_t>(t * d));
    io::BatchReader(batch).read(0, t, nullptr, all_dy.data());
    Options options;
    options.plan = plan;
    auto layer = Embedding<Space>::backward_only(Space(), v, d, options);
    Embedding<Space>::matrix_type grad("grad", v, d);
    fold_s = best([&] {
      for (long long p = 0; p < t; p += block) {
        long long const n = std::min(block, t - p);
        Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> ids_v(all_ids.data() + p, n);
        Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> dy_v(
            all_dy.data() + p * d, n, d);
        layer.backward(Space(), ids_v, dy_v, grad, grad);
      }
      Space().fence();
    });
  }
  // The backward job.
  job::BackwardSettings s;
  s.table = table;
  s.batch = batch;
  s.out = out;
  s.plan = plan;
  job::BackwardReport report;
  double job_s = 1e300, job_wait_s = 0;  // the fastest run's
  best([&] {
    auto const t0 = clock_type::now();
    report = job::run_backward(Space(), job::OneProcess(), s);
    if (since(t0) < job_s) job_s = since(t0), job_wait_s = report.hash_wait_seconds;
  });

  // Forward: the ids alone, the hash (as above), the lookup from memory into blocks
  // of y, and y written through HDF5 (the output file, committed).
  double const read_ids_s = best([&] {
    io::BatchReader reader(batch, false);
    for (long long p = 0; p < t; p += block) reader.read(p, std::min(block, t - p), all_ids.data() + p, nullptr);
  });
  double lookup_s = 0, write_y_s = 0;
  {
    auto const w = io::load_table(table);
    Embedding<Space> forward_layer(Space(), v, d, FloatsRef(w.weight.data(), Shape{v, d}));
    Embedding<Space>::matrix_type y("y", block, d);
    std::vector<float> y_all(static_cast<std::size_t>(t * d));
    lookup_s = best([&] {
      for (long long p = 0; p < t; p += block) {
        long long const n = std::min(block, t - p);
        Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> ids_v(all_ids.data() + p, n);
        auto y_n = Kokkos::subview(y, std::make_pair(0LL, n), Kokkos::ALL);
        forward_layer.forward(Space(), ids_v, y_n);
        Kokkos::deep_copy(Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                              y_all.data() + p * d, n, d),
                          y_n);
      }
    });
    write_y_s = best([&] {
      io::ForwardWriter writer(out, t, d, "", "");
      for (long long p = 0; p < t; p += block) writer.write(p, std::min(block, t - p), y_all.data() + p * d);
      writer.commit();
    });
  }
  // The forward job.
  job::ForwardSettings fs;
  fs.table = table;
  fs.ids = batch;
  fs.out = out;
  double forward_s = 1e300, forward_wait_s = 0;
  best([&] {
    auto const t0 = clock_type::now();
    auto const r = job::run_forward(Space(), fs);
    if (since(t0) < forward_s) forward_s = since(t0), forward_wait_s = r.hash_wait_seconds;
  });

  std::printf("kembed-job-bench: T = %lld, V = %lld, d = %lld, batch %.2f GB, %s, %s with %d thread(s)\n", t, v, d,
              double(bytes) / 1e9, cold ? "files dropped from the page cache before each stage" : "page cache warm",
              Space::name(), int(Space().concurrency()));
  auto const line = [](char const* what, double s) { std::printf("| %s | %.3f |\n", what, s); };
  auto const verdict = [&](char const* job_name, double job_s, double wait_s,
                           std::vector<std::pair<char const*, double>> stages) {
    auto const slowest = *std::max_element(stages.begin(), stages.end(),
                                           [](auto const& a, auto const& b) { return a.second < b.second; });
    double sum = 0;
    for (auto const& st : stages) sum += st.second;
    std::printf("\n%s:\n\n| stage | seconds |\n| --- | --- |\n", job_name);
    for (auto const& [what, s] : stages) line(what, s);
    line("the stages one after another", sum);
    std::printf("| **the job** | **%.3f** |\n\n", job_s);
    std::printf("%s: job / slowest stage (%s) = %.2f; waited for the hash with all else done: %.0f%% of the job\n",
                job_name, slowest.first, job_s / slowest.second, 100.0 * wait_s / job_s);
  };
  verdict("backward", job_s, job_wait_s,
          {{"read the batch (HDF5 only)", read_s}, {"hash both inputs", hash_s}, {"fold from memory", fold_s}});
  verdict("forward", forward_s, forward_wait_s,
          {{"read the ids (HDF5 only)", read_ids_s},
           {"hash both inputs", hash_s},
           {"look up from memory", lookup_s},
           {"write y (HDF5, committed)", write_y_s}});
  std::printf("gradient SHA-256 %s\n", report.gradient_sha256.c_str());
  for (auto const& f : {table, batch, out}) ::unlink(f.c_str());
  return 0;
}
