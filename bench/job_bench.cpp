// kembed-job-bench: the whole batch job (`kembed backward`) against each of its
// stages alone, measured in the same run on the same files: reading the batch's
// bytes with HDF5 and nothing else, hashing the two input files, and folding the
// positions from memory. The job overlaps them (a reader thread, a hashing thread),
// so its time should approach the slowest stage's: the report is job / slowest.
//   kembed-job-bench [--positions T] [--rows V] [--dim d] [--threads N] [--dir DIR]
//                    [--plan scan|sort|bucket|auto] [--cold] [--quick]
// Default 4,000,000 x 64 (a 1.06 GB batch) over V = 100,000 Zipf ids; --cold drops
// the files from the page cache before each stage (the storage's speed counts);
// --quick is 400,000 positions.
#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/table_file.hpp>
#include <kembed/job/backward.hpp>
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
  auto const drop = [&] {
    if (cold) evict(table), evict(batch);
  };
  long long const block = 65536;

  // Stage 1: the batch's bytes through HDF5, nothing else.
  drop();
  auto t0 = clock_type::now();
  {
    io::BatchReader reader(batch);
    std::vector<std::int64_t> ids(block);
    std::vector<float> dy(std::size_t(block * d));
    for (long long p = 0; p < t; p += block) reader.read(p, std::min(block, t - p), ids.data(), dy.data());
  }
  double const read_s = since(t0);

  // Stage 2: hashing the input files.
  drop();
  t0 = clock_type::now();
  std::int64_t bytes = 0, table_bytes = 0;
  io::sha256_file(table, &table_bytes);
  io::sha256_file(batch, &bytes);
  double const hash_s = since(t0);

  // Stage 3: the fold from memory (the job's calls: one per block).
  std::vector<std::int64_t> all_ids(static_cast<std::size_t>(t));
  std::vector<float> all_dy(static_cast<std::size_t>(t * d));
  io::BatchReader(batch).read(0, t, all_ids.data(), all_dy.data());
  Options options;
  options.plan = plan;
  auto layer = Embedding<Space>::backward_only(Space(), v, d, options);
  Embedding<Space>::matrix_type grad("grad", v, d);
  t0 = clock_type::now();
  for (long long p = 0; p < t; p += block) {
    long long const n = std::min(block, t - p);
    Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> ids_v(all_ids.data() + p, n);
    Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> dy_v(
        all_dy.data() + p * d, n, d);
    layer.backward(Space(), ids_v, dy_v, grad, grad);
  }
  Space().fence();
  double const fold_s = since(t0);
  all_ids = {};
  all_dy = {};

  // The job.
  drop();
  job::BackwardSettings s;
  s.table = table;
  s.batch = batch;
  s.out = out;
  s.plan = plan;
  t0 = clock_type::now();
  auto const report = job::run_backward(Space(), job::OneProcess(), s);
  double const job_s = since(t0);

  double const slowest = std::max({read_s, hash_s, fold_s});
  char const* which = slowest == read_s ? "read" : slowest == hash_s ? "hash" : "fold";
  std::printf("kembed-job-bench: T = %lld, V = %lld, d = %lld, batch %.2f GB, %s, %s with %d thread(s)\n", t, v, d,
              double(bytes) / 1e9, cold ? "files dropped from the page cache before each stage" : "page cache warm",
              Space::name(), int(Space().concurrency()));
  std::printf("| stage | seconds |\n| --- | --- |\n");
  std::printf("| read the batch (HDF5 only) | %.3f |\n| hash both inputs | %.3f |\n| fold from memory | %.3f |\n",
              read_s, hash_s, fold_s);
  std::printf("| the stages one after another | %.3f |\n| **the job** | **%.3f** |\n", read_s + hash_s + fold_s, job_s);
  std::printf("job / slowest stage (%s) = %.2f; hashing %.0f%% of the job; gradient SHA-256 %s\n", which,
              job_s / slowest, 100.0 * report.hash_seconds / job_s, report.gradient_sha256.c_str());
  for (auto const& f : {table, batch, out}) ::unlink(f.c_str());
  return 0;
}
