#pragma once
// Small calls that continue a gradient in place: the sort plan's index built over
// the rows the call references (unique_rows.hpp) instead of all V, then the sort
// plan's folds over those rows only. A call then costs O(T log T + T x d), not the
// O(V x C) histogram and O(V) fold of the full index; rows it does not reference
// keep their bits (-0.0 included). Each row's sum is the same loop (or tree) over the
// same positions as in the full index, so the bits are the sort plan's.
#include <kembed/detail/backward_sparse.hpp>
#include <kembed/detail/fold.hpp>
#include <kembed/detail/unique_rows.hpp>

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

namespace kembed::detail {

// The listed index is used where T * 8 <= V (the full index would be mostly empty
// rows), and on host backends a call of at most caller_positions positions runs on
// the calling thread: below that a parallel launch cost more than the call
// (bench/small_calls_bench.cpp; docs/PERFORMANCE.md, "Small calls").
inline constexpr std::int64_t listed_rows_ratio = 8;
inline constexpr std::int64_t caller_positions = 1024;

// Whether a call of t positions on a (v, d) gradient runs on the calling thread.
template <class ExecutionSpace>
constexpr bool runs_on_caller(std::int64_t t) {
  return std::is_same_v<typename ExecutionSpace::memory_space, Kokkos::HostSpace> && t <= caller_positions;
}

// unique_rows on the calling thread, for small calls in host memory: one sort of
// (row, position) pairs, a unique key, so the order is unique_rows' own. The views
// point into this thread's buffers, valid until its next call.
template <class IdView>
UniqueRows<Kokkos::HostSpace> unique_rows_on_caller(IdView const& ids) {
  using Index = Kokkos::View<std::int64_t*, Kokkos::HostSpace>;
  thread_local std::vector<std::pair<std::int64_t, std::int64_t>> keys;
  thread_local std::vector<std::int64_t> rows, offsets, positions;
  std::int64_t const t = ids.extent(0);
  keys.resize(std::size_t(t));
  for (std::int64_t p = 0; p < t; ++p) keys[std::size_t(p)] = {static_cast<std::int64_t>(ids(p)), p};
  std::sort(keys.begin(), keys.end());
  rows.clear();
  offsets.clear();
  positions.resize(std::size_t(t));
  for (std::int64_t i = 0; i < t; ++i) {
    auto const& k = keys[std::size_t(i)];
    if (i == 0 || k.first != keys[std::size_t(i - 1)].first) {
      rows.push_back(k.first);
      offsets.push_back(i);
    }
    positions[std::size_t(i)] = k.second;
  }
  offsets.push_back(t);
  std::int64_t const u = std::int64_t(rows.size());
  return {Index(rows.data(), u), Index(offsets.data(), u + 1), Index(positions.data(), t)};
}

// The distinct rows of `ids` and their segments: on the calling thread where
// `on_caller`, else by unique_rows' parallel radix sort.
template <class ExecutionSpace, class IdView>
UniqueRows<typename ExecutionSpace::memory_space> listed_rows(ExecutionSpace const& space, IdView const& ids,
                                                              std::int64_t v, bool on_caller) {
  if constexpr (std::is_same_v<typename ExecutionSpace::memory_space, Kokkos::HostSpace>) {
    if (on_caller) {
      space.fence();  // the ids may still be being written on `space`
      return unique_rows_on_caller(ids);
    }
  }
  return unique_rows(space, ids, v);
}

// The whole-batch counts of the listed rows, in index order, after checking that
// each covers the call's own occurrences (scale_grad_by_freq=batch).
template <class ExecutionSpace, class Unique, class Batch>
Kokkos::View<std::int64_t const*, typename ExecutionSpace::memory_space> listed_batch_counts(
    ExecutionSpace const& space, Unique const& unique, Batch const& batch, bool on_caller) {
  using Index = Kokkos::View<std::int64_t*, typename ExecutionSpace::memory_space>;
  std::int64_t const u = unique.rows.extent(0);
  auto const rows = unique.rows;
  auto const offsets = unique.offsets;
  Index listed(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::backward_listed::batch_counts"), u);
  if constexpr (std::is_same_v<typename ExecutionSpace::memory_space, Kokkos::HostSpace>) {
    if (on_caller) {
      bool bad = false;
      for (std::int64_t i = 0; i < u; ++i) {
        listed(i) = batch(rows(i));
        bad |= offsets(i + 1) - offsets(i) > listed(i);
      }
      if (bad) check_batch_counts(space, offsets, ListedRow<decltype(rows)>{rows}, batch, u);  // throws, naming it
      return listed;
    }
  }
  check_batch_counts(space, offsets, ListedRow<decltype(rows)>{rows}, batch, u);
  Kokkos::parallel_for(
      "kembed::backward_listed::gather_batch_counts", Range<ExecutionSpace>(space, 0, u),
      KOKKOS_LAMBDA(std::int64_t i) { listed(i) = batch(rows(i)); });
  return listed;
}

// Continues `grad` (its own carry) with the call's terms, touching only the rows
// the ids reference and the padding row (zeroed, as every plan does). dy was
// checked by the caller (in place, nothing else is). `counts` (if any) gets this
// call's counts: all V entries are written, a fill of V x 8 bytes.
template <class ExecutionSpace, class IdView, class Dy, class Carry, class Grad, class Counts, class Batch>
void backward_listed(ExecutionSpace const& space, IdView const& ids, Dy const& dy, Carry const& carry,
                     Grad const& grad, Counts const& counts, std::int64_t padding_idx, Mode mode,
                     FreqScale scale_kind, Batch const& batch_counts, HostIsa isa, bool on_caller) {
  constexpr bool host_memory = std::is_same_v<typename ExecutionSpace::memory_space, Kokkos::HostSpace>;
  on_caller = on_caller && host_memory;
  std::int64_t const v = grad.extent(0), d = grad.extent(1);
  auto const unique = listed_rows(space, ids, v, on_caller);
  RowScale<typename ExecutionSpace::memory_space> scale;
  scale.kind = scale_kind;
  if (scale_kind == FreqScale::batch) scale.batch = listed_batch_counts(space, unique, batch_counts, on_caller);
  if (padding_idx >= 0) {
    if constexpr (host_memory)
      if (on_caller) {
        for (std::int64_t c = 0; c < d; ++c) grad(padding_idx, c) = 0.0f;
      }
    if (!on_caller)
      Kokkos::parallel_for(
          "kembed::backward_listed::padding", Range<ExecutionSpace>(space, 0, d),
          KOKKOS_LAMBDA(std::int64_t c) { grad(padding_idx, c) = 0.0f; });
  }
  auto const rows = unique.rows;
  ListedRow<decltype(rows)> const row_of{rows};
  if (mode == Mode::deterministic)
    fold_pairwise(space, unique, dy, carry, grad, padding_idx, isa, scale, row_of, on_caller);
  else
    fold_identical(space, unique, dy, carry, grad, padding_idx, isa, scale, row_of, on_caller);
  if (counts.data() == nullptr) return;
  auto const offsets = unique.offsets;
  std::int64_t const u = rows.extent(0);
  if constexpr (host_memory)
    if (on_caller) {
      for (std::int64_t r = 0; r < v; ++r) counts(r) = 0;
      for (std::int64_t i = 0; i < u; ++i) counts(rows(i)) = offsets(i + 1) - offsets(i);
      return;
    }
  Kokkos::deep_copy(space, counts, 0);
  Kokkos::parallel_for(
      "kembed::backward_listed::counts", Range<ExecutionSpace>(space, 0, u),
      KOKKOS_LAMBDA(std::int64_t i) { counts(rows(i)) = offsets(i + 1) - offsets(i); });
}

}  // namespace kembed::detail
