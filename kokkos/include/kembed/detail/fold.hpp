#pragma once
// Plan `sort`'s second half: fold each row's positions in the order the row index
// gives. Work is split over (row, column tile), so one hot row still spreads over
// its column tiles; each (row, column) sum stays one thread's loop.
#include <kembed/core/options.hpp>
#include <kembed/detail/kernel_common.hpp>

#include <cmath>
#include <string>
#include <type_traits>

namespace kembed::detail {

// Which gradient row entry u of an index folds into: the row itself (an index over
// all V rows), or the u-th listed row (an index over the rows a call references).
// `scattered`: consecutive entries land on scattered rows, which the fold fetches
// ahead itself (no hardware prefetcher predicts them).
struct IdentityRow {
  static constexpr bool scattered = false;
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t r) const { return r; }
};
template <class Rows>
struct ListedRow {
  static constexpr bool scattered = true;
  Rows rows;
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t u) const { return rows(u); }
};

// Gradient rows a fold over listed rows reads and writes are as scattered as the
// dy rows it reads: fetch the row of the entry target_ahead items on (1 thread,
// V = 1e6, d = 16, calls of 97: docs/PERFORMANCE.md, "Small calls").
inline constexpr std::int64_t target_ahead = 8;
template <class RowOf, class Grad>
KOKKOS_INLINE_FUNCTION void prefetch_target(RowOf const& row_of, Grad const& grad, std::int64_t u, std::int64_t items,
                                            std::int64_t c0, std::int64_t n) {
  if constexpr (RowOf::scattered) {
    if (u + target_ahead >= items) return;
    float const* next = &grad(row_of(u + target_ahead), c0);
    for (std::int64_t k = 0; k < n; k += line_floats) prefetch(next + k);
  } else {
    (void)row_of, (void)grad, (void)u, (void)items, (void)c0, (void)n;
  }
}

// A host fold's items, OR-ing what each saw: on the space, or (`on_caller`, small
// calls) as one loop on the calling thread, where a parallel launch would cost more
// than the work (docs/DESIGN.md, "Small calls"). Same body, same bits.
template <class ExecutionSpace, class Body>
int reduce_items(ExecutionSpace const& space, char const* label, std::int64_t items, std::int64_t grab,
                 bool on_caller, Body const& body) {
  int bad = 0;
  if (on_caller) {
    for (std::int64_t i = 0; i < items; ++i) body(i, bad);
    return bad;
  }
  Kokkos::parallel_reduce(label, DynamicRange<ExecutionSpace>(space, 0, items, grab), body, Kokkos::BOr<int>(bad));
  return bad;
}

// scale_grad_by_freq in the folds: none, or s = float(1.0 / n) per row for its count
// n, the row's positions in this call (`call`: its segment of the index) or the
// whole batch's count (`batch`: given per row of the index). Identical mode folds
// each term as one fused multiply-add, acc = fma(dy, s, acc) (torch's CPU backward,
// measured); deterministic mode's terms are dy * s, each rounded.
template <class MemorySpace>
struct RowScale {
  FreqScale kind = FreqScale::none;
  Kokkos::View<std::int64_t const*, MemorySpace> batch;  // per row of the index, for `batch`
  KOKKOS_INLINE_FUNCTION bool on() const { return kind != FreqScale::none; }
  KOKKOS_INLINE_FUNCTION float of(std::int64_t r, std::int64_t segment) const {
    double const n = kind == FreqScale::batch ? static_cast<double>(batch(r)) : static_cast<double>(segment);
    return static_cast<float>(1.0 / n);
  }
};

// The dy rows a fold reads are scattered (each row's positions, row after row), so
// no hardware prefetcher predicts them: fetch the tile of the entry prefetch_rows
// ahead in the index, past the end of this row's segment too (the next items are
// the next rows). Without it the sort plan ran 1.4-2.3x slower at T = 1e6
// (docs/PERFORMANCE.md).
template <class Positions, class Dy>
KOKKOS_INLINE_FUNCTION void prefetch_entry(Positions const& positions, Dy const& dy, std::int64_t j, std::int64_t c0,
                                           std::int64_t n) {
  if (j + prefetch_rows >= static_cast<std::int64_t>(positions.extent(0))) return;
  auto const* next = static_cast<float const*>(term_address(dy, positions(j + prefetch_rows), c0));
  for (std::int64_t k = 0; k < n; k += line_floats) prefetch(next + k);
}

// ---- the sums: what a mode adds, in which order ----
//
// Each mode's sum comes in two forms over the same terms in the same order: one
// column (`operator()`, a device lane's) and a tile of `host_tile` columns in one
// host thread's hands (`tile`: terms [begin, end), at least one, into out[0, n)).
// `base`: the carry's columns c0.., or null for +0.0. `scaled`: each term is
// multiplied by s (see RowScale).

