// kembed-bench: forward and backward over a grid of shapes, every plan and mode, each
// timed against the machine's bound measured in the same run: a (parallel) memcpy of
// the bytes the operation must move. One backend and thread count per process.
//
//   kembed-bench [--backend NAME] [--threads N] [--quick] [--csv FILE]
//                [--rows V] [--dim d] [--positions T]   (restricts the grid to one value)
//   kembed-bench --inputs DIR --rows V --dim d     (times one batch given as raw files,
//                                                   for scripts/bench_peers.py;
//                [--bags B --pooling P --weighted --plan P]  a bag batch, for scripts/bench_bags.py)
#include <kembed/backends.hpp>
#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>
#include <kembed/embedding_bag.hpp>
#include <kembed/io/sha256.hpp>

#include "bound.hpp"
#include "patterns.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <tuple>
#include <string>
#include <vector>

namespace {

using kembed::bench::best_seconds;
using kembed::bench::clock_type;
using kembed::bench::Memcpy;

// A digest of the gradient's bits: the sum over elements of a 64-bit mix of
// (index, bits), so threads may add in any order. Two gradients that differ in any
// bit differ here but with probability ~2^-64; the tests use memcmp.
template <class Space, class Matrix>
std::uint64_t digest(Space const& space, Matrix const& m) {
  auto const* data = reinterpret_cast<std::uint32_t const*>(m.data());
  std::uint64_t sum = 0;
  Kokkos::parallel_reduce(
      "kembed::bench::digest", Kokkos::RangePolicy<Space, Kokkos::IndexType<std::int64_t>>(space, 0, m.size()),
      KOKKOS_LAMBDA(std::int64_t i, std::uint64_t & acc) {
        std::uint64_t z = (std::uint64_t(i) << 32 | data[i]) + 0x9e3779b97f4a7c15ull;  // splitmix64
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        acc += z ^ (z >> 31);
      },
      sum);
  return sum;
}

struct Row {
  std::string backend;
  int threads;
  long long v, d, t;
  std::string ids, op, mode, plan, plan_used;
  double seconds;
  double bytes;
  double memcpy_seconds;
  std::string pattern = "-";  // the bare access pattern of the operation (patterns.hpp), if it has one
  double pattern_seconds = 0;
};

void print_row(FILE* out, Row const& r) {
  std::fprintf(out, "%s,%d,%lld,%lld,%lld,%s,%s,%s,%s,%s,%.6g,%.6g,%.6g,%.4f,%s,%.6g,%.4f\n", r.backend.c_str(),
               r.threads, r.v, r.d, r.t, r.ids.c_str(), r.op.c_str(), r.mode.c_str(), r.plan.c_str(),
               r.plan_used.c_str(), r.seconds, r.bytes, r.memcpy_seconds, r.memcpy_seconds / r.seconds,
               r.pattern.c_str(), r.pattern_seconds, r.pattern_seconds > 0 ? r.pattern_seconds / r.seconds : 0.0);
  std::fflush(out);
}

// only_v, only_d, only_t: when non-zero, the grid's one value of V, d or T.
template <class Space>
int grid(bool quick, std::string const& csv, long long only_v, long long only_d, long long only_t) {
  using Layer = kembed::Embedding<Space>;
  Space space;
  std::string const backend = Space::name();
  int const threads = space.concurrency();
  FILE* out = csv.empty() ? stdout : std::fopen(csv.c_str(), "w");
  if (!out) {
    std::fprintf(stderr, "kembed-bench: cannot write %s\n", csv.c_str());
    return 2;
  }
  std::fprintf(out,
               "backend,threads,V,d,T,ids,op,mode,plan,plan_used,seconds,bytes,memcpy_seconds,fraction_of_bound,"
               "pattern,pattern_seconds,fraction_of_pattern\n");
  auto const only = [](long long x, std::vector<long long> all) { return x > 0 ? std::vector<long long>{x} : all; };
  std::vector<long long> const vs =
      only(only_v, quick ? std::vector<long long>{100000, 1000000} : std::vector<long long>{1000, 100000, 1000000});
  std::vector<long long> const ds =
      only(only_d, quick ? std::vector<long long>{16, 128} : std::vector<long long>{16, 64, 128, 512});
  std::vector<long long> const ts =
      only(only_t, quick ? std::vector<long long>{100000, 1000000} : std::vector<long long>{1000, 100000, 1000000});
  std::vector<std::string> const dists =
      quick ? std::vector<std::string>{"zipf"} : std::vector<std::string>{"uniform", "zipf"};
  Memcpy<Space> bound;
  auto const started = clock_type::now();
  struct Case {
    kembed::Mode mode;
    kembed::Plan plan;
  };
  Case const cases[] = {{kembed::Mode::identical, kembed::Plan::scan},
                        {kembed::Mode::identical, kembed::Plan::sort},
                        {kembed::Mode::identical, kembed::Plan::bucket},
                        {kembed::Mode::identical, kembed::Plan::automatic},
                        {kembed::Mode::deterministic, kembed::Plan::automatic},
                        {kembed::Mode::fast, kembed::Plan::automatic}};
  // The bound depends only on the bytes moved: measured once per size.
  std::map<std::size_t, double> bounds;
  auto const bound_for = [&](double bytes) {
    auto const n = std::size_t(bytes);
    auto const it = bounds.find(n);
    return it != bounds.end() ? it->second : bounds[n] = bound.seconds(n);
  };
  // Ids per (V, T, distribution), made once for every d.
  std::map<std::tuple<long long, long long, std::string>, std::vector<std::int64_t>> id_lists;
  auto const ids_for = [&](long long v, long long t, std::string const& dist) -> std::vector<std::int64_t> const& {
    auto& l = id_lists[{v, t, dist}];
    if (l.empty())
      l = dist == "zipf" ? kembed::synthetic::zipf_ids(v, t, 1.1, 1) : kembed::synthetic::uniform_ids(v, t, 1);
    return l;
  };
  long long const t_max = *std::max_element(ts.begin(), ts.end());
  for (auto d : ds) {
    // dy and y for the largest T; smaller batches use their first rows (dy's
    // values depend on (position, column) alone). Allocated and filled once per d:
    // page faults on fresh 2 GB buffers cost more than the timings they served.
    auto const dy_all = kembed::make_matrix(space, "dy", t_max, d), y_all = kembed::make_matrix(space, "y", t_max, d);
    Kokkos::parallel_for(
        "fill", Kokkos::RangePolicy<Space>(space, 0, t_max), KOKKOS_LAMBDA(std::int64_t p) {
          for (std::int64_t c = 0; c < d; ++c) {
            dy_all(p, c) = float((p * 7 + c * 13) % 1024) / 1024.0f - 0.5f;
            y_all(p, c) = 0.0f;
          }
        });
    space.fence();
    for (auto v : vs) {
      auto const grad = kembed::make_matrix(space, "grad", v, d), table = kembed::make_matrix(space, "table", v, d);
      Kokkos::parallel_for(
          "fill", Kokkos::RangePolicy<Space>(space, 0, v), KOKKOS_LAMBDA(std::int64_t r) {
            for (std::int64_t c = 0; c < d; ++c) table(r, c) = float((r * 3 + c) % 512) / 512.0f;
          });
      space.fence();
      // Each case's layer is made once per (V, d) and timed on every T and id
      // distribution: six copies of a 2 GB table per point took more time than the
      // timings. So the identical plans are checked against the first one's digest.
      std::map<std::pair<long long, std::string>, std::uint64_t> reference;
      // The bare patterns on this point's data, timed once each (patterns.hpp): the
      // gather for the forward, and for a backward the pattern of the plan that ran.
      std::map<std::tuple<long long, std::string, std::string>, double> pattern_times;
      auto const pattern_of = [&](std::string const& name, long long t, std::string const& dist,
                                  std::int64_t const* ids_host, float const* dy, float* out_rows) {
        auto const key = std::make_tuple(t, dist, name);
        auto const it = pattern_times.find(key);
        if (it != pattern_times.end()) return it->second;
        double s = 0;
        if (name == "gather") {
          s = best_seconds([&] { kembed::bench::gather<Space>(threads, table.data(), ids_host, t, d, out_rows); });
        } else if (name == "fold_by_row") {
          kembed::bench::ByRow const rows(ids_host, t, v);
          s = best_seconds([&] { kembed::bench::fold_by_row<Space>(threads, dy, rows, v, d, grad.data()); });
        } else {
          s = best_seconds([&] { kembed::bench::scan_add<Space>(threads, dy, ids_host, t, v, d, grad.data()); });
        }
        return pattern_times[key] = s;
      };
      for (std::size_t i = 0; i < std::size(cases); ++i) {
        auto const c = cases[i];
        kembed::Options o;
        o.mode = c.mode;
        o.plan = c.plan;
        Layer const l = Layer::from_pretrained(space, table, o);
        for (auto t : ts)
          for (auto const& dist : dists) {
            auto const& ids_h = ids_for(v, t, dist);
            typename Layer::ids64_type ids = Kokkos::create_mirror_view_and_copy(
                typename Space::memory_space(),
                Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(ids_h.data(), t));
            typename Layer::const_matrix_type const dy(dy_all.data(), t, d);
            typename Layer::matrix_type const y(y_all.data(), t, d);
            double const fwd_bytes = 2.0 * double(t) * double(d) * 4;
            double const bwd_bytes = double(t) * 8 + double(t) * double(d) * 4 + double(v) * double(d) * 4;
            Row row{backend, threads, v, d, t, dist, "", "", "", "", 0, 0, 0};
            if (i == 0) {  // the forward, once per point
              row.op = "forward", row.mode = "-", row.plan = "-", row.plan_used = "-";
              row.seconds = best_seconds([&] {
                l.forward(space, ids, y);
                space.fence();
              });
              row.bytes = fwd_bytes, row.memcpy_seconds = bound_for(fwd_bytes);
              row.pattern = "gather";
              row.pattern_seconds = pattern_of("gather", t, dist, ids_h.data(), dy.data(), y.data());
              print_row(out, row);
              row.pattern = "-", row.pattern_seconds = 0;
            }
            row.op = "backward", row.bytes = bwd_bytes, row.memcpy_seconds = bound_for(bwd_bytes);
            row.mode = std::string(kembed::to_string(c.mode));
            row.plan = std::string(kembed::to_string(c.plan));
            row.plan_used = std::string(l.path_for(space, t).plan_name());
            row.seconds = best_seconds([&] {
              l.backward(space, ids, dy, grad);
              space.fence();
            });
            std::uint64_t const got = digest(space, grad);  // before a pattern overwrites grad
            if (c.mode == kembed::Mode::identical) {
              row.pattern = row.plan_used == "scan" ? "scan_add" : "fold_by_row";
              row.pattern_seconds = pattern_of(row.pattern, t, dist, ids_h.data(), dy.data(), nullptr);
            }
            print_row(out, row);
            if (c.mode == kembed::Mode::identical) {  // every identical plan: the same bits
              auto const [it, first] = reference.emplace(std::make_pair(t, dist), got);
              if (!first && it->second != got) {
                std::fprintf(stderr, "kembed-bench: plan %s gave other bits at V=%lld d=%lld T=%lld %s\n",
                             row.plan.c_str(), v, d, t, dist.c_str());
                return 1;
              }
            }
          }
      }
    }
  }
  std::fprintf(stderr, "kembed-bench: %s with %d thread(s), %s grid in %.0f s\n", backend.c_str(), threads,
               quick ? "quick" : "full", std::chrono::duration<double>(clock_type::now() - started).count());
  if (out != stdout) std::fclose(out);
  return 0;
}

// Reads n values of T from a raw little-endian file into out[0, n).
template <class T>
void read_raw(std::string const& path, T* out, std::size_t n) {
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(out), std::streamsize(n * sizeof(T)));
  if (!in) {
    std::fprintf(stderr, "kembed-bench: %s holds fewer than %zu values\n", path.c_str(), n);
    std::exit(2);
  }
}

