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
// rows). On host memory a small call runs on the calling thread, where the
// parallel path's radix passes and launches (13-30 us) cost more than the call:
// with several threads while T x (d + 16) <= caller_work (the crossover was at
// T = 1024-2048 for d = 16 and 256-512 for d = 128, 2 threads, V = 1e6), with one
// while T <= caller_positions (crossovers 1024-2048 and 2048-4096; past them the
// caller's std::sort loses to the radix passes). kembed-small-calls-bench --threshold.
inline constexpr std::int64_t listed_rows_ratio = 8;
inline constexpr std::int64_t caller_work = 32 * 1024;
inline constexpr std::int64_t caller_positions = 2048;

// Whether a call of t positions, d columns, runs on the calling thread.
template <class ExecutionSpace>
bool runs_on_caller(ExecutionSpace const& space, std::int64_t t, std::int64_t d) {
  if (!std::is_same_v<typename ExecutionSpace::memory_space, Kokkos::HostSpace>) return false;
  return space.concurrency() <= 1 ? t <= caller_positions : t * (d + 16) <= caller_work;
}

// A small call on the calling thread waits for its scattered rows' memory, which no
// prefetcher predicts: asking for the first positions' rows as the call starts
// overlaps those misses with its checks (ids not yet checked are skipped, never
// addressed). Calls of 7 at V = 1e6, d = 4, one thread: 106 -> 58 ns a position.
inline constexpr std::int64_t early_rows = 16;
template <class IdView, class View>
void prefetch_first_rows(IdView const& ids, View const& m) {  // m: rows x d, or one entry per row
  std::int64_t const t = std::int64_t(ids.extent(0)) < early_rows ? std::int64_t(ids.extent(0)) : early_rows;
  auto const v = static_cast<std::uint64_t>(m.extent(0));
  for (std::int64_t p = 0; p < t; ++p) {
    auto const r = static_cast<std::int64_t>(ids(p));
    if (static_cast<std::uint64_t>(r) >= v) continue;
    if constexpr (View::rank == 1) {
      prefetch(&m(r));
    } else {
      for (std::int64_t c = 0; c < std::int64_t(m.extent(1)); c += line_floats) prefetch(&m(r, c));
    }
  }
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
