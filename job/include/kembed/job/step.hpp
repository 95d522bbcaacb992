#pragma once
// `kembed step`: one optimizer step of a table file by a run file's gradient, the
// optimizer's state carried from step to step in a state file (docs/CLI.md). What
// does not depend on the backend (reading and checking the three inputs, writing the
// two outputs with their provenance) is in job/src/step.cpp; the update itself is
// kembed::TableOptimizer's, on ExecutionSpace.
#include <kembed/job/detail/step_files.hpp>
#include <kembed/optim.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kembed::job {
namespace detail {

// The update: `weight` (V x d, host) and `state` stepped by the run's gradient on
// `space`, through a sparse step where the run lists its rows.
template <class ExecutionSpace>
void apply_step(ExecutionSpace const& space, StepInputs const& in, std::vector<float>& weight, OptimState& state) {
  using Optim = TableOptimizer<ExecutionSpace>;
  using memory_space = typename Optim::memory_space;
  auto const v = in.table.config.num_embeddings, d = in.table.config.embedding_dim;
  using HostMatrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  Optim optim(in.settings, v, d);
  optim.set_state(in.state);
  typename Optim::matrix_type w(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kembed::step_weight"), v, d);
  Kokkos::deep_copy(w, HostMatrix(weight.data(), v, d));
  auto const& grad = in.run.gradient;
  if (in.run.sparse) {
    auto const& listed = in.run.listed_rows;
    auto const n = std::int64_t(listed.size());
    typename Optim::sparse_type g;
    g.rows = Kokkos::View<std::int64_t*, memory_space>("kembed::step_rows", n);
    g.values = Kokkos::View<float**, Kokkos::LayoutRight, memory_space>("kembed::step_grad", n, d);
    auto const rows_h = Kokkos::create_mirror_view(g.rows);
    auto const values_h = Kokkos::create_mirror_view(g.values);
    for (std::int64_t i = 0; i < n; ++i) {
      rows_h(i) = listed[std::size_t(i)];
      for (std::int64_t j = 0; j < d; ++j) values_h(i, j) = grad[std::size_t(listed[std::size_t(i)] * d + j)];
    }
    Kokkos::deep_copy(g.rows, rows_h);
    Kokkos::deep_copy(g.values, values_h);
    optim.step(space, w, g);
  } else {
    typename Optim::matrix_type g(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kembed::step_grad"), v, d);
    Kokkos::deep_copy(g, HostMatrix(const_cast<float*>(grad.data()), v, d));
    optim.step(space, w, typename Optim::const_matrix_type(g));
  }
  space.fence();
  Kokkos::deep_copy(HostMatrix(weight.data(), v, d), w);
  state = optim.state();
}

}  // namespace detail

// One step: reads the table, the run and the state (if any), updates the table and
// the state on `space`, writes both. A refused step writes nothing.
template <class ExecutionSpace>
StepReport run_step(ExecutionSpace const& space, StepSettings const& s, Observer const& o = {}) {
  using clock = std::chrono::steady_clock;
  auto const seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  auto const t0 = clock::now();
  auto const in = detail::read_step_inputs(s, o);
  auto const t1 = clock::now();
  std::vector<float> weight = in.table.weight;
  OptimState state;
  detail::apply_step(space, in, weight, state);
  auto const t2 = clock::now();
  StepReport r;
  detail::write_step_outputs(s, in, weight, state, r);
  auto const t3 = clock::now();
  r.optimizer = std::string(to_string(in.settings.optimizer));
  r.backend = ExecutionSpace::name();
  r.threads = int(space.concurrency());
  r.step = state.step;
  r.rows = in.table.config.num_embeddings, r.cols = in.table.config.embedding_dim;
  r.sparse = in.run.sparse;
  r.rows_updated = in.run.sparse ? std::int64_t(in.run.listed_rows.size()) : r.rows;
  r.read_seconds = seconds(t0, t1), r.step_seconds = seconds(t1, t2), r.write_seconds = seconds(t2, t3);
  r.total_seconds = seconds(t0, t3);
  if (o.log)
    o.log("step " + std::to_string(r.step) + " of " + r.optimizer + " on " + std::to_string(r.rows_updated) + " of " +
          std::to_string(r.rows) + " rows");
  return r;
}

}  // namespace kembed::job
