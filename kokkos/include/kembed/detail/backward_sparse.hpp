#pragma once
// The row-sparse backward: the distinct rows of the ids (unique_rows.hpp) merged
// with a sparse carry's rows, then each listed row folded by the dense folds of
// fold.hpp over (listed row, position) segments, so each row's bits are the dense
// gradient's. Memory and time O(T + listed rows x d), never O(V x d).
#include <kembed/detail/checks.hpp>
#include <kembed/detail/fold.hpp>
#include <kembed/detail/unique_rows.hpp>

namespace kembed::detail {

// A row-sparse gradient in a space's memory (kembed::SparseGradient on the host).
template <class MemorySpace>
struct SparseRows {
  Kokkos::View<std::int64_t*, MemorySpace> rows;                      // ascending, unique
  Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace> values;     // rows x d
  Kokkos::View<std::int64_t*, MemorySpace> counts;                    // this call's occurrences
};

// Throws InvalidArgument naming `argument` unless rows are ascending, unique and in
// [0, v), values are (rows, d) and finite, and counts (if any) one per row.
template <class ExecutionSpace, class MemorySpace>
void check_sparse_rows(ExecutionSpace const& space, SparseRows<MemorySpace> const& g, std::int64_t v,
                       std::int64_t d, char const* argument) {
  std::int64_t const n = g.rows.extent(0);
  std::string const name = argument;
  if (std::int64_t(g.values.extent(0)) != n || std::int64_t(g.values.extent(1)) != d)
    throw InvalidArgument(argument, name + ".values has shape (" + std::to_string(g.values.extent(0)) + ", " +
                                        std::to_string(g.values.extent(1)) + "), want (" + std::to_string(n) +
                                        ", " + std::to_string(d) + ") (its rows, embedding_dim)");
  auto const rows = g.rows;
  std::int64_t first = n;
  Kokkos::parallel_reduce(
      "kembed::check_sparse_rows", Range<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t i, std::int64_t & m) {
        bool const bad = rows(i) < 0 || rows(i) >= v || (i > 0 && rows(i) <= rows(i - 1));
        if (bad && i < m) m = i;
      },
      Kokkos::Min<std::int64_t>(first));
  if (first < n) {
    std::int64_t here = 0, before = -1;
    Kokkos::deep_copy(here, Kokkos::subview(rows, first));
    if (first > 0) Kokkos::deep_copy(before, Kokkos::subview(rows, first - 1));
    throw InvalidArgument(argument, name + ".rows[" + std::to_string(first) + "] = " + std::to_string(here) +
                                        (here < 0 || here >= v
                                             ? " is outside [0, " + std::to_string(v) + ")"
                                             : " follows " + std::to_string(before) +
                                                   ": rows must be ascending and unique"));
  }
  check_finite(space, Kokkos::View<float const**, Kokkos::LayoutRight, MemorySpace>(g.values), argument,
               "listed row");
}

// Throws unless every row's batch count covers its occurrences in this call
// (`rows(u)` owns [offsets(u), offsets(u + 1)); rows may be the identity).
template <class ExecutionSpace, class Offsets, class RowOf, class Batch>
void check_batch_counts(ExecutionSpace const& space, Offsets const& offsets, RowOf const& row_of, Batch const& batch,
                        std::int64_t n) {
  std::int64_t first = n;
  Kokkos::parallel_reduce(
      "kembed::check_batch_counts", Range<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t u, std::int64_t & m) {
        if (offsets(u + 1) - offsets(u) > batch(row_of(u)) && u < m) m = u;
      },
      Kokkos::Min<std::int64_t>(first));
  if (first >= n) return;  // Min's identity is the largest int64, not n
  std::int64_t begin = 0, end = 0, row = 0, count = 0;
  Kokkos::deep_copy(begin, Kokkos::subview(offsets, first));
  Kokkos::deep_copy(end, Kokkos::subview(offsets, first + 1));
  auto const rows = row_of;
  Kokkos::View<std::int64_t, typename Offsets::memory_space> probe("kembed::check_batch_counts::row");
  Kokkos::parallel_for(
      "kembed::check_batch_counts::row", Range<ExecutionSpace>(space, 0, 1),
      KOKKOS_LAMBDA(std::int64_t) { probe() = rows(first); });
  Kokkos::deep_copy(row, probe);
  Kokkos::deep_copy(count, Kokkos::subview(batch, row));
  throw InvalidArgument("batch_counts", "batch_counts[" + std::to_string(row) + "] = " + std::to_string(count) +
                                            " but this call's ids hold row " + std::to_string(row) + " " +
                                            std::to_string(end - begin) +
                                            " times; batch counts are each row's occurrences in the whole batch");
}

