#pragma once
// A row-sparse gradient continued in place, call after call: each listed row owns a
// slot of `values` (a row -> slot map finds it), and a call folds its terms into
// the slots of the rows it references, appending slots for rows new to it. A call
// costs O(T log T + T x d) whatever the rows listed so far; merging a sparse result
// into the next call's (backward_sparse.hpp) costs O(listed rows x d) per call.
// Each slot's sum starts from +0.0 and takes its row's terms in ascending position
// order across calls, so it is bit for bit the merged sparse gradient's row.
#include <kembed/detail/backward_listed.hpp>
#include <kembed/detail/memory.hpp>

#include <type_traits>

namespace kembed::detail {

template <class MemorySpace>
struct SparseCarry {
  using Index = Kokkos::View<std::int64_t*, MemorySpace>;
  using Values = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>;
  Index slot_of;      // V entries: a row's slot, or -1 (the map; V x 8 bytes, as the job's counts)
  Index row_of_slot;  // capacity entries
  Index counts;       // per slot: the row's occurrences over every call
  Values values;      // capacity x d
  std::int64_t size = 0;
};

// Which slot listed row u folds into.
// (Scattered: the fold fetches the slot's values ahead; the map's own entry is
// fetched further ahead still, so that lookup does not wait on memory.)
template <class Index>
struct SlotOfListed {
  static constexpr bool scattered = true;
  Index slot_of, rows;
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t u) const {
    if (u + 2 * target_ahead < std::int64_t(rows.extent(0))) prefetch(&slot_of(rows(u + 2 * target_ahead)));
    return slot_of(rows(u));
  }
};

