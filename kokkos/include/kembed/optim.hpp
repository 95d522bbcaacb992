#pragma once
// kembed::TableOptimizer: the update step of torch.optim's SGD, Adagrad, Adam/AdamW
// and FBGEMM's row-wise Adagrad on a (V, d) table in an execution space's memory,
// with the same bits on every backend and thread count (docs/CONTRACT.md,
// "Updates"). Its state lives in that memory too; state() and set_state() move it
// to and from the host (core's OptimState) for saving.
#include <kembed/core/error.hpp>
#include <kembed/core/optim.hpp>
#include <kembed/detail/backward_sparse.hpp>
#include <kembed/detail/checks.hpp>
#include <kembed/detail/fused_step.hpp>
#include <kembed/detail/optim_step.hpp>

#include <string>

namespace kembed {

template <class ExecutionSpace = Kokkos::DefaultExecutionSpace>
class TableOptimizer {
  static_assert(Kokkos::is_execution_space<ExecutionSpace>::value,
                "kembed::TableOptimizer<ExecutionSpace>: the argument must be a Kokkos execution space");

 public:
  using execution_space = ExecutionSpace;
  using memory_space = typename ExecutionSpace::memory_space;
  using matrix_type = Kokkos::View<float**, Kokkos::LayoutRight, memory_space>;
  using const_matrix_type = Kokkos::View<float const**, Kokkos::LayoutRight, memory_space>;
  using sparse_type = detail::SparseRows<memory_space>;

  // Checks the settings (InvalidArgument naming the setting); the state starts as
  // core's initial_state().
  TableOptimizer(OptimSettings const& settings, std::int64_t num_embeddings, std::int64_t embedding_dim)
      : settings_(settings), v_(num_embeddings), d_(embedding_dim) {
    check_settings(settings_);
    if (v_ < 1 || d_ < 1)
      throw InvalidArgument("num_embeddings", "a (" + std::to_string(v_) + ", " + std::to_string(d_) +
                                                  ") table: want num_embeddings >= 1 and embedding_dim >= 1");
    set_state(initial_state(settings_, v_, d_));
  }

  OptimSettings const& settings() const noexcept { return settings_; }
  // New settings for the next steps (a schedule's learning rate), the state kept: the
  // optimizer and the state's shape must stay (InvalidArgument naming "settings";
  // nothing changes on a refusal).
  void set_settings(OptimSettings const& settings) {
    check_settings(settings);
    auto const now = state_widths(settings_, d_), then = state_widths(settings, d_);
    if (settings.optimizer != settings_.optimizer || now.first != then.first || now.second != then.second)
      throw InvalidArgument("settings", std::string("new settings must keep the optimizer (") +
                                            std::string(to_string(settings_.optimizer)) +
                                            ") and its state's shape (SGD's momentum on or off); make a new optimizer");
    settings_ = settings;
  }
  std::int64_t steps() const noexcept { return step_; }

  // One step with a dense (V, d) gradient: every row. The shapes and the gradient
  // are checked first; a refused step changes nothing.
  void step(ExecutionSpace const& space, matrix_type const& weight, const_matrix_type const& grad) {
    check_weight(weight);
    check_matrix("grad", grad, v_);
    detail::check_finite(space, grad, "grad", "row");
    run(
        space, weight, Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>(space, 0, v_),
        KOKKOS_LAMBDA(std::int64_t i) { return i; }, grad);
  }

  // One step with a row-sparse gradient: only its rows (ascending, unique, in
  // [0, V)) and their state change.
  void step(ExecutionSpace const& space, matrix_type const& weight, sparse_type const& grad) {
    check_weight(weight);
    detail::check_sparse_rows(space, grad, v_, d_, "grad");
    auto const rows = grad.rows;
    run(
        space, weight,
        Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>(space, 0, grad.rows.extent(0)),
        KOKKOS_LAMBDA(std::int64_t i) { return rows(i); }, const_matrix_type(grad.values));
  }

  // One step whose arithmetic `kernel(rule, first, second)` runs (the fused backward,
  // Embedding::backward_step): it gets the step's rule and the state's views and
  // returns whether it ran; only then does the step count. The weight's shape is
  // checked first.
  template <class Kernel>
  bool step_by(matrix_type const& weight, Kernel const& kernel) {
    check_weight(weight);
    auto const rule = detail::step_rule(settings_, step_ + 1);
    if (!kernel(rule, first_, second_)) return false;
    step_ = rule.k.t;
    return true;
  }

  // The state on the host, and back (checked as core's check_state; nothing changes
  // on a refusal).
  OptimState state() const {
    OptimState st;
    st.optimizer = settings_.optimizer;
    st.num_embeddings = v_, st.embedding_dim = d_, st.step = step_;
    st.first.resize(first_.extent(0));
    st.second.resize(second_.extent(0));
    Kokkos::deep_copy(host_floats(st.first), first_);
    Kokkos::deep_copy(host_floats(st.second), second_);
    return st;
  }
  void set_state(OptimState const& st) {
    check_state(st, settings_, v_, d_);
    Kokkos::View<float*, memory_space> first(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kembed::optim_state"),
                                             st.first.size());
    Kokkos::View<float*, memory_space> second(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kembed::optim_state"),
                                              st.second.size());
    Kokkos::deep_copy(first, HostConstFloats(st.first.data(), st.first.size()));
    Kokkos::deep_copy(second, HostConstFloats(st.second.data(), st.second.size()));
    first_ = first, second_ = second, step_ = st.step;
  }

 private:
  using HostFloats = Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using HostConstFloats = Kokkos::View<float const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  static HostFloats host_floats(std::vector<float>& v) { return HostFloats(v.data(), v.size()); }

  void check_weight(matrix_type const& weight) const { check_matrix("weight", weight, v_); }
  template <class Matrix>
  void check_matrix(char const* name, Matrix const& m, std::int64_t rows) const {
    if (std::int64_t(m.extent(0)) != rows || std::int64_t(m.extent(1)) != d_)
      throw InvalidArgument(name, std::string(name) + " has shape (" + std::to_string(m.extent(0)) + ", " +
                                      std::to_string(m.extent(1)) + "), want (" + std::to_string(rows) + ", " +
                                      std::to_string(d_) + ")");
  }

  // A free function runs the kernel: nvcc takes no device lambda in a private member.
  template <class Policy, class RowOf>
  void run(ExecutionSpace const&, matrix_type const& weight, Policy const& policy, RowOf const& row_of,
           const_matrix_type const& grad) {
    auto const rule = detail::step_rule(settings_, step_ + 1);
    detail::optim_rows(label(rule.optimizer), policy, rule, weight, grad, row_of, first_, second_);
    step_ = rule.k.t;
  }

  // Indexed by Optimizer's order (sgd, adagrad, rowwise_adagrad, adam).
  static char const* label(Optimizer o) {
    static char const* const names[] = {"kembed::optim_step[sgd]", "kembed::optim_step[adagrad]",
                                        "kembed::optim_step[rowwise_adagrad]", "kembed::optim_step[adam]"};
    return names[static_cast<int>(o)];
  }

  OptimSettings settings_;
  std::int64_t v_, d_;
  std::int64_t step_ = 0;
  Kokkos::View<float*, memory_space> first_, second_;
};

}  // namespace kembed