// One batch from raw little-endian files (ids.i64, dy.f32, table.f32): forward and
// backward (identical, auto), times and SHA-256s as one JSON line.
template <class Space>
int inputs(std::string const& dir, long long v, long long d, long long t) {
  using Layer = kembed::Embedding<Space>;
  Space space;
  std::vector<std::int64_t> ids_h(static_cast<std::size_t>(t));
  read_raw(dir + "/ids.i64", ids_h.data(), ids_h.size());
  typename Layer::ids64_type ids = Kokkos::create_mirror_view_and_copy(
      typename Space::memory_space(),
      Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(ids_h.data(), t));
  // kembed's buffers as a kembed user would hold them (make_matrix: huge pages
  // advised); torch's inputs are numpy arrays, which numpy advises the same way.
  // dy is read straight into its buffer: at V = T = 1e6, d = 512 the job and the
  // torch script's arrays already fill most of the machine's 24 GiB.
  auto const dy_m = kembed::make_matrix(space, "dy", t, d);
  auto const dy_h = Kokkos::create_mirror_view(dy_m);
  read_raw(dir + "/dy.f32", dy_h.data(), dy_h.size());
  Kokkos::deep_copy(dy_m, dy_h);
  typename Layer::const_matrix_type const dy = dy_m;
  std::vector<float> table_h(static_cast<std::size_t>(v * d));
  read_raw(dir + "/table.f32", table_h.data(), table_h.size());
  Layer layer(space, v, d, kembed::FloatsRef(table_h.data(), kembed::Shape{v, d}));
  std::vector<float>().swap(table_h);  // the layer holds its own copy
  auto const y = kembed::make_matrix(space, "y", t, d), grad = kembed::make_matrix(space, "grad", v, d);
  double const fwd = best_seconds([&] {
    layer.forward(space, ids, y);
    space.fence();
  });
  double const bwd = best_seconds([&] {
    layer.backward(space, ids, dy, grad);
    space.fence();
  });
  // The bytes the backward must move (ids and dy read, the gradient written) through
  // memcpy on the same threads: what a second thread can gain on this memory.
  double const bwd_bytes = double(t) * 8 + double(t) * double(d) * 4 + double(v) * double(d) * 4;
  double const copy = Memcpy<Space>().seconds(std::size_t(bwd_bytes));
  auto const yh = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y);
  auto const gh = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad);
  std::printf(
      "{\"backend\": \"%s\", \"threads\": %d, \"forward_seconds\": %.6g, \"backward_seconds\": %.6g, "
      "\"memcpy_backward_bytes_seconds\": %.6g, \"plan_used\": \"%s\", \"y_sha256\": \"%s\", "
      "\"grad_sha256\": \"%s\"}\n",
      Space::name(), int(space.concurrency()), fwd, bwd, copy,
      std::string(layer.path_for(space, t).plan_name()).c_str(),
      kembed::io::sha256_hex(yh.data(), yh.size() * 4).c_str(),
      kembed::io::sha256_hex(gh.data(), gh.size() * 4).c_str());
  return 0;
}

