// kembed-device-bench: the forward and the backward on one backend (a GPU's, where
// the build has one), each against the device's own copy bandwidth measured in the
// same run: a copy kernel moving the bytes the operation must read and write. The
// backward's identical gradient is hashed, so runs on two machines can be compared.
//
//   kembed-device-bench [--backend NAME] [--quick] [--rows V --dim d --positions T]
#include <kembed/backends.hpp>
#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>
#include <kembed/io/sha256.hpp>

#include "bound.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace {

using kembed::bench::best_seconds;

struct Shape {
  long long v, d, t;
};

// Seconds to copy `floats` floats with a kernel on `space` (read once, written once).
template <class Space>
double copy_seconds(Space const& space, long long floats) {
  Kokkos::View<float*, typename Space::memory_space> src("kembed::bench::copy_src", floats),
      dst("kembed::bench::copy_dst", floats);
  return best_seconds([&] {
    Kokkos::parallel_for(
        "kembed::bench::copy", Kokkos::RangePolicy<Space, Kokkos::IndexType<long long>>(space, 0, floats),
        KOKKOS_LAMBDA(long long i) { dst(i) = src(i); });
    space.fence();
  });
}

template <class Space>
void run(Space const& space, Shape const& s) {
  using Layer = kembed::Embedding<Space>;
  auto const table = kembed::make_matrix(space, "kembed::bench::table", s.v, s.d);
  auto const dy = kembed::make_matrix(space, "kembed::bench::dy", s.t, s.d);
  auto const y = kembed::make_matrix(space, "kembed::bench::y", s.t, s.d);
  auto const grad = kembed::make_matrix(space, "kembed::bench::grad", s.v, s.d);
  long long const d = s.d;
  Kokkos::parallel_for(
      "kembed::bench::fill", Kokkos::RangePolicy<Space>(space, 0, s.t), KOKKOS_LAMBDA(long long p) {
        for (long long c = 0; c < d; ++c) dy(p, c) = float((p * 7 + c * 13) % 1024) / 1024.0f - 0.5f;
      });
  auto const ids_h = kembed::synthetic::zipf_ids(s.v, s.t, 1.1, 1);
  auto const ids = Kokkos::create_mirror_view_and_copy(
      typename Space::memory_space(),
      Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(ids_h.data(), ids_h.size()));
  space.fence();
  // Bytes each operation must move, as a copy of half as many: the forward reads
  // T rows and writes T; the backward reads dy and writes the gradient.
  double const fwd_bound = copy_seconds(space, s.t * s.d);
  double const bwd_bound = copy_seconds(space, (s.t * s.d + s.v * s.d) / 2 + 1);
  std::printf("V = %lld, d = %lld, T = %lld (Zipf 1.1 ids) on %s\n", s.v, s.d, s.t, Space::name());
  std::printf("  %-30s %12s %12s %9s\n", "", "seconds", "copy bound", "fraction");
  auto const line = [](char const* what, double seconds, double bound) {
    std::printf("  %-30s %12.6f %12.6f %8.2f\n", what, seconds, bound, bound / seconds);
  };
  {
    kembed::Options o;
    Layer const layer = Layer::from_pretrained(space, table, o);
    line("forward", best_seconds([&] {
           layer.forward(space, typename Layer::ids64_type(ids), y);
           space.fence();
         }),
         fwd_bound);
  }
  struct Case {
    char const* name;
    kembed::Mode mode;
    kembed::Plan plan;
  };
  // The scan plan is left out: each of a GPU's blocks would walk every position.
  Case const cases[] = {{"backward identical (auto)", kembed::Mode::identical, kembed::Plan::automatic},
                        {"backward identical, bucket", kembed::Mode::identical, kembed::Plan::bucket},
                        {"backward deterministic", kembed::Mode::deterministic, kembed::Plan::automatic},
                        {"backward fast (atomics)", kembed::Mode::fast, kembed::Plan::automatic}};
  std::string identical_sha;
  for (auto const& c : cases) {
    kembed::Options o;
    o.mode = c.mode;
    o.plan = c.plan;
    Layer const layer = Layer::from_pretrained(space, table, o);
    double const seconds = best_seconds([&] {
      layer.backward(space, typename Layer::ids64_type(ids), dy, grad);
      space.fence();
    });
    std::string name = c.name;
    if (c.mode == kembed::Mode::identical)
      name += std::string(" [") + std::string(layer.path_for(space, s.t).plan_name()) + "]";
    line(name.c_str(), seconds, bwd_bound);
    if (c.mode == kembed::Mode::identical) {
      auto const h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad);
      auto const sha = kembed::io::sha256_hex(h.data(), h.size() * sizeof(float));
      if (identical_sha.empty()) identical_sha = sha;
      if (sha != identical_sha) std::printf("  !! %s gave other bits than the first identical plan\n", c.name);
    }
  }
  std::printf("  identical gradient SHA-256 %s\n", identical_sha.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "default";
  bool quick = false;
  Shape one{0, 0, 0};
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    auto value = [&] { return i + 1 < argc ? std::stoll(argv[++i]) : 0LL; };
    if (a == "--backend" && i + 1 < argc)
      backend = argv[++i];
    else if (a == "--quick")
      quick = true;
    else if (a == "--rows")
      one.v = value();
    else if (a == "--dim")
      one.d = value();
    else if (a == "--positions")
      one.t = value();
    else {
      std::fprintf(stderr, "usage: kembed-device-bench [--backend NAME] [--quick] [--rows V --dim d --positions T]\n");
      return 2;
    }
  }
  std::vector<Shape> shapes;
  if (one.v > 0 && one.d > 0 && one.t > 0)
    shapes = {one};
  else if (quick)
    shapes = {{100000, 64, 100000}, {1000, 128, 100000}};
  else
    shapes = {{100000, 128, 1000000}, {1000000, 64, 1000000}, {1000, 512, 1000000}, {100000, 16, 1000}};
  setenv("KOKKOS_DISABLE_WARNINGS", "1", 0);
  Kokkos::ScopeGuard guard(argc, argv);
  try {
    return kembed::on_backend(backend, [&](auto space) {
      for (auto const& s : shapes) run(space, s);
      return 0;
    });
  } catch (kembed::Error const& e) {
    std::fprintf(stderr, "kembed-device-bench: %s\n", e.what());
    return 2;
  }
}
