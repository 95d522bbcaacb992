#pragma once
// Plan `sort`'s first half: the positions grouped by row, ascending within each
// row, as CSR (offsets, positions). The key (row, position) is unique, so this
// order is the only correct one, and every way of building it gives the same index.
//
// Two shapes, one dispatch point (row_sort_shape):
// - one stable counting sort on the row (O(T + V · chunks)), with one chunk per
//   host thread: no library routine in Kokkos 3.4 / Kokkos Kernels 3.4 is both
//   parallel and O(T + V) on host backends (docs/DESIGN.md says which we checked);
// - on devices, where a chunk is one GPU thread's serial walk and thousands of
//   chunks are needed, a (V, chunks) histogram would not fit: a least-significant-
//   digit radix sort, each pass the same stable counting sort on a few bits of the
//   row, with chunks of a few hundred positions. A stable pass keeps the order of
//   the previous ones, so the passes end in (row, position) order.
#include <kembed/detail/counting_sort.hpp>

namespace kembed::detail {

template <class MemorySpace>
struct RowIndex {
  Kokkos::View<std::int64_t*, MemorySpace> offsets;    // V + 1: row r owns [offsets(r), offsets(r + 1))
  Kokkos::View<std::int64_t*, MemorySpace> positions;  // T: positions in (row, position) order
};

// How the row index is sorted: `digit_bits` of the row per counting-sort pass (all
// of them: one pass), in `chunks` chunks of consecutive positions.
struct RowSortShape {
  int digit_bits = 63;
  std::int64_t chunks = 1;
};

inline int bits_for(std::int64_t v) {  // bits of the largest row, v - 1 (at least 1)
  int bits = 1;
  while (bits < 63 && (std::int64_t{1} << bits) < v) ++bits;
  return bits;
}

// Positions a device chunk walks, and the histogram a pass may hold per position.
inline constexpr std::int64_t device_sort_chunk = 256;
inline constexpr std::int64_t device_sort_histogram_per_position = 4;

inline RowSortShape row_sort_shape(bool host, std::int64_t concurrency, std::int64_t v, std::int64_t t) {
  RowSortShape s;
  if (host) {
    s.chunks = sort_chunks(concurrency, v, t);
    return s;
  }
  s.chunks = t / device_sort_chunk > 1 ? t / device_sort_chunk : 1;
  // The most digits whose (digits, chunks) histogram stays within a few entries
  // per position: 2^10 at T = 1e6, so V = 1e6 sorts in two passes.
  std::int64_t const budget = device_sort_histogram_per_position * (t > 4096 ? t : 4096);
  int bits = 1;
  while (bits < 16 && (std::int64_t{2} << bits) * s.chunks <= budget) ++bits;
  s.digit_bits = bits;
  return s;
}

// One radix pass's key (a digit of the row) and value (the position), for entry i
// of the previous pass's order (of the positions themselves in the first pass).
template <class IdView, class Order>
struct RadixPass {
  IdView ids;
  Order previous;
  bool first;
  int shift;
  std::int64_t mask;
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t i, std::int64_t) const { return first ? i : previous(i); }
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t i) const {
    return (static_cast<std::int64_t>(ids((*this)(i, 0))) >> shift) & mask;
  }
};

template <class ExecutionSpace, class IdView>
RowIndex<typename ExecutionSpace::memory_space> build_row_index(ExecutionSpace const& space, IdView const& ids,
                                                                std::int64_t v, RowSortShape const& shape) {
  using memory_space = typename ExecutionSpace::memory_space;
  std::int64_t const t = ids.extent(0);
  int const row_bits = bits_for(v);
  if (shape.digit_bits >= row_bits) {
    auto const sorted = counting_sort<std::int64_t>(
        space, t, v, shape.chunks, KOKKOS_LAMBDA(std::int64_t p) { return static_cast<std::int64_t>(ids(p)); },
        KOKKOS_LAMBDA(std::int64_t p, std::int64_t) { return p; }, "kembed::backward_sort");
    return {sorted.offsets, sorted.values};
  }
  // Radix passes, lowest digit first; pass 0 reads the positions in order.
  std::int64_t const digits = std::int64_t{1} << shape.digit_bits;
  Kokkos::View<std::int64_t*, memory_space> order;
  for (int shift = 0; shift < row_bits; shift += shape.digit_bits) {
    RadixPass<IdView, Kokkos::View<std::int64_t*, memory_space>> const pass{ids, order, shift == 0, shift, digits - 1};
    order = counting_sort<std::int64_t>(space, t, digits, shape.chunks, pass, pass, "kembed::backward_sort::radix")
                .values;
  }
  // Row r starts at the first entry whose row is >= r: a binary search per row,
  // which stays parallel whatever the ids (a gap-filling walk would give one thread
  // all of V when T is small).
  Kokkos::View<std::int64_t*, memory_space> offsets(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::backward_sort::offsets_view"), v + 1);
  Kokkos::parallel_for(
      "kembed::backward_sort::offsets", Range<ExecutionSpace>(space, 0, v + 1), KOKKOS_LAMBDA(std::int64_t r) {
        std::int64_t lo = 0, hi = t;
        while (lo < hi) {
          std::int64_t const mid = lo + (hi - lo) / 2;
          if (static_cast<std::int64_t>(ids(order(mid))) < r)
            lo = mid + 1;
          else
            hi = mid;
        }
        offsets(r) = lo;
      });
  return {offsets, order};
}

template <class ExecutionSpace, class IdView>
RowIndex<typename ExecutionSpace::memory_space> build_row_index(ExecutionSpace const& space, IdView const& ids,
                                                                std::int64_t v) {
  return build_row_index(space, ids, v,
                         row_sort_shape(Tiles<ExecutionSpace>::host, space.concurrency(), v, ids.extent(0)));
}

template <class ExecutionSpace, class Offsets, class Counts>
void counts_from_offsets(ExecutionSpace const& space, Offsets const& offsets, Counts const& counts) {
  Kokkos::parallel_for(
      "kembed::counts", Range<ExecutionSpace>(space, 0, counts.extent(0)),
      KOKKOS_LAMBDA(std::int64_t r) { counts(r) = offsets(r + 1) - offsets(r); });
}

}  // namespace kembed::detail