// Mode `identical`: acc = base, then acc = acc + dy[p] for p ascending (each term
// fused as fma(dy, s, acc) when scaled).
struct AscendingSum {
  // A whole row (up to 256 columns) at once: each dy row is read in one piece and
  // each gradient row written once.
  static constexpr std::int64_t host_tile = 256;

  template <class Positions, class Dy>
  KOKKOS_INLINE_FUNCTION float operator()(Positions const& positions, Dy const& dy, std::int64_t begin,
                                          std::int64_t end, std::int64_t c, float base, bool scaled,
                                          float s) const {
    float acc = base;
    if (scaled)
      for (std::int64_t j = begin; j < end; ++j)
        acc = fma_rn(dy(positions(j), c), term_scale(dy, positions(j), s), acc);
    else
      for (std::int64_t j = begin; j < end; ++j) acc = acc + dy(positions(j), c);
    return acc;
  }

  template <class Positions, class Dy>
  KOKKOS_INLINE_FUNCTION void tile(Positions const& positions, Dy const& dy, std::int64_t begin, std::int64_t end,
                                   std::int64_t c0, std::int64_t n, float const* base, bool scaled, float s,
                                   float* out) const {
    copy_short(out, base, n);
    if (scaled) {  // two loops: the test stays out of the inner one
      for (std::int64_t j = begin; j < end; ++j) {
        std::int64_t const p = positions(j);
        prefetch_entry(positions, dy, j, c0, n);
        float const sp = term_scale(dy, p, s);
        for (std::int64_t k = 0; k < n; ++k) out[k] = fma_rn(dy(p, c0 + k), sp, out[k]);
      }
    } else {
      for (std::int64_t j = begin; j < end; ++j) {
        std::int64_t const p = positions(j);
        prefetch_entry(positions, dy, j, c0, n);
        for (std::int64_t k = 0; k < n; ++k) out[k] = out[k] + dy(p, c0 + k);
      }
    }
  }
};

// Mode `deterministic`: base + the pairwise tree of reference::pairwise_sum, built
// by a binary counter: after the k-th term, merge the top two partial sums as many
// times as k has trailing zero bits (older + newer); at the end fold the stack from
// the newest down (older + rest). Both give the same tree, term for term; 64 levels
// hold any segment.
struct PairwiseSum {
  static constexpr std::int64_t host_tile = 32;  // 64 stack levels of 32 columns: 8 KiB

  template <class Positions, class Dy>
  KOKKOS_INLINE_FUNCTION float operator()(Positions const& positions, Dy const& dy, std::int64_t begin,
                                          std::int64_t end, std::int64_t c, float base, bool scaled,
                                          float s) const {
    if (begin == end) return base;
    float stack[64];
    int top = -1;
    for (std::int64_t j = begin; j < end; ++j) {
      float const term = dy(positions(j), c);
      stack[++top] = scaled ? mul_rn(term, term_scale(dy, positions(j), s)) : term;
      for (std::int64_t count = j - begin + 1; (count & 1) == 0; count >>= 1) {
        stack[top - 1] = stack[top - 1] + stack[top];
        --top;
      }
    }
    float sum = stack[top];
    for (int level = top - 1; level >= 0; --level) sum = stack[level] + sum;
    return base + sum;
  }

  template <class Positions, class Dy>
  KOKKOS_INLINE_FUNCTION void tile(Positions const& positions, Dy const& dy, std::int64_t begin, std::int64_t end,
                                   std::int64_t c0, std::int64_t n, float const* base, bool scaled, float s,
                                   float* out) const {
    float stack[64][host_tile];
    int top = -1;
    for (std::int64_t j = begin; j < end; ++j) {
      std::int64_t const p = positions(j);
      prefetch_entry(positions, dy, j, c0, n);
      ++top;
      if (scaled)
        for (std::int64_t k = 0; k < n; ++k) stack[top][k] = mul_rn(dy(p, c0 + k), term_scale(dy, p, s));
      else
        for (std::int64_t k = 0; k < n; ++k) stack[top][k] = dy(p, c0 + k);
      for (std::int64_t count = j - begin + 1; (count & 1) == 0; count >>= 1) {
        for (std::int64_t k = 0; k < n; ++k) stack[top - 1][k] = stack[top - 1][k] + stack[top][k];
        --top;
      }
    }
    for (std::int64_t k = 0; k < n; ++k) {
      float sum = stack[top][k];
      for (int level = top - 1; level >= 0; --level) sum = stack[level][k] + sum;
      out[k] = (base ? base[k] : 0.0f) + sum;
    }
  }
};

