#pragma once
// Plan `sort`'s first half: the positions grouped by row, ascending within each
// row, as CSR (offsets, positions): a stable counting sort on the row, O(T + V),
// written here because no library routine in Kokkos 3.4 / Kokkos Kernels 3.4 is
// both parallel and O(T + V) on host backends (docs/DESIGN.md says which we
// looked at). The key (row, position) is unique, so this order is the only
// correct one.
#include <kembed/detail/counting_sort.hpp>

namespace kembed::detail {

template <class MemorySpace>
struct RowIndex {
  Kokkos::View<std::int64_t*, MemorySpace> offsets;    // V + 1: row r owns [offsets(r), offsets(r + 1))
  Kokkos::View<std::int64_t*, MemorySpace> positions;  // T: positions in (row, position) order
};

template <class ExecutionSpace, class IdView>
RowIndex<typename ExecutionSpace::memory_space> build_row_index(ExecutionSpace const& space, IdView const& ids,
                                                                std::int64_t v, std::int64_t chunks) {
  auto const sorted = counting_sort<std::int64_t>(
      space, std::int64_t(ids.extent(0)), v, chunks,
      KOKKOS_LAMBDA(std::int64_t p) { return static_cast<std::int64_t>(ids(p)); },
      KOKKOS_LAMBDA(std::int64_t p, std::int64_t) { return p; }, "kembed::backward_sort");
  return {sorted.offsets, sorted.values};
}

template <class ExecutionSpace, class Offsets, class Counts>
void counts_from_offsets(ExecutionSpace const& space, Offsets const& offsets, Counts const& counts) {
  Kokkos::parallel_for(
      "kembed::counts", Range<ExecutionSpace>(space, 0, counts.extent(0)),
      KOKKOS_LAMBDA(std::int64_t r) { counts(r) = offsets(r + 1) - offsets(r); });
}

}  // namespace kembed::detail
