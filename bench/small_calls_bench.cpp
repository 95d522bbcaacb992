// kembed-small-calls-bench: a stream of microbatches folded call by call, as a
// training loop accumulates gradients: T positions cut into calls of M, each call
// continuing a dense gradient in place or a sparse carry, in the modes where the
// batch job calls once per microbatch (deterministic, scale_grad_by_freq=call).
// Each point's time per position is reported against the same stream at M = 4096,
// measured in the same run, and each sparse result is checked, bit for bit,
// against the dense rows of the same stream (where the dense gradient is small
// enough to zero between runs).
//
//   kembed-small-calls-bench [--rows 1e4,1e5,1e6,1e7] [--dim 4,16,128] [--positions 2e5]
//                            [--microbatch 1,7,97,4096] [--modes deterministic,call] [--plan P]
//                            [--csv FILE] [--baseline FILE]
// --modes: `identical` (plain identical mode, its plan --plan), `deterministic`,
// `call` (identical with scale_grad_by_freq=call).
//   kembed-small-calls-bench --threshold [--rows V] [--dim D]
// --baseline: the CSV of another run (one thread, say); each line then also shows
// this run's time over that run's at the same point.
#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>

#include "args.hpp"
#include "bound.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace {

using Space = Kokkos::DefaultHostExecutionSpace;
using Layer = kembed::Embedding<Space>;
using clock_type = kembed::bench::clock_type;

struct Point {
  std::string kind, mode;
  long long v, d, m;
  bool operator<(Point const& o) const {
    return std::tie(kind, mode, v, d, m) < std::tie(o.kind, o.mode, o.v, o.d, o.m);
  }
};

std::map<Point, double> read_baseline(std::string const& path) {
  std::map<Point, double> out;
  if (path.empty()) return out;
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--baseline: cannot read " + path);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::stringstream f(line);
    Point p;
    std::string field;
    std::getline(f, p.kind, ',');
    std::getline(f, p.mode, ',');
    std::getline(f, field, ','), p.v = std::stoll(field);
    std::getline(f, field, ','), p.d = std::stoll(field);
    std::getline(f, field, ','), p.m = std::stoll(field);
    std::getline(f, field, ',');  // threads
    std::getline(f, field, ','), out[p] = std::stod(field);
  }
  return out;
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// One stream: T positions in calls of m, each continuing `grad` in place (dense)
// or `carry`, over views of the caller's memory, as the batch job and the Python
// module pass them (a managed subview's reference count cost a one-position call 1.3x).
void fold_stream(Layer const& layer, Space const& space, std::int64_t const* ids, float const* dy, long long t,
                 long long d, long long m, bool dense, Layer::matrix_type const& grad,
                 Layer::sparse_carry_type& carry) {
  for (long long p = 0; p < t; p += m) {
    long long const n = std::min(t - p, m);
    Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> const part(ids + p, n);
    Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> const dy_part(
        dy + p * d, n, d);
    if (dense)
      layer.backward(space, part, dy_part, grad, grad);
    else
      layer.backward_sparse(space, part, dy_part, carry);
  }
  space.fence();
}

}  // namespace

