#pragma once
// Device-side validation: each check finds the first offending element with one
// reduction, so the error can name it, before any output is written.
#include <kembed/detail/kernel_common.hpp>

#include <kembed/core/validate.hpp>

namespace kembed::detail {

template <class ExecutionSpace, class IdView>
void check_ids(ExecutionSpace const& space, IdView const& ids, std::int64_t num_embeddings) {
  std::int64_t const n = ids.extent(0);
  std::int64_t first = n;
  Kokkos::parallel_reduce(
      "kembed::check_ids", Range<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t p, std::int64_t & lowest) {
        auto const r = static_cast<std::int64_t>(ids(p));
        if ((r < 0 || r >= num_embeddings) && p < lowest) lowest = p;
      },
      Kokkos::Min<std::int64_t>(first));
  if (first >= n) return;
  typename IdView::non_const_value_type value{};
  Kokkos::deep_copy(value, Kokkos::subview(ids, first));
  throw_id_out_of_range("ids", first, static_cast<std::int64_t>(value), num_embeddings);
}

// A (rows, cols) matrix named `argument`; `row_name` words the error ("position", "row").
template <class ExecutionSpace, class Matrix>
void check_finite(ExecutionSpace const& space, Matrix const& m, char const* argument, char const* row_name) {
  std::int64_t const cols = m.extent(1);
  std::int64_t const n = static_cast<std::int64_t>(m.extent(0)) * cols;
  if (n == 0) return;
  std::int64_t first = n;
  Kokkos::parallel_reduce(
      "kembed::check_finite", Range<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t i, std::int64_t & lowest) {
        if (!is_finite(m(i / cols, i % cols)) && i < lowest) lowest = i;
      },
      Kokkos::Min<std::int64_t>(first));
  if (first >= n) return;
  typename Matrix::non_const_value_type value{};
  Kokkos::deep_copy(value, Kokkos::subview(m, first / cols, first % cols));
  throw_non_finite(argument, first, static_cast<float>(value), cols, row_name);
}

}  // namespace kembed::detail