template <class ExecutionSpace>
SparseCarry<typename ExecutionSpace::memory_space> make_sparse_carry(ExecutionSpace const& space, std::int64_t v,
                                                                     std::int64_t d, std::int64_t capacity = 64) {
  using Carry = SparseCarry<typename ExecutionSpace::memory_space>;
  Carry c;
  c.slot_of = typename Carry::Index(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::sparse_carry::slot_of"), v);
  Kokkos::deep_copy(space, c.slot_of, -1);
  c.row_of_slot = typename Carry::Index(Kokkos::view_alloc(space, "kembed::sparse_carry::rows"), capacity);
  c.counts = typename Carry::Index(Kokkos::view_alloc(space, "kembed::sparse_carry::counts"), capacity);
  c.values = typename Carry::Values(Kokkos::view_alloc(space, "kembed::sparse_carry::values"), capacity, d);
  return c;
}

// Room for `need` slots: capacity doubles, so appending costs O(1) per row overall.
// New storage is made before the old is let go: a failed allocation changes nothing.
template <class ExecutionSpace, class Carry>
void reserve_slots(ExecutionSpace const& space, Carry& c, std::int64_t need) {
  std::int64_t capacity = c.values.extent(0);
  if (need <= capacity) return;
  while (capacity < need) capacity = capacity < 64 ? 64 : 2 * capacity;
  // Slots past the used ones are written when assigned; huge pages for the values,
  // which a stream of new rows fills at random (as make_matrix's buffers).
  typename Carry::Index rows(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::sparse_carry::rows"),
                             capacity);
  typename Carry::Index counts(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::sparse_carry::counts"), capacity);
  typename Carry::Values values = uninitialized_matrix(space, "kembed::sparse_carry::values", capacity,
                                                       c.values.extent(1));
  auto const used = std::make_pair(std::int64_t{0}, c.size);
  Kokkos::deep_copy(space, Kokkos::subview(rows, used), Kokkos::subview(c.row_of_slot, used));
  Kokkos::deep_copy(space, Kokkos::subview(counts, used), Kokkos::subview(c.counts, used));
  Kokkos::deep_copy(space, Kokkos::subview(values, used, Kokkos::ALL), Kokkos::subview(c.values, used, Kokkos::ALL));
  c.row_of_slot = rows, c.counts = counts, c.values = values;
}

// Gives each listed row without a slot the next free one (in ascending row order),
// its values +0.0. Returns the slot count after.
template <class ExecutionSpace, class Carry, class Rows>
std::int64_t assign_slots(ExecutionSpace const& space, Carry& c, Rows const& rows, bool on_caller) {
  std::int64_t const u = rows.extent(0), d = c.values.extent(1);
  std::int64_t fresh = 0;
  if constexpr (std::is_same_v<typename ExecutionSpace::memory_space, Kokkos::HostSpace>) {
    if (on_caller) {
      auto const& slot_of = c.slot_of;
      for (std::int64_t i = 0; i < u; ++i) fresh += slot_of(rows(i)) < 0 ? 1 : 0;
      reserve_slots(space, c, c.size + fresh);
      for (std::int64_t i = 0, next = c.size; i < u; ++i) {
        std::int64_t const r = rows(i);
        if (slot_of(r) >= 0) continue;
        slot_of(r) = next, c.row_of_slot(next) = r, c.counts(next) = 0;
        for (std::int64_t k = 0; k < d; ++k) c.values(next, k) = 0.0f;
        ++next;
      }
      return c.size + fresh;
    }
  }
  auto const slot_of = c.slot_of;
  Kokkos::parallel_reduce(
      "kembed::sparse_carry::count_new", Range<ExecutionSpace>(space, 0, u),
      KOKKOS_LAMBDA(std::int64_t i, std::int64_t & n) { n += slot_of(rows(i)) < 0 ? 1 : 0; }, fresh);
  reserve_slots(space, c, c.size + fresh);
  auto const row_of_slot = c.row_of_slot, counts = c.counts;
  auto const values = c.values;
  std::int64_t const first = c.size;
  Kokkos::parallel_scan(
      "kembed::sparse_carry::assign", Range<ExecutionSpace>(space, 0, u),
      KOKKOS_LAMBDA(std::int64_t i, std::int64_t & n, bool final) {
        std::int64_t const r = rows(i);
        if (slot_of(r) >= 0) return;
        if (final) {
          std::int64_t const s = first + n;
          slot_of(r) = s, row_of_slot(s) = r, counts(s) = 0;
          for (std::int64_t k = 0; k < d; ++k) values(s, k) = 0.0f;
        }
        ++n;
      });
  return first + fresh;
}

// The call's terms folded into the slots (in place: each slot is its own carry).
template <class ExecutionSpace, class Unique, class Dy, class Values, class Slot, class Scale>
void fold_slots(ExecutionSpace const& space, Unique const& unique, Dy const& dy, Values const& values, Slot const& slot,
                std::int64_t pad, Mode mode, Scale const& scale, HostIsa isa, bool on_caller) {
  Kokkos::View<float const**, Kokkos::LayoutRight, typename Values::memory_space, typename Values::memory_traits> const
      carry = values;
  if (mode == Mode::deterministic)
    fold_pairwise(space, unique, dy, carry, values, pad, isa, scale, slot, on_caller);
  else
    fold_identical(space, unique, dy, carry, values, pad, isa, scale, slot, on_caller);
}

// Continues `c` with one call's terms (ids checked, dy checked by the caller).
template <class ExecutionSpace, class IdView, class Dy, class Carry, class Batch>
void backward_sparse_carry(ExecutionSpace const& space, IdView const& ids, Dy const& dy, Carry& c,
                           Batch const& batch_counts, std::int64_t v, std::int64_t padding_idx, Mode mode,
                           FreqScale scale_kind, HostIsa isa, bool on_caller) {
  constexpr bool host_memory = std::is_same_v<typename ExecutionSpace::memory_space, Kokkos::HostSpace>;
  on_caller = on_caller && host_memory;
  auto const unique = listed_rows(space, ids, v, on_caller);
  RowScale<typename ExecutionSpace::memory_space> scale;
  scale.kind = scale_kind;
  if (scale_kind == FreqScale::batch) scale.batch = listed_batch_counts(space, unique, batch_counts, on_caller);
  c.size = assign_slots(space, c, unique.rows, on_caller);  // nothing is refused past this point
  std::int64_t pad = -1;  // the padding row's slot, if listed (+0.0, as the merged form lists it)
  if (padding_idx >= 0) {
    if constexpr (host_memory) {
      space.fence();
      pad = c.slot_of(padding_idx);
    } else {
      Kokkos::deep_copy(space, pad, Kokkos::subview(c.slot_of, padding_idx));
      space.fence();
    }
  }
  auto const rows = unique.rows, offsets = unique.offsets;
  if constexpr (host_memory)
    if (on_caller) {  // within this call: views without reference counts
      auto const slot_of = unmanaged(c.slot_of), counts = unmanaged(c.counts);
      auto const values = unmanaged(c.values);
      fold_slots(space, unique, dy, values, SlotOfListed<decltype(slot_of)>{slot_of, rows}, pad, mode, scale, isa, true);
      for (std::int64_t i = 0; i < std::int64_t(rows.extent(0)); ++i)
        counts(slot_of(rows(i))) += offsets(i + 1) - offsets(i);
      return;
    }
  fold_slots(space, unique, dy, c.values, SlotOfListed<typename Carry::Index>{c.slot_of, rows}, pad, mode, scale, isa, false);
  auto const counts = c.counts, slot_of = c.slot_of;
  std::int64_t const u = rows.extent(0);
  Kokkos::parallel_for(
      "kembed::sparse_carry::counts", Range<ExecutionSpace>(space, 0, u),
      KOKKOS_LAMBDA(std::int64_t i) { counts(slot_of(rows(i))) += offsets(i + 1) - offsets(i); });
}

// The carry as a sparse gradient (rows ascending; counts over every call): the
// slots sorted by row, by a scan over the map (O(V), once, not per call).
template <class ExecutionSpace, class Carry>
SparseRows<typename ExecutionSpace::memory_space> listed_of(ExecutionSpace const& space, Carry const& c) {
  using memory_space = typename ExecutionSpace::memory_space;
  using Index = Kokkos::View<std::int64_t*, memory_space>;
  std::int64_t const v = c.slot_of.extent(0), d = c.values.extent(1), n = c.size;
  SparseRows<memory_space> out{
      Index(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::sparse_gradient::rows"), n),
      Kokkos::View<float**, Kokkos::LayoutRight, memory_space>(
          Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::sparse_gradient::values"), n, d),
      Index(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::sparse_gradient::counts"), n)};
  auto const slot_of = c.slot_of, counts = c.counts;
  auto const values = c.values;
  auto const rows = out.rows, out_counts = out.counts;
  auto const out_values = out.values;
  Kokkos::parallel_scan(
      "kembed::sparse_carry::listed", Range<ExecutionSpace>(space, 0, v),
      KOKKOS_LAMBDA(std::int64_t r, std::int64_t & at, bool final) {
        std::int64_t const s = slot_of(r);
        if (s < 0) return;
        if (final) {
          rows(at) = r, out_counts(at) = counts(s);
          for (std::int64_t k = 0; k < d; ++k) out_values(at, k) = values(s, k);
        }
        ++at;
      });
  space.fence();
  return out;
}

// A carry holding a sparse gradient's rows (ascending, unique, checked), its
// counts if it has them.
template <class ExecutionSpace>
SparseCarry<typename ExecutionSpace::memory_space> sparse_carry_of(
    ExecutionSpace const& space, SparseRows<typename ExecutionSpace::memory_space> const& g, std::int64_t v) {
  std::int64_t const n = g.rows.extent(0), d = g.values.extent(1);
  auto c = make_sparse_carry(space, v, d, n > 64 ? n : 64);
  auto const rows = g.rows, counts = g.counts;
  auto const values = g.values;
  bool const has_counts = counts.data() != nullptr;
  auto const slot_of = c.slot_of, row_of_slot = c.row_of_slot, slot_counts = c.counts;
  auto const slot_values = c.values;
  Kokkos::parallel_for(
      "kembed::sparse_carry::from", Range<ExecutionSpace>(space, 0, n), KOKKOS_LAMBDA(std::int64_t i) {
        slot_of(rows(i)) = i, row_of_slot(i) = rows(i), slot_counts(i) = has_counts ? counts(i) : 0;
        for (std::int64_t k = 0; k < d; ++k) slot_values(i, k) = values(i, k);
      });
  space.fence();
  c.size = n;
  return c;
}

}  // namespace kembed::detail
