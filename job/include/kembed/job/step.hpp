#pragma once
// `kembed step`: one optimizer step of a table file by a run file's gradient, the
// optimizer's state carried from step to step in a state file (docs/CLI.md). What
// does not depend on the backend (reading and checking the three inputs, writing the
// two outputs with their provenance) is in job/src/step.cpp; the update itself is
// kembed::TableOptimizer's, on ExecutionSpace.
#include <kembed/job/detail/step_files.hpp>
#include <kembed/job/one_process.hpp>
#include <kembed/optim.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <tuple>
#include <vector>

namespace kembed::job {
namespace detail {

// The update: this process's rows of the table (`weight`, count x d, host) and of the
// state stepped by its rows of the run's gradient on `space`, through a sparse step
// where the run lists its rows. A process owning no rows only counts the step.
template <class ExecutionSpace>
void apply_step(ExecutionSpace const& space, StepInputs const& in, std::int64_t first, std::int64_t count,
                std::vector<float>& weight, OptimState& state) {
  using Optim = TableOptimizer<ExecutionSpace>;
  using memory_space = typename Optim::memory_space;
  using HostMatrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  auto const d = in.table.config.embedding_dim;
  if (count == 0) {
    state = in.state;
    ++state.step;
    return;
  }
  Optim optim(in.settings, count, d);
  optim.set_state(in.state);
  typename Optim::matrix_type w(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kembed::step_weight"), count, d);
  Kokkos::deep_copy(w, HostMatrix(weight.data(), count, d));
  if (in.run.sparse) {
    auto const n = std::int64_t(in.listed.size());
    typename Optim::sparse_type g;
    g.rows = Kokkos::View<std::int64_t*, memory_space>("kembed::step_rows", n);
    g.values = Kokkos::View<float**, Kokkos::LayoutRight, memory_space>("kembed::step_grad", n, d);
    auto const rows_h = Kokkos::create_mirror_view(g.rows);
    auto const values_h = Kokkos::create_mirror_view(g.values);
    for (std::int64_t i = 0; i < n; ++i) {
      auto const local = in.listed[std::size_t(i)] - first;
      rows_h(i) = local;
      for (std::int64_t j = 0; j < d; ++j) values_h(i, j) = in.grad[std::size_t(local * d + j)];
    }
    Kokkos::deep_copy(g.rows, rows_h);
    Kokkos::deep_copy(g.values, values_h);
    optim.step(space, w, g);
  } else {
    typename Optim::matrix_type g(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kembed::step_grad"), count, d);
    Kokkos::deep_copy(g, HostMatrix(const_cast<float*>(in.grad.data()), count, d));
    optim.step(space, w, typename Optim::const_matrix_type(g));
  }
  space.fence();
  Kokkos::deep_copy(HostMatrix(weight.data(), count, d), w);
  state = optim.state();
}

// The file parts' view of a team (job/team.hpp), for a table of v rows.
template <class Team>
StepTeam step_team(Team const& team, std::int64_t v) {
  StepTeam t;
  t.rank = team.rank();
  std::tie(t.first, t.count) = team.own_rows(v);
  t.collective = team.collective();
  t.broadcast = [&team](std::string const& text) { return team.broadcast(text); };
  t.sha256 = [&team](void const* data, std::size_t bytes) { return team.sha256_in_rank_order(data, bytes); };
  t.agree = [&team](std::exception_ptr error) { team.agree(error); };
  return t;
}

}  // namespace detail

// One step, by `team` (job::OneProcess, or kembed::mpi::Team: each rank its rows):
// reads the table, the run and the state (if any), updates the table and the state on
// `space`, writes both. A refused step writes nothing; the files are the same bytes
// for any number of ranks.
template <class ExecutionSpace, class Team>
StepReport run_step(ExecutionSpace const& space, Team const& team, StepSettings const& s, Observer const& o = {}) {
  using clock = std::chrono::steady_clock;
  auto const seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  auto const t0 = clock::now();
  io::TableFile header;
  std::exception_ptr error;
  try {
    header = io::load_rows(s.table, 0, 0);  // the table's shape, to split its rows
  } catch (...) {
    error = std::current_exception();
  }
  team.agree(error);
  auto const t = detail::step_team(team, header.config.num_embeddings);
  auto const in = detail::read_step_inputs(s, t, o);
  auto const t1 = clock::now();
  std::vector<float> weight = in.table.weight;
  OptimState state;
  detail::apply_step(space, in, t.first, t.count, weight, state);
  auto const t2 = clock::now();
  StepReport r;
  detail::write_step_outputs(s, in, weight, state, t, r);
  auto const t3 = clock::now();
  r.optimizer = std::string(to_string(in.settings.optimizer));
  r.backend = ExecutionSpace::name();
  r.threads = int(space.concurrency());
  r.ranks = team.size();
  r.step = state.step;
  r.rows = in.table.config.num_embeddings, r.cols = in.table.config.embedding_dim;
  r.sparse = in.run.sparse;
  r.rows_updated = in.run.sparse ? in.run.listed_count : r.rows;
  r.read_seconds = seconds(t0, t1), r.step_seconds = seconds(t1, t2), r.write_seconds = seconds(t2, t3);
  r.total_seconds = seconds(t0, t3);
  if (o.log)
    o.log("step " + std::to_string(r.step) + " of " + r.optimizer + " on " + std::to_string(r.rows_updated) + " of " +
          std::to_string(r.rows) + " rows");
  return r;
}

// One process: job::OneProcess's team.
template <class ExecutionSpace>
StepReport run_step(ExecutionSpace const& space, StepSettings const& s, Observer const& o = {}) {
  return run_step(space, OneProcess(), s, o);
}

}  // namespace kembed::job
