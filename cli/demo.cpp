// kembed-demo: runs the layer on a generated Zipf batch with every plan and mode,
// printing the time of each, a fingerprint of each gradient, and whether the
// identical-mode plans agree bit for bit. Exit status 0 when they do, 1 when not,
// 2 on bad arguments.
#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct Args {
  std::int64_t rows = 100000, dim = 64, positions = 1000000;
  double zipf = 1.1;
  std::uint64_t seed = 42;
  int repeat = 3;
};

void usage(FILE* out) {
  std::fprintf(out,
               "usage: kembed-demo [--rows V] [--dim d] [--positions T] [--zipf s] [--seed N] [--repeat R]\n"
               "  Generates T Zipf(s)-distributed ids over V rows and dy values from the seed, then runs\n"
               "  forward and backward with every plan (scan, sort, bucket, auto) and mode, best of R runs each.\n"
               "  Defaults: V=100000 d=64 T=1000000 s=1.1 seed=42 R=3. Kokkos flags (--kokkos-threads=N)\n"
               "  and OMP_NUM_THREADS pick the backend's threads.\n");
}

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string const key = argv[i];
    if (key == "-h" || key == "--help") {
      usage(stdout);
      std::exit(0);
    }
    if (key.rfind("--kokkos", 0) == 0) continue;  // Kokkos::initialize consumed it
    if (i + 1 >= argc) {
      std::fprintf(stderr, "kembed-demo: %s needs a value\n", key.c_str());
      return false;
    }
    char const* value = argv[++i];
    char* end = nullptr;
    errno = 0;
    if (key == "--zipf") {
      a.zipf = std::strtod(value, &end);
    } else {
      long long const n = std::strtoll(value, &end, 10);
      if (key == "--rows")
        a.rows = n;
      else if (key == "--dim")
        a.dim = n;
      else if (key == "--positions")
        a.positions = n;
      else if (key == "--seed")
        a.seed = static_cast<std::uint64_t>(n);
      else if (key == "--repeat")
        a.repeat = static_cast<int>(n);
      else {
        std::fprintf(stderr, "kembed-demo: unknown option %s\n", key.c_str());
        return false;
      }
      if (n < 1) {
        std::fprintf(stderr, "kembed-demo: %s must be at least 1, got %s\n", key.c_str(), value);
        return false;
      }
    }
    if (errno != 0 || end == value || *end != '\0') {
      std::fprintf(stderr, "kembed-demo: %s wants a number, got '%s'\n", key.c_str(), value);
      return false;
    }
  }
  return true;
}

template <class F>
double best_ms(int repeat, F&& f) {
  double best = 1e300;
  for (int r = 0; r < repeat; ++r) {
    auto const t0 = std::chrono::steady_clock::now();
    f();
    Kokkos::fence();
    auto const t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

int run(Args const& a) {
  using Space = Kokkos::DefaultExecutionSpace;
  using Layer = kembed::Embedding<Space>;
  auto const v = a.rows, d = a.dim, t = a.positions;
  Space space;
  std::printf("kembed-demo: V=%" PRId64 " d=%" PRId64 " T=%" PRId64 " Zipf s=%g seed=%" PRIu64
              ", backend %s with %d thread(s), best of %d\n",
              v, d, t, a.zipf, a.seed, Space::name(), static_cast<int>(space.concurrency()), a.repeat);

  auto const ids = kembed::synthetic::zipf_ids(v, t, a.zipf, a.seed);
  auto const table = kembed::synthetic::uniform_floats(v * d, a.seed + 1);
  auto const dy = kembed::synthetic::uniform_floats(t * d, a.seed + 2);

  // Device copies made once, so that the timings are the kernels', not the copies'.
  Layer::ids64_type ids_d = Kokkos::create_mirror_view_and_copy(
      Layer::memory_space(),
      Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(ids.data(), t));
  Layer::const_matrix_type dy_d = Kokkos::create_mirror_view_and_copy(
      Layer::memory_space(),
      Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(dy.data(), t, d));
  Layer::matrix_type y("kembed-demo::y", t, d), grad("kembed-demo::grad", v, d);
  auto grad_h = Kokkos::create_mirror_view(grad);

  auto fingerprint_of = [&](Layer::matrix_type const& m) {
    Kokkos::deep_copy(grad_h, m);
    return kembed::synthetic::fingerprint(grad_h.data(), grad_h.size() * sizeof(float));
  };

  kembed::Options options;
  auto layer = Layer::from_pretrained(space, kembed::FloatsRef(table.data(), kembed::Shape{v, d}), options);
  double const fwd = best_ms(a.repeat, [&] { layer.forward(space, ids_d, y); });
  auto y_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y);
  std::printf("  %-28s %9.2f ms   y fingerprint %016" PRIx64 "\n", "forward", fwd,
              kembed::synthetic::fingerprint(y_h.data(), y_h.size() * sizeof(float)));

  struct Case {
    kembed::Mode mode;
    kembed::Plan plan;
  };
  Case const cases[] = {
      {kembed::Mode::identical, kembed::Plan::scan},          {kembed::Mode::identical, kembed::Plan::sort},
      {kembed::Mode::identical, kembed::Plan::bucket},        {kembed::Mode::identical, kembed::Plan::automatic},
      {kembed::Mode::deterministic, kembed::Plan::automatic}, {kembed::Mode::fast, kembed::Plan::automatic}};
  std::uint64_t identical_print = 0;
  bool agree = true;
  for (auto const& c : cases) {
    options.mode = c.mode;
    options.plan = c.plan;
    layer = Layer::from_pretrained(space, kembed::FloatsRef(table.data(), kembed::Shape{v, d}), options);
    double const ms = best_ms(a.repeat, [&] { layer.backward(space, ids_d, dy_d, grad); });
    auto const print = fingerprint_of(grad);
    std::string label = "backward " + std::string(kembed::to_string(c.mode));
    if (c.mode == kembed::Mode::identical) {
      label += " " + std::string(kembed::to_string(c.plan));
      if (c.plan == kembed::Plan::automatic) label += "->" + std::string(layer.path_for(space, t).plan_name());
      if (identical_print == 0) identical_print = print;
      agree = agree && print == identical_print;
    }
    std::printf("  %-28s %9.2f ms   gradient fingerprint %016" PRIx64 "%s\n", label.c_str(), ms, print,
                c.mode == kembed::Mode::identical
                    ? ""
                    : (print == identical_print ? "  (= identical)" : "  (!= identical, as allowed)"));
  }
  std::printf("identical plans agree bit for bit: %s\n", agree ? "yes" : "NO");
  return agree ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  Args args;
  if (!parse(argc, argv, args)) {
    usage(stderr);
    return 2;
  }
  try {
    return run(args);
  } catch (kembed::Error const& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