// --threshold: one call of T positions through the listed path on the calling
// thread and on the space's threads, same inputs, for the T where the library
// switches (detail::runs_on_caller).
int threshold_table(long long v, long long d) {
  Space const space;
  std::printf(
      "kembed-small-calls-bench --threshold on %s (%d threads), V = %lld, d = %lld, uniform ids, in place;"
      " best of repeats\n",
      Space::name(), int(space.concurrency()), v, d);
  std::printf("| T | calling thread | space's threads | threads / caller |\n| --- | --- | --- | --- |\n");
  auto const grad = kembed::make_matrix(space, "kembed::bench::grad", v, d);
  auto const isa = kembed::detail::host_isa();
  for (long long t : {16LL, 64LL, 256LL, 512LL, 1024LL, 2048LL, 4096LL, 16384LL}) {
    auto const ids_h = kembed::synthetic::uniform_ids(v, t, 13);
    Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> const ids(ids_h.data(), t);
    std::vector<float> dy_h(std::size_t(t * d), 0.25f);
    Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> const dy(dy_h.data(),
                                                                                                          t, d);
    auto const g = kembed::detail::unmanaged(grad);
    Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> const carry = g;
    Kokkos::View<std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> const none;
    double seconds[2];
    for (bool const on_caller : {true, false})
      seconds[on_caller ? 0 : 1] = kembed::bench::best_seconds([&] {
        kembed::detail::backward_listed(space, ids, dy, carry, g, none, -1, kembed::Mode::deterministic,
                                        kembed::FreqScale::none, none, isa, on_caller);
        space.fence();
      });
    std::printf("| %lld | %.2f us | %.2f us | %.2fx |\n", t, seconds[0] * 1e6, seconds[1] * 1e6,
                seconds[1] / seconds[0]);
  }
  return 0;
}

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  std::vector<long long> rows{10000, 100000, 1000000, 10000000}, dims{4, 16, 128}, calls{1, 7, 97, 4096};
  long long t = 200000;
  std::string csv_path, baseline_path;
  bool threshold = false, rows_given = false, dims_given = false;
  std::vector<std::string> modes{"deterministic", "call"};
  kembed::Plan plan = kembed::Plan::automatic;
  try {
    kembed::bench::for_each_option(argc, argv, [&](std::string const& a, auto&& value) {
      if (a == "--rows")
        rows = kembed::bench::parse_list(value(), "--rows"), rows_given = true;
      else if (a == "--dim")
        dims = kembed::bench::parse_list(value(), "--dim"), dims_given = true;
      else if (a == "--positions")
        t = kembed::bench::parse_list(value(), "--positions").at(0);
      else if (a == "--microbatch")
        calls = kembed::bench::parse_list(value(), "--microbatch");
      else if (a == "--csv")
        csv_path = value();
      else if (a == "--baseline")
        baseline_path = value();
      else if (a == "--threshold")
        threshold = true;
      else if (a == "--plan")  // mode identical's plan (the others sort)
        plan = kembed::parse_plan(value());
      else if (a == "--modes") {
        modes.clear();
        std::stringstream in(value());
        for (std::string m; std::getline(in, m, ',');) {
          if (m != "identical" && m != "deterministic" && m != "call")
            throw std::invalid_argument("--modes takes identical, deterministic and call, got '" + m + "'");
          modes.push_back(m);
        }
      } else
        throw std::invalid_argument("unknown option " + a +
                                    " (use --rows LIST --dim LIST --positions T --microbatch LIST --csv FILE"
                                    " --baseline FILE --modes LIST --plan P --threshold)");
    });
  } catch (std::exception const& e) {
    std::fprintf(stderr, "kembed-small-calls-bench: %s\n", e.what());
    return 2;
  }
  if (threshold) return threshold_table(rows_given ? rows.at(0) : 1000000, dims_given ? dims.at(0) : 16);
  auto const baseline = read_baseline(baseline_path);
  std::FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
  if (csv) std::fprintf(csv, "kind,mode,rows,dim,microbatch,threads,seconds,ns_per_position\n");
  Space const space;
  int const threads = int(space.concurrency());
  long long const widest_call = calls.empty() ? 1 : *std::max_element(calls.begin(), calls.end());
  std::printf(
      "kembed-small-calls-bench on %s (%d threads), T = %lld uniform ids, calls of M positions;"
      " ratio: time per position over M = %lld's%s\n",
      Space::name(), threads, t, widest_call, baseline.empty() ? "" : "; vs baseline: over the baseline run's");
  std::printf("| kind | mode | V | d | M | seconds | ns / position | ratio |%s\n",
              baseline.empty() ? "" : " vs baseline |");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |%s\n", baseline.empty() ? "" : " --- |");
  for (long long v : rows)
    for (long long d : dims) {
      auto const ids_h = kembed::synthetic::uniform_ids(v, t, 11);
      Kokkos::View<std::int64_t*, Kokkos::HostSpace> ids("kembed::bench::ids", t);
      std::memcpy(ids.data(), ids_h.data(), std::size_t(t) * 8);
      auto const dy = kembed::make_matrix(space, "kembed::bench::dy", t, d);
      for (long long i = 0; i < t * d; ++i) dy.data()[i] = float((i * 7) % 1024) / 1024.0f - 0.5f;
      auto const grad = kembed::make_matrix(space, "kembed::bench::grad", v, d);
      bool const check = v * d <= (1LL << 27);  // zero and compare where that is cheap
      for (std::string const& mode : modes) {
        kembed::Options o;
        o.plan = plan;
        if (mode == "deterministic")
          o.mode = kembed::Mode::deterministic;
        else if (mode == "call")
          o.scale_grad_by_freq = kembed::FreqScale::call;
        auto const layer = Layer::backward_only(space, v, d, o);
        std::map<std::string, double> at_widest;
        std::vector<std::tuple<std::string, long long, double>> results;
        for (long long m : calls)
          for (std::string const kind : {"dense", "sparse"}) {
            // The best of three streams (the machine is shared), each from a fresh start.
            double s = 1e30;
            auto carry = layer.sparse_carry(space);
            for (int rep = 0; rep < 3; ++rep) {
              if (kind == "dense" && check) Kokkos::deep_copy(grad, 0.0f);
              carry = layer.sparse_carry(space);
              auto const t0 = clock_type::now();
              fold_stream(layer, space, ids.data(), dy.data(), t, d, m, kind == "dense", grad, carry);
              s = std::min(s, seconds_since(t0));
            }
            results.emplace_back(kind, m, s);
            if (kind == "sparse" && check) {
              auto const g = layer.listed(space, carry);
              for (long long i = 0; i < (long long)g.rows.extent(0); ++i)
                if (std::memcmp(&g.values(i, 0), &grad(g.rows(i), 0), std::size_t(d) * sizeof(float)) != 0) {
                  std::fprintf(stderr,
                               "kembed-small-calls-bench: V = %lld, d = %lld, M = %lld, %s: sparse row %lld"
                               " differs from the dense row\n",
                               v, d, m, mode.c_str(), (long long)g.rows(i));
                  return 1;
                }
            }
            if (m == widest_call) at_widest[kind] = s;
          }
        for (auto const& [kind, m, s] : results) {
          double const ns = s / double(t) * 1e9;
          std::string vs;
          auto const b = baseline.find(Point{kind, mode, v, d, m});
          if (!baseline.empty())
            vs = b == baseline.end() ? " - |" : " " + std::to_string(s / b->second).substr(0, 4) + "x |";
          std::printf("| %s | %s | %.0e | %lld | %lld | %.4f | %.1f | %.2fx |%s\n", kind.c_str(), mode.c_str(),
                      double(v), d, m, s, ns, s / at_widest[kind], vs.c_str());
          if (csv)
            std::fprintf(csv, "%s,%s,%lld,%lld,%lld,%d,%.6g,%.4g\n", kind.c_str(), mode.c_str(), v, d, m, threads, s,
                         ns);
        }
        std::fflush(stdout);
      }
    }
  if (csv) std::fclose(csv);
  return 0;
}
