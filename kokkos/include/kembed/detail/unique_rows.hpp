#pragma once
// The distinct rows a batch references, in O(T) memory whatever V is: the positions
// sorted by row with a least-significant-digit radix sort whose digits are sized to
// T (each pass the stable counting sort of counting_sort.hpp), then the first entry
// of each row marks a segment. The row-sparse backward and max_norm build on it.
#include <kembed/detail/row_index.hpp>

namespace kembed::detail {

template <class MemorySpace>
struct UniqueRows {
  Kokkos::View<std::int64_t*, MemorySpace> rows;       // U distinct rows, ascending
  Kokkos::View<std::int64_t*, MemorySpace> offsets;    // U + 1: rows(u) owns positions [offsets(u), offsets(u + 1))
  Kokkos::View<std::int64_t*, MemorySpace> positions;  // T positions in (row, position) order
};

// Bits of the row per pass: about log2(T), from 2^8 to 2^16 keys, so a pass's
// (keys, chunks) histogram stays near T; V = 1e8 sorts T = 1e6 in two passes.
inline int unique_digit_bits(std::int64_t t) {
  int const b = bits_for(t);
  return b < 8 ? 8 : b > 16 ? 16 : b;
}

template <class ExecutionSpace, class IdView>
UniqueRows<typename ExecutionSpace::memory_space> unique_rows(ExecutionSpace const& space, IdView const& ids,
                                                              std::int64_t v) {
  using memory_space = typename ExecutionSpace::memory_space;
  using Index = Kokkos::View<std::int64_t*, memory_space>;
  std::int64_t const t = ids.extent(0);
  int const row_bits = bits_for(v);
  int const digit_bits = unique_digit_bits(t) < row_bits ? unique_digit_bits(t) : row_bits;
  std::int64_t const digits = std::int64_t{1} << digit_bits;
  std::int64_t const chunks =
      Tiles<ExecutionSpace>::host ? sort_chunks(space.concurrency(), digits, t)
                                  : (t / device_sort_chunk > 1 ? t / device_sort_chunk : 1);
  Index order;
  for (int shift = 0; shift < row_bits; shift += digit_bits) {
    RadixPass<IdView, Index> const pass{ids, order, shift == 0, shift, digits - 1};
    order = counting_sort<std::int64_t>(space, t, digits, chunks, pass, pass, "kembed::unique_rows::radix").values;
  }
  // The rows in sorted order, gathered once: the passes below then read them in
  // sequence instead of through two random lookups each.
  Index const row_at(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::unique_rows::sorted"), t);
  Kokkos::parallel_for(
      "kembed::unique_rows::gather", Range<ExecutionSpace>(space, 0, t),
      KOKKOS_LAMBDA(std::int64_t i) { row_at(i) = static_cast<std::int64_t>(ids(order(i))); });
  std::int64_t u = 0;
  Kokkos::parallel_reduce(
      "kembed::unique_rows::count", Range<ExecutionSpace>(space, 0, t),
      KOKKOS_LAMBDA(std::int64_t i, std::int64_t & n) { n += (i == 0 || row_at(i) != row_at(i - 1)) ? 1 : 0; }, u);
  UniqueRows<memory_space> out{
      Index(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::unique_rows::rows"), u),
      Index(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::unique_rows::offsets"), u + 1), order};
  auto const rows = out.rows;
  auto const offsets = out.offsets;
  Kokkos::parallel_scan(
      "kembed::unique_rows::segments", Range<ExecutionSpace>(space, 0, t),
      KOKKOS_LAMBDA(std::int64_t i, std::int64_t & k, bool final) {
        bool const head = i == 0 || row_at(i) != row_at(i - 1);
        if (final && head) {
          rows(k) = row_at(i);
          offsets(k) = i;
        }
        if (head) ++k;
      });
  Kokkos::parallel_for(
      "kembed::unique_rows::end", Range<ExecutionSpace>(space, 0, 1), KOKKOS_LAMBDA(std::int64_t) { offsets(u) = t; });
  return out;
}

// The first index in the ascending `rows` whose row is >= r (rows.extent(0) if none).
template <class Rows>
KOKKOS_INLINE_FUNCTION std::int64_t lower_bound(Rows const& rows, std::int64_t r) {
  std::int64_t lo = 0, hi = rows.extent(0);
  while (lo < hi) {
    std::int64_t const mid = lo + (hi - lo) / 2;
    if (rows(mid) < r)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

}  // namespace kembed::detail
