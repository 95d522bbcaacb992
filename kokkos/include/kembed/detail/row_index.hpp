#pragma once
// Plan `sort`'s first half: the positions grouped by row, ascending within each
// row, as CSR (offsets, positions). It is a stable counting sort on the row,
// written here because no library routine in Kokkos 3.4 / Kokkos Kernels 3.4 is
// both parallel and O(T + V) on host backends (docs/DESIGN.md says which we
// looked at). The key (row, position) is unique, so this order is the only
// correct one: the chunk count changes the work split, never the result.
#include <kembed/detail/kernel_common.hpp>

namespace kembed::detail {

template <class MemorySpace>
struct RowIndex {
  Kokkos::View<std::int64_t*, MemorySpace> offsets;    // V + 1: row r owns [offsets(r), offsets(r + 1))
  Kokkos::View<std::int64_t*, MemorySpace> positions;  // T: positions in (row, position) order
};

// Chunks for the counting sort: one per thread, each of at least 4096 positions,
// and the (V, chunks) histogram kept within a few times the input's size.
inline std::int64_t sort_chunks(std::int64_t concurrency, std::int64_t v, std::int64_t t) {
  std::int64_t chunks = concurrency < 1 ? 1 : concurrency;
  std::int64_t const by_work = t / 4096 > 1 ? t / 4096 : 1;
  std::int64_t const by_memory = (4 * (t + v)) / v > 1 ? (4 * (t + v)) / v : 1;
  if (chunks > by_work) chunks = by_work;
  if (chunks > by_memory) chunks = by_memory;
  return chunks;
}

template <class ExecutionSpace, class IdView>
RowIndex<typename ExecutionSpace::memory_space> build_row_index(ExecutionSpace const& space, IdView const& ids,
                                                                std::int64_t v, std::int64_t chunks) {
  using memory_space = typename ExecutionSpace::memory_space;
  std::int64_t const t = ids.extent(0);
  // hist(r, c): how many of chunk c's positions hit row r. LayoutLeft keeps each
  // chunk's column contiguous, so threads do not share cache lines while counting.
  Kokkos::View<std::int64_t**, Kokkos::LayoutLeft, memory_space> hist(
      Kokkos::view_alloc(space, "kembed::row_histogram"), v, chunks);
  RowIndex<memory_space> index{
      Kokkos::View<std::int64_t*, memory_space>(
          Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::row_offsets"), v + 1),
      Kokkos::View<std::int64_t*, memory_space>(
          Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::row_positions"), t)};
  auto const offsets = index.offsets;
  auto const positions = index.positions;

  Kokkos::parallel_for(
      "kembed::backward_sort::histogram", Range<ExecutionSpace>(space, 0, chunks), KOKKOS_LAMBDA(std::int64_t c) {
        std::int64_t const end = part_begin(t, chunks, c + 1);
        for (std::int64_t p = part_begin(t, chunks, c); p < end; ++p) hist(static_cast<std::int64_t>(ids(p)), c) += 1;
      });
  // Exclusive scan in (row, chunk) order turns counts into each chunk's first slot
  // for each row; column 0 of a row is that row's offset.
  Kokkos::parallel_scan(
      "kembed::backward_sort::offsets", Range<ExecutionSpace>(space, 0, v * chunks),
      KOKKOS_LAMBDA(std::int64_t i, std::int64_t & running, bool final) {
        std::int64_t const r = i / chunks, c = i % chunks;
        std::int64_t const n = hist(r, c);
        if (final) {
          hist(r, c) = running;
          if (c == 0) offsets(r) = running;
          if (i == v * chunks - 1) offsets(v) = running + n;
        }
        running += n;
      });
  Kokkos::parallel_for(
      "kembed::backward_sort::scatter", Range<ExecutionSpace>(space, 0, chunks), KOKKOS_LAMBDA(std::int64_t c) {
        std::int64_t const end = part_begin(t, chunks, c + 1);
        for (std::int64_t p = part_begin(t, chunks, c); p < end; ++p) {
          auto const r = static_cast<std::int64_t>(ids(p));
          positions(hist(r, c)) = p;
          hist(r, c) += 1;
        }
      });
  return index;
}

template <class ExecutionSpace, class Offsets, class Counts>
void counts_from_offsets(ExecutionSpace const& space, Offsets const& offsets, Counts const& counts) {
  Kokkos::parallel_for(
      "kembed::counts", Range<ExecutionSpace>(space, 0, counts.extent(0)),
      KOKKOS_LAMBDA(std::int64_t r) { counts(r) = offsets(r + 1) - offsets(r); });
}

}  // namespace kembed::detail