// The host shape: one item per (row, column tile), the tile's columns in one
// thread's registers, folded by `sum.tile` (AscendingSum, PairwiseSum). Returns
// whether dy may hold NaN or +-inf: true where any term it read was, and where a
// sum overflowed (see non_finite's note). The caller then finds and reports the
// first, if any; the padding row's terms are read for this alone. In place, dy was
// checked before the call and nothing is tested.
template <class ExecutionSpace, class Index, class Dy, class Carry, class Grad, class Sum, class RowOf>
bool fold_host(ExecutionSpace const& space, Index const& index, Dy const& dy, Carry const& carry, Grad const& grad,
               std::int64_t padding_idx, HostIsa isa, Sum const& sum, char const* label,
               RowScale<typename ExecutionSpace::memory_space> const& scale, RowOf const& row_of, bool on_caller) {
  static_assert(std::is_same_v<typename Carry::array_layout, Kokkos::LayoutRight> &&
                    std::is_same_v<typename Grad::array_layout, Kokkos::LayoutRight>,
                "a tile's columns are contiguous");
  constexpr std::int64_t tile = Sum::host_tile;
  std::int64_t const v = index.offsets.extent(0) - 1;  // index entries: rows, or listed rows
  std::int64_t const d = grad.extent(1);
  std::int64_t const tiles = (d + tile - 1) / tile;
  bool const has_carry = carry.data() != nullptr;
  bool const in_place = has_carry && carry.data() == grad.data();
  auto const offsets = index.offsets;
  auto const positions = index.positions;
  std::int64_t const t = positions.extent(0);
  bool const scaled = scale.on() || has_term_scales(dy);
  int const bad = reduce_items(
      space, label, v * tiles, fold_grab(v, tiles, t), on_caller, KOKKOS_LAMBDA(std::int64_t i, int& saw) {
        run_for(isa, [&] {
          std::int64_t const u = i / tiles, r = row_of(u);
          std::int64_t const c0 = (i % tiles) * tile;
          std::int64_t const n = d - c0 < tile ? d - c0 : tile;
          std::int64_t const begin = offsets(u), end = offsets(u + 1);
          prefetch_target(row_of, grad, u, v, c0, n);
          int flag = 0;
          if (r == padding_idx) {  // no sum keeps these terms: test each
            for (std::int64_t j = begin; j < end; ++j)
              for (std::int64_t k = 0; k < n; ++k) flag |= non_finite(dy(positions(j), c0 + k));
            for (std::int64_t k = 0; k < n; ++k) grad(r, c0 + k) = 0.0f;
            saw |= flag;
            return;
          }
          float const* const base = has_carry ? &carry(r, c0) : nullptr;
          if (begin == end) {  // no terms: the row holds its (checked) carry, or +0.0
            if (!in_place) copy_short(&grad(r, c0), base, n);
            return;
          }
          float const s = scale.on() ? scale.of(u, end - begin) : 1.0f;
          float total[tile];
          sum.tile(positions, dy, begin, end, c0, n, base, scaled, s, total);
          copy_short(&grad(r, c0), total, n);
          if (!in_place)
            for (std::int64_t k = 0; k < n; ++k) flag |= non_finite(total[k]);
          saw |= flag;
        });
      });
  return bad != 0;
}

// ---- the device shape: one team thread per (row, tile), columns on vector lanes ----
//
// A GPU reads a dy row coalesced when consecutive lanes read consecutive columns,
// so there a tile is a warp's width of columns, one column per lane; each lane
// folds its column over the row's whole segment in ascending position order. A hot
// row is split across its tiles (columns), never across positions. Nothing here
// depends on how many lanes or team threads there are: on host backends the same
// kernel runs with one of each, which is how the tests check it without a GPU.

// Team threads and vector lanes of the device fold; `tile` columns per item.
struct TeamFoldShape {
  std::int64_t tile = 32;  // columns per (row, tile) item: one per lane on a GPU
  int threads = 4;         // items per team
  int lanes = 32;          // vector length
};

template <class ExecutionSpace>
TeamFoldShape team_fold_shape() {
  if (Tiles<ExecutionSpace>::host) return {32, 1, 1};
  return {};
}

