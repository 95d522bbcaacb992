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
#include <filesystem>
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

struct Args {
  long long t = 4000000, v = 100000, d = 64;
  int threads = 0;
  std::string dir = "/tmp";
  bool cold = false;
  Plan plan = Plan::automatic;
  int repeats = 2;
};

// The options of the first lines; exits 2 on a bad one.
Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string const o = argv[i];
    auto value = [&]() -> char const* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kembed-job-bench: %s needs a value\n", o.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (o == "--positions")
      a.t = std::atoll(value());
    else if (o == "--rows")
      a.v = std::atoll(value());
    else if (o == "--dim")
      a.d = std::atoll(value());
    else if (o == "--threads")
      a.threads = std::atoi(value());
    else if (o == "--dir")
      a.dir = value();
    else if (o == "--cold")
      a.cold = true;
    else if (o == "--plan")
      a.plan = parse_plan(value());
    else if (o == "--repeat")
      a.repeats = std::max(1, std::atoi(value()));
    else if (o == "--quick")
      a.t = 400000;
    else {
      std::fprintf(stderr, "kembed-job-bench: unknown option %s (see the source's first lines)\n", o.c_str());
      std::exit(2);
    }
  }
  if (a.t < 1 || a.v < 1 || a.d < 1) {
    std::fprintf(stderr, "kembed-job-bench: --positions, --rows and --dim must be at least 1\n");
    std::exit(2);
  }
  return a;
}

constexpr long long block = 65536;  // positions per call, as the jobs' blocks

// The files of one run, and the fastest of `repeats` runs of a stage or a job.
struct Bench {
  Args a;
  std::string table, batch, out;

  explicit Bench(Args args) : a(std::move(args)) {
    std::string const base = a.dir + "/kembed-job-bench-" + std::to_string(::getpid());
    table = base + "-table.h5", batch = base + "-batch.h5", out = base + "-run.h5";
  }
  ~Bench() {
    for (auto const& f : {table, batch, out}) ::unlink(f.c_str());
  }

  // The inputs, written block by block (the batch never has to fit in memory).
  void write_inputs() const {
    auto const w = synthetic::uniform_floats(a.v * a.d, 1);
    io::save_table(table, w.data(), make_config(a.v, a.d, {}));
    io::BatchWriter writer(batch, a.t, a.d, io::BatchMeta{a.v, "kembed-job-bench zipf(1.1)", 2});
    long long const step = 1 << 18;
    auto const ids = synthetic::zipf_ids(a.v, a.t, 1.1, 3);
    for (long long p = 0; p < a.t; p += step) {
      long long const n = std::min(step, a.t - p);
      auto const dy = synthetic::uniform_floats(n * a.d, 4 + std::uint64_t(p));
      writer.write(p, n, ids.data() + p, dy.data());
    }
    writer.commit();
  }

  // Before each stage and job: no output left by the one before (replacing it frees
  // its blocks, which storage may discard meanwhile), no dirty pages (writing them back
  // would be charged to whichever runs next), and with --cold no inputs cached.
  void drop() const {
    ::unlink(out.c_str());
    ::sync();
    if (a.cold) evict(table), evict(batch);
  }

  // Each stage and each job runs `repeats` times and counts its fastest run: on a
  // shared machine (and a file system that discards freed blocks) a single run can
  // wait on someone else's I/O.
  template <class F>
  double best(F&& run) const {
    double fastest = 1e300;
    for (int r = 0; r < a.repeats; ++r) {
      drop();
      auto const t0 = clock_type::now();
      run();
      fastest = std::min(fastest, since(t0));
    }
    return fastest;
  }
};

using IdsView = Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
using Stages = std::vector<std::pair<char const*, double>>;

struct Timed {
  Stages stages;
  double job = 1e300, wait = 0;  // the fastest run's time and its wait for the hash
};

// Backward: the batch's bytes through HDF5 and nothing else, the hash of both inputs,
// the fold from memory (the job's calls: one per block), then the job.
Timed time_backward(Bench const& b, std::vector<std::int64_t>& all_ids, std::string& gradient_sha256) {
  auto const& a = b.a;
  Timed r;
  r.stages.emplace_back("read the batch (HDF5 only)", b.best([&] {
    io::BatchReader reader(b.batch);
    std::vector<float> dy(std::size_t(block * a.d));
    for (long long p = 0; p < a.t; p += block) reader.read(p, std::min(block, a.t - p), all_ids.data() + p, dy.data());
  }));
  std::int64_t bytes = 0, table_bytes = 0;
  r.stages.emplace_back("hash both inputs", b.best([&] {
    io::sha256_file(b.table, &table_bytes);
    io::sha256_file(b.batch, &bytes);
  }));
  std::vector<float> all_dy(static_cast<std::size_t>(a.t * a.d));
  io::BatchReader(b.batch).read(0, a.t, nullptr, all_dy.data());
  Options options;
  options.plan = a.plan;
  auto layer = Embedding<Space>::backward_only(Space(), a.v, a.d, options);
  Embedding<Space>::matrix_type grad("grad", a.v, a.d);
  r.stages.emplace_back("fold from memory", b.best([&] {
    for (long long p = 0; p < a.t; p += block) {
      long long const n = std::min(block, a.t - p);
      Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> dy_v(
          all_dy.data() + p * a.d, n, a.d);
      layer.backward(Space(), IdsView(all_ids.data() + p, n), dy_v, grad, grad);
    }
    Space().fence();
  }));
  job::BackwardSettings s;
  s.table = b.table, s.batch = b.batch, s.out = b.out, s.plan = a.plan;
  b.best([&] {
    auto const t0 = clock_type::now();
    auto const report = job::run_backward(Space(), job::OneProcess(), s);
    if (since(t0) < r.job) r.job = since(t0), r.wait = report.hash_wait_seconds;
    gradient_sha256 = report.gradient_sha256;
  });
  return r;
}

