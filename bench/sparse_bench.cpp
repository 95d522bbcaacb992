// kembed-sparse-bench: the row-sparse backward against the dense backward of the
// same batch, measured in the same run, over a grid of table sizes V and batch
// sizes T (uniform ids, so a batch touches about min(T, V) rows). Both give the
// same bits for every listed row, checked here at every point.
//
//   kembed-sparse-bench [--rows 1e6,1e7,1e8] [--positions 1e3,1e4,1e5,1e6] [--dim 16]
//                       [--dense-plan auto|scan|sort|bucket] [--csv FILE]
#include <kembed/backends.hpp>
#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>

#include "args.hpp"
#include "bound.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using kembed::bench::best_seconds;
using Space = Kokkos::DefaultHostExecutionSpace;
using Layer = kembed::Embedding<Space>;

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  std::vector<long long> rows{1000000, 10000000, 100000000}, positions{1000, 10000, 100000, 1000000};
  long long d = 16;
  std::string csv_path;
  kembed::Options dense_options;
  try {
    kembed::bench::for_each_option(argc, argv, [&](std::string const& a, auto&& value) {
      if (a == "--rows")
        rows = kembed::bench::parse_list(value(), "--rows");
      else if (a == "--positions")
        positions = kembed::bench::parse_list(value(), "--positions");
      else if (a == "--dim")
        d = kembed::bench::parse_list(value(), "--dim").at(0);
      else if (a == "--dense-plan")
        dense_options.plan = kembed::parse_plan(value());
      else if (a == "--csv")
        csv_path = value();
      else
        throw std::invalid_argument("unknown option " + a +
                                    " (use --rows LIST --positions LIST --dim D --dense-plan P --csv FILE)");
    });
  } catch (std::exception const& e) {
    std::fprintf(stderr, "kembed-sparse-bench: %s\n", e.what());
    return 2;
  }
  std::FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
  if (csv) std::fprintf(csv, "rows,dim,positions,listed_rows,dense_seconds,sparse_seconds,dense_bytes,sparse_bytes\n");
  Space const space;
  std::printf("kembed-sparse-bench on %s (%d threads), d = %lld, uniform ids, dense plan %s; best of repeats\n",
              Space::name(), int(space.concurrency()), d, std::string(kembed::to_string(dense_options.plan)).c_str());
  std::printf("| V | T | rows listed | dense backward | sparse backward | dense / sparse | gradient bytes dense / sparse |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  for (long long v : rows) {
    auto const layer = Layer::backward_only(space, v, d, dense_options);
    auto const grad = kembed::make_matrix(space, "kembed::bench::grad", v, d);
    for (long long t : positions) {
      auto const ids_h = kembed::synthetic::uniform_ids(v, t, 7);
      Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> ids(ids_h.data(), t);
      auto const dy = kembed::make_matrix(space, "kembed::bench::dy", t, d);
      Kokkos::parallel_for(
          "kembed::bench::fill", Kokkos::RangePolicy<Space>(space, 0, t), KOKKOS_LAMBDA(long long p) {
            for (long long c = 0; c < d; ++c) dy(p, c) = float((p * 7 + c * 13) % 1024) / 1024.0f - 0.5f;
          });
      space.fence();
      double const dense = best_seconds([&] {
        layer.backward(space, ids, dy, grad);
        space.fence();
      });
      Layer::sparse_type g;
      double const sparse = best_seconds([&] {
        g = layer.backward_sparse(space, ids, dy);
        space.fence();
      });
      // Every listed row equals the dense row, and nothing else is non-zero there.
      long long const n = g.rows.extent(0);
      for (long long i = 0; i < n; ++i)
        if (std::memcmp(&g.values(i, 0), &grad(g.rows(i), 0), d * sizeof(float)) != 0) {
          std::fprintf(stderr, "kembed-sparse-bench: V = %lld, T = %lld: row %lld differs from the dense row\n", v,
                       t, (long long)g.rows(i));
          return 1;
        }
      double const dense_bytes = double(v) * d * 4, sparse_bytes = double(n) * (d * 4 + 16);
      std::printf("| %.0e | %.0e | %lld | %.4f s | %.5f s | %.3gx | %.3gx |\n", double(v), double(t), n, dense, sparse,
                  dense / sparse, dense_bytes / sparse_bytes);
      std::fflush(stdout);
      if (csv)
        std::fprintf(csv, "%lld,%lld,%lld,%lld,%.6g,%.6g,%.0f,%.0f\n", v, d, t, n, dense, sparse, dense_bytes,
                     sparse_bytes);
    }
  }
  if (csv) std::fclose(csv);
  return 0;
}
