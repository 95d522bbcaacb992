#pragma once
// The fused backward and update (Embedding::backward_step): each row the ids list is
// folded into a row of scratch memory, its gradient, and stepped at once, so the
// gradient is never written out. The bits are backward_sparse's then
// TableOptimizer::step's: the same folds (fold.hpp's sums) and the same row step
// (optim_step.hpp's step_row). It runs only where no fold can overflow, so that a
// step the unfused path would refuse (a non-finite gradient) never starts; otherwise
// the caller runs the two steps, which refuse it with nothing changed.
#include <kembed/detail/backward_sparse.hpp>
#include <kembed/detail/optim_step.hpp>

#include <cfloat>
#include <cstdint>

namespace kembed::detail {

// Whether every fold of dy's terms stays finite: every term is finite, and T terms of
// the largest magnitude stay below FLT_MAX / 4 (a rounded partial sum never exceeds
// the sum of its terms' magnitudes by more than rounding's slack; scale_grad_by_freq
// only shrinks terms). Magnitudes compare as their bits without the sign (NaN and
// +-inf above every finite float): an integer maximum vectorizes, a float one with
// NaNs does not (4x slower measured). A union reads the bits: memcpy is host-only
// on HIP.
template <class ExecutionSpace, class Dy>
bool folds_stay_finite(ExecutionSpace const& space, Dy const& dy) {
  union Bits {
    float f;
    std::uint32_t u;
  };
  std::int64_t const t = dy.extent(0), d = dy.extent(1);
  std::uint32_t most = 0;
  Kokkos::parallel_reduce(
      "kembed::backward_step::bound", Range<ExecutionSpace>(space, 0, t),
      KOKKOS_LAMBDA(std::int64_t p, std::uint32_t & m) {
        std::uint32_t row = 0;
        for (std::int64_t c = 0; c < d; ++c) {
          Bits b;
          b.f = dy(p, c);
          std::uint32_t const a = b.u & 0x7fffffffu;
          row = a > row ? a : row;
        }
        if (row > m) m = row;
      },
      Kokkos::Max<std::uint32_t>(most));
  if (most >= 0x7f800000u) return false;  // a NaN or an infinity
  Bits largest;
  largest.u = most;
  return double(largest.f) * double(t) <= double(FLT_MAX) / 4.0;
}

// Every listed row: fold its terms into scratch (by host tiles, or column by column as
// a device lane does: `columns`, which host tests use), then step table row rows(u).
template <class ExecutionSpace, class Index, class Rows, class Dy, class Weight, class State, class Sum>
void fused_rows(ExecutionSpace const& space, Index const& index, Rows const& rows, Dy const& dy,
                std::int64_t padding_idx, RowScale<typename ExecutionSpace::memory_space> const& scale, Sum const& sum,
                HostIsa isa, bool columns, StepRule const& rule, Weight const& weight, State const& first,
                State const& second, char const* label) {
  using Policy = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>, Kokkos::IndexType<std::int64_t>>;
  using Member = typename Policy::member_type;
  using Scratch = Kokkos::View<float*, typename ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  std::int64_t const o = rows.extent(0), d = weight.extent(1);
  if (o == 0) return;
  auto const offsets = index.offsets;
  auto const positions = index.positions;
  bool const scaled = scale.on() || has_term_scales(dy);
  Kokkos::parallel_for(
      label, Policy(space, o, 1).set_scratch_size(0, Kokkos::PerTeam(Scratch::shmem_size(d))),
      KOKKOS_LAMBDA(Member const& team) {
        std::int64_t const u = team.league_rank(), r = rows(u);
        Scratch g(team.team_scratch(0), d);
        std::int64_t const begin = offsets(u), end = offsets(u + 1);
        float const s = scale.on() ? scale.of(u, end - begin) : 1.0f;
        HostIsa const row_isa = isa;  // captured here: nvcc takes no first capture inside if constexpr
        if (r == padding_idx) {       // listed, with a +0.0 gradient, as backward_sparse lists it
          for (std::int64_t c = 0; c < d; ++c) g(c) = 0.0f;
        } else if (columns) {
          for (std::int64_t c = 0; c < d; ++c) g(c) = sum(positions, dy, begin, end, c, 0.0f, scaled, s);
        } else {
          if constexpr (Tiles<ExecutionSpace>::host) {
            constexpr std::int64_t tile = Sum::host_tile;
            run_for(row_isa, [&] {
              for (std::int64_t c0 = 0; c0 < d; c0 += tile)
                sum.tile(positions, dy, begin, end, c0, d - c0 < tile ? d - c0 : tile, nullptr, scaled, s, &g(c0));
            });
          }
        }
        step_row(
            rule, weight, r, [&](std::int64_t c) { return g(c); }, d, first, second);
      });
}

// backward_sparse (no carry) and a step of its gradient, fused. Returns false, having
// changed nothing, where a fold could overflow (folds_stay_finite). Throws, having
// changed nothing, on batch counts below a row's occurrences.
template <class ExecutionSpace, class IdView, class Dy, class Batch, class Weight, class State>
bool fused_step(ExecutionSpace const& space, IdView const& ids, Dy const& dy, Batch const& batch_counts, std::int64_t v,
                std::int64_t padding_idx, Mode mode, FreqScale scale_kind, HostIsa isa, bool columns,
                StepRule const& rule, Weight const& weight, State const& first, State const& second) {
  using Index = Kokkos::View<std::int64_t*, typename ExecutionSpace::memory_space>;
  if (!folds_stay_finite(space, dy)) return false;
  auto const unique = unique_rows(space, ids, v);
  std::int64_t const u = unique.rows.extent(0);
  if (scale_kind == FreqScale::batch)
    check_batch_counts(space, unique.offsets, ListedRow<Index>{unique.rows}, batch_counts, u);
  auto const scale = listed_scale(space, scale_kind, unique.rows, batch_counts);
  RowIndex<typename ExecutionSpace::memory_space> const index{unique.offsets, unique.positions};
  if (mode == Mode::deterministic)
    fused_rows(space, index, unique.rows, dy, padding_idx, scale, PairwiseSum{}, isa, columns, rule, weight, first,
               second, "kembed::backward_step_rows[deterministic]");
  else
    fused_rows(space, index, unique.rows, dy, padding_idx, scale, AscendingSum{}, isa, columns, rule, weight, first,
               second, "kembed::backward_step_rows[identical]");
  return true;
}

}  // namespace kembed::detail
