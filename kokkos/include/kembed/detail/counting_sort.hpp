#pragma once
// A stable counting sort of the positions [0, T) by a small integer key: each chunk
// of positions counts its keys, one scan turns the (key, chunk) counts into slots,
// and each chunk scatters its positions in ascending order. Stable whatever the
// chunk count, so the chunks change the work split, never the result. Plans `sort`
// (key: the row) and `bucket` (key: the row's bucket) both build on it.
#include <kembed/detail/kernel_common.hpp>

#include <string>

namespace kembed::detail {

template <class MemorySpace, class Value>
struct KeyIndex {
  Kokkos::View<std::int64_t*, MemorySpace> offsets;  // keys + 1: key k owns [offsets(k), offsets(k + 1))
  Kokkos::View<Value*, MemorySpace> values;          // T: value_of(p) in (key, position) order
};

// Chunks for the counting sort: one per thread, each of at least 4096 positions,
// and the (keys, chunks) histogram kept within a few times the input's size.
inline std::int64_t sort_chunks(std::int64_t concurrency, std::int64_t keys, std::int64_t t) {
  std::int64_t chunks = concurrency < 1 ? 1 : concurrency;
  std::int64_t const by_work = t / 4096 > 1 ? t / 4096 : 1;
  std::int64_t const by_memory = (4 * (t + keys)) / keys > 1 ? (4 * (t + keys)) / keys : 1;
  if (chunks > by_work) chunks = by_work;
  if (chunks > by_memory) chunks = by_memory;
  return chunks;
}

// key_of(p) in [0, keys); value_of(p, key) is what lands in the sorted array.
// `label` names the kernels ("<label>::histogram", "::offsets", "::scatter").
template <class Value, class ExecutionSpace, class KeyOf, class ValueOf>
KeyIndex<typename ExecutionSpace::memory_space, Value> counting_sort(ExecutionSpace const& space, std::int64_t t,
                                                                     std::int64_t keys, std::int64_t chunks,
                                                                     KeyOf key_of, ValueOf value_of,
                                                                     std::string const& label) {
  using memory_space = typename ExecutionSpace::memory_space;
  // hist(k, c): how many of chunk c's positions have key k. LayoutLeft keeps each
  // chunk's column contiguous, so threads do not share cache lines while counting.
  Kokkos::View<std::int64_t**, Kokkos::LayoutLeft, memory_space> hist(
      Kokkos::view_alloc(space, label + "::histogram_counts"), keys, chunks);
  KeyIndex<memory_space, Value> index{
      Kokkos::View<std::int64_t*, memory_space>(
          Kokkos::view_alloc(space, Kokkos::WithoutInitializing, label + "::offsets_view"), keys + 1),
      Kokkos::View<Value*, memory_space>(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, label + "::values"),
                                         t)};
  auto const offsets = index.offsets;
  auto const values = index.values;

  Kokkos::parallel_for(
      label + "::histogram", Range<ExecutionSpace>(space, 0, chunks), KOKKOS_LAMBDA(std::int64_t c) {
        std::int64_t const end = part_begin(t, chunks, c + 1);
        for (std::int64_t p = part_begin(t, chunks, c); p < end; ++p) hist(key_of(p), c) += 1;
      });
  // Exclusive scan in (key, chunk) order turns counts into each chunk's first slot
  // for each key; column 0 of a key is that key's offset.
  Kokkos::parallel_scan(
      label + "::offsets", Range<ExecutionSpace>(space, 0, keys * chunks),
      KOKKOS_LAMBDA(std::int64_t i, std::int64_t & running, bool final) {
        std::int64_t const k = i / chunks, c = i % chunks;
        std::int64_t const n = hist(k, c);
        if (final) {
          hist(k, c) = running;
          if (c == 0) offsets(k) = running;
          if (i == keys * chunks - 1) offsets(keys) = running + n;
        }
        running += n;
      });
  Kokkos::parallel_for(
      label + "::scatter", Range<ExecutionSpace>(space, 0, chunks), KOKKOS_LAMBDA(std::int64_t c) {
        std::int64_t const end = part_begin(t, chunks, c + 1);
        for (std::int64_t p = part_begin(t, chunks, c); p < end; ++p) {
          std::int64_t const k = key_of(p);
          values(hist(k, c)) = value_of(p, k);
          hist(k, c) += 1;
        }
      });
  return index;
}

}  // namespace kembed::detail