// Folds every (row, column) with `sum`; returns as fold_host does.
template <class ExecutionSpace, class Index, class Dy, class Carry, class Grad, class Sum, class RowOf = IdentityRow>
bool fold_teams(ExecutionSpace const& space, Index const& index, Dy const& dy, Carry const& carry, Grad const& grad,
                std::int64_t padding_idx, TeamFoldShape const& shape, Sum const& sum, std::string const& label,
                RowScale<typename ExecutionSpace::memory_space> const& scale = {}, RowOf const& row_of = {}) {
  using memory_space = typename ExecutionSpace::memory_space;
  using Policy = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
  using Member = typename Policy::member_type;
  std::int64_t const v = index.offsets.extent(0) - 1;
  std::int64_t const d = grad.extent(1);
  std::int64_t const tile = shape.tile;
  std::int64_t const tiles = (d + tile - 1) / tile;
  std::int64_t const items = v * tiles;
  int const threads = shape.threads;
  bool const has_carry = carry.data() != nullptr;
  bool const in_place = has_carry && carry.data() == grad.data();
  auto const offsets = index.offsets;
  auto const positions = index.positions;
  // Raised (atomically: it is rare) where a term or a finished sum is not finite.
  Kokkos::View<int, memory_space> bad(Kokkos::view_alloc(space, label + "::non_finite"));
  Kokkos::parallel_for(
      label, Policy(space, (items + threads - 1) / threads, threads, shape.lanes),
      KOKKOS_LAMBDA(Member const& team) {
        std::int64_t const first = std::int64_t(team.league_rank()) * threads;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, threads), [&](int k) {
          std::int64_t const i = first + k;
          if (i >= items) return;
          std::int64_t const u = i / tiles, r = row_of(u);
          std::int64_t const c0 = (i % tiles) * tile;
          std::int64_t const n = d - c0 < tile ? d - c0 : tile;
          std::int64_t const begin = offsets(u), end = offsets(u + 1);
          if (in_place && begin == end && r != padding_idx) return;  // already holds its carry
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, n), [&](std::int64_t lane) {
            std::int64_t const c = c0 + lane;
            if (r == padding_idx) {  // no sum keeps these terms: test each
              int flag = 0;
              for (std::int64_t j = begin; j < end; ++j) flag |= non_finite(dy(positions(j), c));
              grad(r, c) = 0.0f;
              if (flag) Kokkos::atomic_fetch_or(&bad(), 1);
              return;
            }
            bool const scaled = (scale.on() || has_term_scales(dy)) && end > begin;
            float const total = sum(positions, dy, begin, end, c, has_carry ? carry(r, c) : 0.0f, scaled,
                                    scale.on() ? scale.of(u, end - begin) : 1.0f);
            grad(r, c) = total;
            if (!in_place && end > begin && non_finite(total)) Kokkos::atomic_fetch_or(&bad(), 1);
          });
        });
      });
  int raised = 0;
  Kokkos::deep_copy(space, raised, bad);
  space.fence();
  return raised != 0;
}

// The folds plan `sort` and mode `deterministic` run: the host shape on host
// backends, the team shape on devices.
// `row_of` maps index entries to gradient rows (an index over listed rows);
// `on_caller` runs a host fold on the calling thread (devices ignore it).
template <class ExecutionSpace, class Index, class Dy, class Carry, class Grad, class RowOf = IdentityRow>
bool fold_identical(ExecutionSpace const& space, Index const& index, Dy const& dy, Carry const& carry, Grad const& grad,
                    std::int64_t padding_idx, HostIsa isa,
                    RowScale<typename ExecutionSpace::memory_space> const& scale = {}, RowOf const& row_of = {},
                    bool on_caller = false) {
  if constexpr (Tiles<ExecutionSpace>::host) {
    return fold_host(space, index, dy, carry, grad, padding_idx, isa, AscendingSum{}, "kembed::backward_fold", scale,
                     row_of, on_caller);
  } else {
    (void)isa, (void)on_caller;
    return fold_teams(space, index, dy, carry, grad, padding_idx, team_fold_shape<ExecutionSpace>(), AscendingSum{},
                      "kembed::backward_fold_teams", scale, row_of);
  }
}

template <class ExecutionSpace, class Index, class Dy, class Carry, class Grad, class RowOf = IdentityRow>
bool fold_pairwise(ExecutionSpace const& space, Index const& index, Dy const& dy, Carry const& carry, Grad const& grad,
                   std::int64_t padding_idx, HostIsa isa,
                   RowScale<typename ExecutionSpace::memory_space> const& scale = {}, RowOf const& row_of = {},
                   bool on_caller = false) {
  if constexpr (Tiles<ExecutionSpace>::host) {
    return fold_host(space, index, dy, carry, grad, padding_idx, isa, PairwiseSum{}, "kembed::backward_fold_pairwise",
                     scale, row_of, on_caller);
  } else {
    (void)isa, (void)on_caller;
    return fold_teams(space, index, dy, carry, grad, padding_idx, team_fold_shape<ExecutionSpace>(), PairwiseSum{},
                      "kembed::backward_fold_pairwise_teams", scale, row_of);
  }
}

}  // namespace kembed::detail