// Forward: the ids alone, the hash (as the backward's), the lookup from memory into
// blocks of y, y written through HDF5 (the output file, committed), then the job.
Timed time_forward(Bench const& b, std::vector<std::int64_t>& all_ids, double hash_s) {
  auto const& a = b.a;
  Timed r;
  r.stages.emplace_back("read the ids (HDF5 only)", b.best([&] {
    io::BatchReader reader(b.batch, false);
    for (long long p = 0; p < a.t; p += block) reader.read(p, std::min(block, a.t - p), all_ids.data() + p, nullptr);
  }));
  r.stages.emplace_back("hash both inputs", hash_s);
  auto const w = io::load_table(b.table);
  Embedding<Space> layer(Space(), a.v, a.d, FloatsRef(w.weight.data(), Shape{a.v, a.d}));
  Embedding<Space>::matrix_type y("y", block, a.d);
  std::vector<float> y_all(static_cast<std::size_t>(a.t * a.d));
  r.stages.emplace_back("look up from memory", b.best([&] {
    for (long long p = 0; p < a.t; p += block) {
      long long const n = std::min(block, a.t - p);
      auto y_n = Kokkos::subview(y, std::make_pair(0LL, n), Kokkos::ALL);
      layer.forward(Space(), IdsView(all_ids.data() + p, n), y_n);
      Kokkos::deep_copy(Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                            y_all.data() + p * a.d, n, a.d),
                        y_n);
    }
  }));
  r.stages.emplace_back("write y (HDF5, committed)", b.best([&] {
    io::ForwardWriter writer(b.out, a.t, a.d, "", "");
    for (long long p = 0; p < a.t; p += block) writer.write(p, std::min(block, a.t - p), y_all.data() + p * a.d);
    writer.commit();
  }));
  job::ForwardSettings fs;
  fs.table = b.table, fs.ids = b.batch, fs.out = b.out;
  b.best([&] {
    auto const t0 = clock_type::now();
    auto const report = job::run_forward(Space(), fs);
    if (since(t0) < r.job) r.job = since(t0), r.wait = report.hash_wait_seconds;
  });
  return r;
}

// A job's stages, their sum, the job, and job / slowest stage.
void print_verdict(char const* job_name, Timed const& r) {
  auto const line = [](char const* what, double s) { std::printf("| %s | %.3f |\n", what, s); };
  auto const slowest = *std::max_element(r.stages.begin(), r.stages.end(),
                                         [](auto const& x, auto const& y) { return x.second < y.second; });
  double sum = 0;
  for (auto const& st : r.stages) sum += st.second;
  std::printf("\n%s:\n\n| stage | seconds |\n| --- | --- |\n", job_name);
  for (auto const& [what, s] : r.stages) line(what, s);
  line("the stages one after another", sum);
  std::printf("| **the job** | **%.3f** |\n\n", r.job);
  std::printf("%s: job / slowest stage (%s) = %.2f; waited for the hash with all else done: %.0f%% of the job\n",
              job_name, slowest.first, r.job / slowest.second, 100.0 * r.wait / r.job);
}

}  // namespace

int main(int argc, char** argv) {
  Args const args = parse_args(argc, argv);
  if (args.threads > 0) setenv("KOKKOS_NUM_THREADS", std::to_string(args.threads).c_str(), 1);
  setenv("KOKKOS_DISABLE_WARNINGS", "1", 0);  // Kokkos prints them on stdout, where the report goes
  int kokkos_argc = 1;                        // our options are not Kokkos'
  Kokkos::ScopeGuard kokkos(kokkos_argc, argv);
  Bench const bench(args);
  bench.write_inputs();
  std::vector<std::int64_t> all_ids(static_cast<std::size_t>(args.t));
  std::string sha;
  auto const backward = time_backward(bench, all_ids, sha);
  auto const forward = time_forward(bench, all_ids, backward.stages[1].second);
  auto const bytes = std::filesystem::file_size(bench.batch);
  std::printf("kembed-job-bench: T = %lld, V = %lld, d = %lld, batch %.2f GB, %s, %s with %d thread(s)\n", args.t,
              args.v, args.d, double(bytes) / 1e9,
              args.cold ? "files dropped from the page cache before each stage" : "page cache warm", Space::name(),
              int(Space().concurrency()));
  print_verdict("backward", backward);
  print_verdict("forward", forward);
  std::printf("gradient SHA-256 %s\n", sha.c_str());
  return 0;
}
