#pragma once
// Mode `fast`: one atomic add per (position, column), in whatever order the
// backend runs them. On a parallel backend the bits may change from run to run;
// on Serial the order is ascending and the bits equal mode `identical`. With one
// thread there is nothing to race: plain adds in the same order, measured 10x
// (Serial) and 2.5-3.5x (OpenMP, 1 thread) faster than a compare-and-swap per term at
// V = 1e3, d = 512, T = 1e6.
#include <kembed/detail/kernel_common.hpp>

namespace kembed::detail {

// Returns whether any dy term was NaN or +-inf (see fold_identical).
template <class ExecutionSpace, class IdView, class Dy, class Carry, class Grad, class Counts>
bool backward_fast(ExecutionSpace const& space, IdView const& ids, Dy const& dy, Carry const& carry, Grad const& grad,
                   Counts const& counts, std::int64_t padding_idx) {
  std::int64_t const v = grad.extent(0);
  std::int64_t const d = grad.extent(1);
  std::int64_t const t = ids.extent(0);
  bool const has_carry = carry.data() != nullptr;
  bool const has_counts = counts.data() != nullptr;
  bool const in_place = has_carry && carry.data() == grad.data();
  // On the host the rows start as the threads' memsets (start_host_gradient); the
  // padding row is then reset as in place.
  bool const started = !in_place && start_host_gradient(space, carry, grad);
  bool const rows = !in_place && !started;  // a device, or a strided view: the loop starts them
  if (rows || has_counts) {
    Kokkos::parallel_for(
        "kembed::backward_fast::init", Range<ExecutionSpace>(space, 0, v), KOKKOS_LAMBDA(std::int64_t r) {
          if (rows)
            for (std::int64_t c = 0; c < d; ++c) grad(r, c) = (has_carry && r != padding_idx) ? carry(r, c) : 0.0f;
          if (has_counts) counts(r) = 0;
        });
  }
  if ((in_place || started) && padding_idx >= 0) {
    Kokkos::parallel_for(
        "kembed::backward_fast::padding", Range<ExecutionSpace>(space, 0, d),
        KOKKOS_LAMBDA(std::int64_t c) { grad(padding_idx, c) = 0.0f; });
  }
  bool const one_thread = space.concurrency() == 1;
  int bad = 0;
  Kokkos::parallel_reduce(
      "kembed::backward_fast", Range<ExecutionSpace>(space, 0, t),
      KOKKOS_LAMBDA(std::int64_t p, int& saw) {
        auto const r = static_cast<std::int64_t>(ids(p));
        int flag = 0;
        if (one_thread) {
          if (has_counts) counts(r) += 1;
          for (std::int64_t c = 0; c < d; ++c) {
            float const x = dy(p, c);
            flag |= non_finite(x);
            if (r != padding_idx) grad(r, c) = grad(r, c) + x;
          }
          saw |= flag;
          return;
        }
        if (has_counts) Kokkos::atomic_add(&counts(r), std::int64_t{1});
        for (std::int64_t c = 0; c < d; ++c) {
          float const x = dy(p, c);
          flag |= non_finite(x);
          if (r != padding_idx) Kokkos::atomic_add(&grad(r, c), x);
        }
        saw |= flag;
      },
      Kokkos::BOr<int>(bad));
  return bad != 0;
}

}  // namespace kembed::detail
