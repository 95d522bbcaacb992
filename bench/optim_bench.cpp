// kembed-optim-bench: one training step of a table, backward then update, two ways
// measured in the same run: unfused (backward_sparse, then TableOptimizer::step of
// its gradient) and fused (Embedding::backward_step: each listed row folded and
// stepped at once, its gradient never written out), for each optimizer over a grid
// of table sizes V and batch sizes T (Zipf ids). Both give the same table and state
// bits, checked at every point.
//
//   kembed-optim-bench [--rows 1e5,1e6] [--positions 1e4,1e5,1e6] [--dim 64]
//                      [--optimizers sgd,adagrad,rowwise_adagrad,adam] [--csv FILE]
#include <kembed/backends.hpp>
#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>

#include "args.hpp"
#include "bound.hpp"

#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using kembed::bench::best_seconds;
using Space = Kokkos::DefaultHostExecutionSpace;
using Layer = kembed::Embedding<Space>;
using Opt = kembed::TableOptimizer<Space>;

kembed::OptimSettings settings_of(std::string const& name) {
  auto s = kembed::optim_defaults(kembed::parse_optimizer(name));
  if (s.optimizer == kembed::Optimizer::sgd) s.momentum = 0.9;  // a state to carry
  return s;
}

bool same_bits(std::vector<float> const& a, std::vector<float> const& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  std::vector<long long> rows{100000, 1000000}, positions{10000, 100000, 1000000};
  long long d = 64;
  std::vector<std::string> optimizers{"sgd", "adagrad", "rowwise_adagrad", "adam"};
  std::string csv_path;
  try {
    kembed::bench::for_each_option(argc, argv, [&](std::string const& a, auto&& value) {
      if (a == "--rows")
        rows = kembed::bench::parse_list(value(), "--rows");
      else if (a == "--positions")
        positions = kembed::bench::parse_list(value(), "--positions");
      else if (a == "--dim")
        d = kembed::bench::parse_list(value(), "--dim").at(0);
      else if (a == "--optimizers") {
        optimizers.clear();
        std::stringstream in(value());
        for (std::string w; std::getline(in, w, ',');) optimizers.push_back(w), settings_of(w);
      } else if (a == "--csv")
        csv_path = value();
      else
        throw std::invalid_argument("unknown option " + a +
                                    " (use --rows LIST --positions LIST --dim D --optimizers LIST --csv FILE)");
    });
  } catch (std::exception const& e) {
    std::fprintf(stderr, "kembed-optim-bench: %s\n", e.what());
    return 2;
  }
  std::FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
  if (csv) std::fprintf(csv, "optimizer,rows,dim,positions,listed_rows,unfused_seconds,fused_seconds\n");
  Space const space;
  std::printf("kembed-optim-bench on %s (%d threads), d = %lld, Zipf ids (s = 1.1); best of repeats\n", Space::name(),
              int(space.concurrency()), d);
  std::printf(
      "| optimizer | V | T | rows listed | backward_sparse + step | backward_step (fused) | unfused / fused |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  for (auto const& name : optimizers)
    for (long long v : rows) {
      auto const table = kembed::synthetic::uniform_floats(v * d, 3);
      for (long long t : positions) {
        auto const ids_h = kembed::synthetic::zipf_ids(v, t, 1.1, 7);
        auto const dy_h = kembed::synthetic::uniform_floats(t * d, 8);
        auto const ids = Kokkos::create_mirror_view_and_copy(
            Space::memory_space(),
            Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(ids_h.data(), t));
        auto const dy =
            Kokkos::create_mirror_view_and_copy(Space::memory_space(), Layer::const_matrix_type(dy_h.data(), t, d));
        auto const s = settings_of(name);
        kembed::FloatsRef const w(table.data(), kembed::Shape{v, d});
        // The bits first: one step each way from the same table and state.
        Layer a(v, d, w), b(v, d, w);
        Opt oa(s, v, d), ob(s, v, d);
        a.step(space, oa, a.backward_sparse(space, Layer::ids64_type(ids), Layer::const_matrix_type(dy)));
        b.backward_step(space, Layer::ids64_type(ids), Layer::const_matrix_type(dy), ob);
        space.fence();
        if (!same_bits(a.weight_host(), b.weight_host()) || !same_bits(oa.state().first, ob.state().first) ||
            !same_bits(oa.state().second, ob.state().second)) {
          std::fprintf(stderr, "kembed-optim-bench: %s V = %lld, T = %lld: fused and unfused bits differ\n",
                       name.c_str(), v, t);
          return 1;
        }
        long long const listed =
            a.backward_sparse(space, Layer::ids64_type(ids), Layer::const_matrix_type(dy)).rows.extent(0);
        double const unfused = best_seconds([&] {
          a.step(space, oa, a.backward_sparse(space, Layer::ids64_type(ids), Layer::const_matrix_type(dy)));
          space.fence();
        });
        double const fused = best_seconds([&] {
          b.backward_step(space, Layer::ids64_type(ids), Layer::const_matrix_type(dy), ob);
          space.fence();
        });
        std::printf("| %s | %.0e | %.0e | %lld | %.5f s | %.5f s | %.3gx |\n", name.c_str(), double(v), double(t),
                    listed, unfused, fused, unfused / fused);
        std::fflush(stdout);
        if (csv) std::fprintf(csv, "%s,%lld,%lld,%lld,%lld,%.6g,%.6g\n", name.c_str(), v, d, t, listed, unfused, fused);
      }
    }
  if (csv) std::fclose(csv);
  return 0;
}
