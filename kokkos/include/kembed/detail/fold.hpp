#pragma once
// Plan `sort`'s second half: fold each row's positions in the order the row index
// gives. Work is split over (row, column tile), so one hot row still spreads over
// its column tiles; each (row, column) sum stays one thread's loop.
#include <kembed/detail/kernel_common.hpp>

namespace kembed::detail {

// The dy rows a fold reads are scattered (each row's positions, row after row), so
// no hardware prefetcher predicts them: fetch the tile of the entry prefetch_rows
// ahead in the index, past the end of this row's segment too (the next items are
// the next rows). Without it the sort plan ran 1.4-2.3x slower at T = 1e6
// (docs/PERFORMANCE.md).
template <class Positions, class Dy>
KOKKOS_INLINE_FUNCTION void prefetch_entry(Positions const& positions, Dy const& dy, std::int64_t j, std::int64_t c0,
                                           std::int64_t n) {
  if (j + prefetch_rows >= static_cast<std::int64_t>(positions.extent(0))) return;
  float const* next = &dy(positions(j + prefetch_rows), c0);
  for (std::int64_t k = 0; k < n; k += line_floats) prefetch(next + k);
}

// Mode `identical`: acc = carry (or +0.0), then acc = acc + dy[p] for p ascending.
// Returns whether dy may hold NaN or +-inf: true where any term it read was, and
// where a sum overflowed (see non_finite's note). The caller then finds and reports
// the first, if any; the padding row's terms are read for this alone. In place, dy
// was checked before the call and nothing is tested.
template <class ExecutionSpace, class Index, class Dy, class Carry, class Grad>
bool fold_identical(ExecutionSpace const& space, Index const& index, Dy const& dy, Carry const& carry, Grad const& grad,
                    std::int64_t padding_idx, HostIsa isa) {
  constexpr std::int64_t tile = Tiles<ExecutionSpace>::fold;
  std::int64_t const v = grad.extent(0);
  std::int64_t const d = grad.extent(1);
  std::int64_t const tiles = (d + tile - 1) / tile;
  bool const has_carry = carry.data() != nullptr;
  bool const in_place = has_carry && carry.data() == grad.data();
  auto const offsets = index.offsets;
  auto const positions = index.positions;
  std::int64_t const t = positions.extent(0);
  int bad = 0;
  Kokkos::parallel_reduce(
      "kembed::backward_fold", DynamicRange<ExecutionSpace>(space, 0, v * tiles, fold_grab(v, tiles, t)),
      KOKKOS_LAMBDA(std::int64_t i, int& saw) { run_for(isa, [&] {
        std::int64_t const r = i / tiles;
        std::int64_t const c0 = (i % tiles) * tile;
        std::int64_t const n = d - c0 < tile ? d - c0 : tile;
        std::int64_t const begin = offsets(r), end = offsets(r + 1);
        int flag = 0;
        if (r == padding_idx) {
          for (std::int64_t j = begin; j < end; ++j)
            for (std::int64_t k = 0; k < n; ++k) flag |= non_finite(dy(positions(j), c0 + k));
          for (std::int64_t k = 0; k < n; ++k) grad(r, c0 + k) = 0.0f;
          saw |= flag;
          return;
        }
        if (in_place && begin == end) return;  // already holds its carry
        float acc[tile];
        for (std::int64_t k = 0; k < n; ++k) acc[k] = has_carry ? carry(r, c0 + k) : 0.0f;
        for (std::int64_t j = begin; j < end; ++j) {
          std::int64_t const p = positions(j);
          prefetch_entry(positions, dy, j, c0, n);
          for (std::int64_t k = 0; k < n; ++k) acc[k] = acc[k] + dy(p, c0 + k);
        }
        for (std::int64_t k = 0; k < n; ++k) grad(r, c0 + k) = acc[k];
        if (!in_place && end > begin)  // a row without terms holds its (checked) carry
          for (std::int64_t k = 0; k < n; ++k) flag |= non_finite(acc[k]);
        saw |= flag;
      }); },
      Kokkos::BOr<int>(bad));
  return bad != 0;
}

// Mode `deterministic`: base + the pairwise tree of reference::pairwise_sum, built
// by a binary counter: after the k-th term, merge the top two partial sums as many
// times as k has trailing zero bits (older + newer); at the end fold the stack from
// the newest down (older + rest). Both give the same tree, term for term. Returns
// as fold_identical does.
template <class ExecutionSpace, class Index, class Dy, class Carry, class Grad>
bool fold_pairwise(ExecutionSpace const& space, Index const& index, Dy const& dy, Carry const& carry, Grad const& grad,
                   std::int64_t padding_idx, HostIsa isa) {
  constexpr std::int64_t pairwise_tile = Tiles<ExecutionSpace>::pairwise;
  std::int64_t const v = grad.extent(0);
  std::int64_t const d = grad.extent(1);
  std::int64_t const tiles = (d + pairwise_tile - 1) / pairwise_tile;
  bool const has_carry = carry.data() != nullptr;
  bool const in_place = has_carry && carry.data() == grad.data();
  auto const offsets = index.offsets;
  auto const positions = index.positions;
  std::int64_t const t = positions.extent(0);
  int bad = 0;
  Kokkos::parallel_reduce(
      "kembed::backward_fold_pairwise", DynamicRange<ExecutionSpace>(space, 0, v * tiles, fold_grab(v, tiles, t)),
      KOKKOS_LAMBDA(std::int64_t i, int& saw) { run_for(isa, [&] {
        std::int64_t const r = i / tiles;
        std::int64_t const c0 = (i % tiles) * pairwise_tile;
        std::int64_t const n = d - c0 < pairwise_tile ? d - c0 : pairwise_tile;
        std::int64_t const begin = offsets(r), end = offsets(r + 1);
        int flag = 0;
        if (r == padding_idx) {
          for (std::int64_t j = begin; j < end; ++j)
            for (std::int64_t k = 0; k < n; ++k) flag |= non_finite(dy(positions(j), c0 + k));
          for (std::int64_t k = 0; k < n; ++k) grad(r, c0 + k) = 0.0f;
          saw |= flag;
          return;
        }
        if (in_place && begin == end) return;  // already holds its carry
        float stack[64][pairwise_tile];
        int top = -1;
        for (std::int64_t j = begin; j < end; ++j) {
          std::int64_t const p = positions(j);
          prefetch_entry(positions, dy, j, c0, n);
          ++top;
          for (std::int64_t k = 0; k < n; ++k) stack[top][k] = dy(p, c0 + k);
          for (std::int64_t count = j - begin + 1; (count & 1) == 0; count >>= 1) {
            for (std::int64_t k = 0; k < n; ++k) stack[top - 1][k] = stack[top - 1][k] + stack[top][k];
            --top;
          }
        }
        for (std::int64_t k = 0; k < n; ++k) {
          float const base = has_carry ? carry(r, c0 + k) : 0.0f;
          if (top < 0) {
            grad(r, c0 + k) = base;
            continue;
          }
          float sum = stack[top][k];
          for (int level = top - 1; level >= 0; --level) sum = stack[level][k] + sum;
          float const total = base + sum;
          grad(r, c0 + k) = total;
          if (!in_place) flag |= non_finite(total);
        }
        saw |= flag;
      }); },
      Kokkos::BOr<int>(bad));
  return bad != 0;
}

}  // namespace kembed::detail