// scale_grad_by_freq over listed rows: for `batch`, each listed row's batch count.
template <class ExecutionSpace, class Rows, class Batch>
RowScale<typename ExecutionSpace::memory_space> listed_scale(ExecutionSpace const& space, FreqScale kind,
                                                             Rows const& rows, Batch const& batch_counts) {
  RowScale<typename ExecutionSpace::memory_space> scale;
  scale.kind = kind;
  if (kind != FreqScale::batch) return scale;
  Kokkos::View<std::int64_t*, typename ExecutionSpace::memory_space> listed(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::backward_sparse::batch_counts"), rows.extent(0));
  Kokkos::parallel_for(
      "kembed::backward_sparse::gather_batch_counts", Range<ExecutionSpace>(space, 0, rows.extent(0)),
      KOKKOS_LAMBDA(std::int64_t i) { listed(i) = batch_counts(rows(i)); });
  scale.batch = listed;
  return scale;
}

// The listed rows' gradient; `carry` with no rows means none. Mode fast folds as
// identical (there is no faster path worth its loss of bits here). Returns the
// result and whether dy may hold a non-finite term (as fold_identical).
template <class ExecutionSpace, class IdView, class Dy, class Batch>
std::pair<SparseRows<typename ExecutionSpace::memory_space>, bool> backward_sparse(
    ExecutionSpace const& space, IdView const& ids, Dy const& dy,
    SparseRows<typename ExecutionSpace::memory_space> const& carry, Batch const& batch_counts, std::int64_t v,
    std::int64_t padding_idx, Mode mode, FreqScale scale_kind, HostIsa isa) {
  using memory_space = typename ExecutionSpace::memory_space;
  using Index = Kokkos::View<std::int64_t*, memory_space>;
  std::int64_t const d = dy.extent(1), t = ids.extent(0);
  auto const unique = unique_rows(space, ids, v);
  std::int64_t const u = unique.rows.extent(0);
  if (scale_kind == FreqScale::batch)
    check_batch_counts(space, unique.offsets, ListedRow<Index>{unique.rows}, batch_counts, u);

  // Merge: a new row lands after the carry-only rows below it, a carry-only row
  // after the new rows below it; both lists are ascending, so is the merge.
  // shared(i): how many of the carry's first i rows the ids hold too.
  auto const new_rows = unique.rows, seg = unique.offsets;
  auto const carry_rows = carry.rows;
  std::int64_t const c = carry_rows.extent(0);
  Index shared(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::backward_sparse::shared"), c + 1);
  std::int64_t common = 0;
  Kokkos::parallel_scan(
      "kembed::backward_sparse::merge_shared", Range<ExecutionSpace>(space, 0, c + 1),
      KOKKOS_LAMBDA(std::int64_t i, std::int64_t & n, bool final) {
        if (final) shared(i) = n;
        if (i == c) return;
        std::int64_t const k = lower_bound(new_rows, carry_rows(i));
        n += (k < u && new_rows(k) == carry_rows(i)) ? 1 : 0;
      },
      common);
  std::int64_t const o = u + c - common;
  SparseRows<memory_space> out{
      Index(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::sparse_gradient::rows"), o),
      Kokkos::View<float**, Kokkos::LayoutRight, memory_space>(
          Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::sparse_gradient::values"), o, d),
      Index(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::sparse_gradient::counts"), o)};
  Index offsets(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::backward_sparse::offsets"), o + 1);
  Index source(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::backward_sparse::carry_row"), o);
  auto const out_rows = out.rows;
  Kokkos::parallel_for(
      "kembed::backward_sparse::merge_new", Range<ExecutionSpace>(space, 0, u), KOKKOS_LAMBDA(std::int64_t i) {
        std::int64_t const k = lower_bound(carry_rows, new_rows(i));  // carry rows below
        std::int64_t const at = i + k - shared(k);
        out_rows(at) = new_rows(i);
        offsets(at) = seg(i);
        source(at) = (k < c && carry_rows(k) == new_rows(i)) ? k : -1;
      });
  Kokkos::parallel_for(
      "kembed::backward_sparse::merge_carry", Range<ExecutionSpace>(space, 0, c), KOKKOS_LAMBDA(std::int64_t i) {
        std::int64_t const k = lower_bound(new_rows, carry_rows(i));  // new rows below
        if (k < u && new_rows(k) == carry_rows(i)) return;
        std::int64_t const at = i - shared(i) + k;
        out_rows(at) = carry_rows(i);
        offsets(at) = seg(k);  // an empty segment: it starts where the next new row does
        source(at) = i;
      });
  Kokkos::parallel_for(
      "kembed::backward_sparse::end", Range<ExecutionSpace>(space, 0, 1), KOKKOS_LAMBDA(std::int64_t) { offsets(o) = t; });

  // The carry's rows in the merged order (+0.0 where the carry has none).
  Kokkos::View<float**, Kokkos::LayoutRight, memory_space> base;
  if (c > 0) {
    base = Kokkos::View<float**, Kokkos::LayoutRight, memory_space>(
        Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::backward_sparse::carry"), o, d);
    auto const carry_values = carry.values;
    Kokkos::parallel_for(
        "kembed::backward_sparse::gather_carry", Range<ExecutionSpace>(space, 0, o), KOKKOS_LAMBDA(std::int64_t i) {
          std::int64_t const from = source(i);
          for (std::int64_t k = 0; k < d; ++k) base(i, k) = from >= 0 ? carry_values(from, k) : 0.0f;
        });
  }
  auto const scale = listed_scale(space, scale_kind, out_rows, batch_counts);
  // The padding row's place among the listed rows, if it is listed.
  std::int64_t pad = o;
  if (padding_idx >= 0)
    Kokkos::parallel_reduce(
        "kembed::backward_sparse::padding", Range<ExecutionSpace>(space, 0, o),
        KOKKOS_LAMBDA(std::int64_t i, std::int64_t & m) {
          if (out_rows(i) == padding_idx && i < m) m = i;
        },
        Kokkos::Min<std::int64_t>(pad));
  std::int64_t const listed_padding = pad < o ? pad : -1;

  RowIndex<memory_space> const index{offsets, unique.positions};
  Kokkos::View<float const**, Kokkos::LayoutRight, memory_space> const base_c = base;
  bool const saw = mode == Mode::deterministic
                       ? fold_pairwise(space, index, dy, base_c, out.values, listed_padding, isa, scale)
                       : fold_identical(space, index, dy, base_c, out.values, listed_padding, isa, scale);
  counts_from_offsets(space, offsets, out.counts);
  return {out, saw};
}

}  // namespace kembed::detail