// One bag batch from raw files (ids.i64, offsets.i64: B starts, dy.f32: B x d,
// table.f32, weights.f32 with --weighted): the pooled forward and the backward into
// buffers kept across calls (max's backward taking the forward's argmax), each beside
// a memcpy of the bytes its access pattern must move, as one JSON line.
template <class Space>
int bag_inputs(std::string const& dir, long long v, long long d, long long t, long long b, std::string const& pooling,
               bool weighted, kembed::Plan plan) {
  using Layer = kembed::EmbeddingBag<Space>;
  using M = typename Space::memory_space;
  Space space;
  auto const load = [&](auto tag, char const* name, std::size_t n) {  // a view of its own (not the host vector's)
    std::vector<decltype(tag)> h(n);
    read_raw(dir + "/" + name, h.data(), n);
    Kokkos::View<decltype(tag)*, M> out(std::string(name), n);
    Kokkos::deep_copy(out, Kokkos::View<decltype(tag) const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(h.data(), n));
    return out;
  };
  typename Layer::ids64_type const ids = load(std::int64_t(), "ids.i64", std::size_t(t));
  typename Layer::offsets_type const offsets = load(std::int64_t(), "offsets.i64", std::size_t(b));
  typename Layer::weights_type weights;
  if (weighted) weights = load(0.0f, "weights.f32", std::size_t(t));
  auto const dy_m = kembed::make_matrix(space, "dy", b, d);
  auto const dy_h = Kokkos::create_mirror_view(dy_m);
  read_raw(dir + "/dy.f32", dy_h.data(), dy_h.size());
  Kokkos::deep_copy(dy_m, dy_h);
  std::vector<float> table_h(static_cast<std::size_t>(v * d));
  read_raw(dir + "/table.f32", table_h.data(), table_h.size());
  kembed::BagOptions options;
  options.pooling = kembed::parse_pooling(pooling);
  options.embedding.plan = plan;
  Layer layer(space, v, d, kembed::FloatsRef(table_h.data(), kembed::Shape{v, d}), options);
  std::vector<float>().swap(table_h);
  auto const y = kembed::make_matrix(space, "y", b, d), grad = kembed::make_matrix(space, "grad", v, d);
  // max: the forward records its argmax and the backward takes it, as torch's max_indices.
  typename Layer::argmax_type const argmax = options.pooling == kembed::Pooling::max
                                                 ? typename Layer::argmax_type("argmax", b, d)
                                                 : typename Layer::argmax_type();
  double const fwd = best_seconds([&] {
    layer.forward(space, ids, offsets, y, weights, argmax);
    space.fence();
  });
  double const bwd = best_seconds([&] {
    layer.backward(space, ids, offsets, dy_m, grad, {}, {}, weights, {}, argmax);
    space.fence();
  });
  // Forward: ids and each position's row read, y written; backward: ids and a dy row
  // per position read (and a weight), the gradient written.
  double const terms = double(t) * (8 + 4 * double(d) + (weighted ? 4 : 0));
  Memcpy<Space> copy;
  double const fwd_copy = copy.seconds(std::size_t(terms + double(b) * double(d) * 4));
  double const bwd_copy = copy.seconds(std::size_t(terms + double(v) * double(d) * 4));
  auto const yh = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y);
  auto const gh = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad);
  std::printf(
      "{\"backend\": \"%s\", \"threads\": %d, \"forward_seconds\": %.6g, \"backward_seconds\": %.6g, "
      "\"memcpy_forward_bytes_seconds\": %.6g, \"memcpy_backward_bytes_seconds\": %.6g, \"plan_used\": \"%s\", "
      "\"y_sha256\": \"%s\", \"grad_sha256\": \"%s\"}\n",
      Space::name(), int(space.concurrency()), fwd, bwd, fwd_copy, bwd_copy,
      std::string(
          layer.embedding()
              .path_for(space, kembed::CallShape{t, b, false, options.pooling == kembed::Pooling::mean || weighted,
                                                 options.pooling == kembed::Pooling::max})
              .plan_name())
          .c_str(),
      kembed::io::sha256_hex(yh.data(), yh.size() * 4).c_str(),
      kembed::io::sha256_hex(gh.data(), gh.size() * 4).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "default", csv, dir, pooling = "sum";
  kembed::Plan plan = kembed::Plan::automatic;
  int threads = 0;
  bool quick = false, weighted = false;
  long long v = 0, d = 0, t = 0, bags = 0;
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    auto value = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--backend")
      backend = value();
    else if (a == "--threads")
      threads = std::stoi(value());
    else if (a == "--quick")
      quick = true;
    else if (a == "--csv")
      csv = value();
    else if (a == "--inputs")
      dir = value();
    else if (a == "--rows")
      v = std::stoll(value());
    else if (a == "--dim")
      d = std::stoll(value());
    else if (a == "--positions")
      t = std::stoll(value());
    else if (a == "--bags")
      bags = std::stoll(value());
    else if (a == "--pooling")
      pooling = value();
    else if (a == "--weighted")
      weighted = true;
    else if (a == "--plan")
      plan = kembed::parse_plan(value());
    else {
      std::fprintf(stderr,
                   "usage: kembed-bench [--backend NAME] [--threads N] [--quick] [--csv FILE]\n"
                   "                    [--rows V] [--dim d] [--positions T]   (one value of the grid's)\n"
                   "       kembed-bench --inputs DIR --rows V --dim d --positions T [--backend ...]\n"
                   "                    [--bags B [--pooling sum|mean|max] [--weighted] [--plan P]]   (a bag batch)\n");
      return 2;
    }
  }
  if (threads > 0) setenv("KOKKOS_NUM_THREADS", std::to_string(threads).c_str(), 1);
  setenv("KOKKOS_DISABLE_WARNINGS", "1", 0);
  int one = 1;
  char name[] = "kembed-bench";
  char* args[] = {name, nullptr};
  Kokkos::ScopeGuard guard(one, args);
  try {
    auto const run = [&](auto space) {
      using Space = decltype(space);
      if (dir.empty()) return grid<Space>(quick, csv, v, d, t);
      return bags > 0 ? bag_inputs<Space>(dir, v, d, t, bags, pooling, weighted, plan) : inputs<Space>(dir, v, d, t);
    };
    // Its bound is a host memcpy: devices have kembed-device-bench.
    return kembed::on_backend(backend, [&](auto space) -> int {
      if constexpr (kembed::detail::Tiles<decltype(space)>::host) {
        return run(space);
      } else if (backend == "default") {
        return run(Kokkos::DefaultHostExecutionSpace());
      } else {
        std::fprintf(stderr, "kembed-bench: measures host backends; for %s run kembed-device-bench\n",
                     backend.c_str());
        return 2;
      }
    });
  } catch (kembed::Error const& e) {
    std::fprintf(stderr, "kembed-bench: %s\n", e.what());
    return 2;
  }
}
