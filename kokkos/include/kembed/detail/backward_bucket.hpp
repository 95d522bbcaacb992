#pragma once
// Plan `bucket`: a cache-blocked middle way between `scan` and `sort`. Rows are cut
// into buckets of 2^k rows whose gradient slice fits in a core's cache; a stable
// counting sort on the bucket (ids read twice, histogram buckets x chunks, not
// V x chunks) lists each bucket's positions in ascending order, packed with the
// row within the bucket. Each (bucket, column tile) is then one team's: it starts
// its rows from the carry (or +0.0) in scratch memory, folds the listed positions
// in order, and writes every gradient row of the bucket exactly once. So each
// (row, column) sum is still one ascending loop, and the random gradient updates
// of `scan` stay in cache. Tiles split a hot bucket's columns over threads.
#include <kembed/detail/counting_sort.hpp>

namespace kembed::detail {

// The position sits in the low 40 bits of a packed entry, the row within its
// bucket above them; so plan `bucket` needs T < 2^40 and buckets of < 2^23 rows.
inline constexpr int bucket_position_bits = 40;
inline constexpr std::int64_t bucket_max_positions = std::int64_t{1} << bucket_position_bits;

struct BucketShape {
  int shift = 0;               // a bucket holds 2^shift rows
  std::int64_t buckets = 1;    // ceil(V / 2^shift)
  std::int64_t tile = 1;       // columns per team (a multiple of 16, or d)
  std::int64_t tiles = 1;      // ceil(d / tile)
};

// Bucket rows: the most (a power of two) whose d floats each fit in `budget` bytes.
inline BucketShape bucket_rows(std::int64_t v, std::int64_t d, std::int64_t budget) {
  BucketShape s;
  while (s.shift < 22 && (std::int64_t{2} << s.shift) * d * 4 <= budget && (std::int64_t{1} << s.shift) < v) ++s.shift;
  s.buckets = (v + (std::int64_t{1} << s.shift) - 1) >> s.shift;
  s.tile = d;
  return s;
}

// Column tiles for a hot bucket: split d (in 16-float slices, one 64-byte line)
// until the busiest bucket's share of the work is at most 1/(4 * concurrency).
inline void bucket_tiles(BucketShape& s, std::int64_t d, std::int64_t t, std::int64_t busiest,
                         std::int64_t concurrency) {
  s.tile = d;
  if (concurrency > 1 && t > 0 && d >= 32) {
    std::int64_t const want = (busiest * 4 * concurrency + t - 1) / t;
    if (want > 1) {
      std::int64_t tile = ((d + want - 1) / want + 15) / 16 * 16;
      s.tile = tile < d ? tile : d;
    }
  }
  s.tiles = (d + s.tile - 1) / s.tile;
}

template <class ExecutionSpace>
struct BucketBudget {
  // Host: a quarter of a typical L2, so the slice stays put while dy streams by.
  // Device: what a team's scratch pad holds.
  static constexpr std::int64_t bytes = Tiles<ExecutionSpace>::host ? 256 * 1024 : 32 * 1024;
};

// Returns whether any dy term was NaN or +-inf (see fold_identical).
template <class ExecutionSpace, class IdView, class Dy, class Carry, class Grad, class Counts>
bool backward_bucket(ExecutionSpace const& space, IdView const& ids, Dy const& dy, Carry const& carry, Grad const& grad,
                     Counts const& counts, std::int64_t padding_idx) {
  std::int64_t const v = grad.extent(0);
  std::int64_t const d = grad.extent(1);
  std::int64_t const t = ids.extent(0);
  std::int64_t const concurrency = space.concurrency() < 1 ? 1 : space.concurrency();
  bool const has_carry = carry.data() != nullptr;
  bool const has_counts = counts.data() != nullptr;

  BucketShape shape = bucket_rows(v, d, BucketBudget<ExecutionSpace>::bytes);
  int const shift = shape.shift;
  std::int64_t const row_mask = (std::int64_t{1} << shift) - 1;
  auto const index = counting_sort<std::int64_t>(
      space, t, shape.buckets, sort_chunks(concurrency, shape.buckets, t),
      KOKKOS_LAMBDA(std::int64_t p) { return static_cast<std::int64_t>(ids(p)) >> shift; },
      KOKKOS_LAMBDA(std::int64_t p, std::int64_t) {
        return p | ((static_cast<std::int64_t>(ids(p)) & row_mask) << bucket_position_bits);
      },
      "kembed::backward_bucket");
  auto const offsets = index.offsets;
  auto const entries = index.values;

  std::int64_t busiest = 0;
  Kokkos::parallel_reduce(
      "kembed::backward_bucket::busiest", Range<ExecutionSpace>(space, 0, shape.buckets),
      KOKKOS_LAMBDA(std::int64_t k, std::int64_t & most) {
        std::int64_t const n = offsets(k + 1) - offsets(k);
        if (n > most) most = n;
      },
      Kokkos::Max<std::int64_t>(busiest));
  bucket_tiles(shape, d, t, busiest, concurrency);

  using Policy = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>, Kokkos::IndexType<std::int64_t>>;
  using Member = typename Policy::member_type;
  using Scratch = Kokkos::View<float*, typename ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  std::int64_t const tiles = shape.tiles, tile = shape.tile, rows = std::int64_t{1} << shift;
  std::int64_t const league = shape.buckets * tiles;
  Policy policy = Tiles<ExecutionSpace>::host ? Policy(space, league, 1) : Policy(space, league, Kokkos::AUTO);
  policy.set_scratch_size(1, Kokkos::PerTeam(Scratch::shmem_size(rows * tile)));
  std::int64_t const position_mask = bucket_max_positions - 1;
  int bad = 0;
  Kokkos::parallel_reduce(
      "kembed::backward_bucket::fold", policy,
      KOKKOS_LAMBDA(Member const& team, int& saw) {
        std::int64_t const k = team.league_rank() / tiles;
        std::int64_t const c0 = (team.league_rank() % tiles) * tile;
        std::int64_t const w = d - c0 < tile ? d - c0 : tile;
        std::int64_t const r0 = k << shift;
        std::int64_t const n_rows = v - r0 < rows ? v - r0 : rows;
        bool const counter = has_counts && c0 == 0;  // one tile per bucket counts its rows
        Scratch acc(team.team_scratch(1), n_rows * w);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n_rows), [&](std::int64_t i) {
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, w), [&](std::int64_t c) {
            acc(i * w + c) = has_carry ? carry(r0 + i, c0 + c) : 0.0f;
          });
        });
        if (counter)
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n_rows), [&](std::int64_t i) { counts(r0 + i) = 0; });
        team.team_barrier();
        int flag = 0;
        std::int64_t const begin = offsets(k), end = offsets(k + 1);
        for (std::int64_t j = begin; j < end; ++j) {
          std::int64_t const e = entries(j);
          std::int64_t const p = e & position_mask, row = e >> bucket_position_bits, base = row * w;
          if (j + 8 < end) {  // the dy row 8 entries on: its reads are scattered, not streamed
            std::int64_t const ahead = entries(j + 8) & position_mask;
            for (std::int64_t c = 0; c < w; c += 16) prefetch(&dy(ahead, c0 + c));
          }
          if (counter) Kokkos::single(Kokkos::PerTeam(team), [&]() { counts(r0 + row) += 1; });
          // The same thread owns column c at every j (one range, one split), so
          // the terms of each (row, column) are added by one thread, in order.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, w), [&](std::int64_t c) {
            float const x = dy(p, c0 + c);
            flag |= non_finite(x);
            acc(base + c) = acc(base + c) + x;
          });
        }
        team.team_barrier();
        // Every gradient row of the bucket written once, by streaming stores where
        // the host has them (the padding row's terms were summed, then dropped).
        if (r0 <= padding_idx && padding_idx < r0 + n_rows)
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, w),
                               [&](std::int64_t c) { acc((padding_idx - r0) * w + c) = 0.0f; });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n_rows), [&](std::int64_t i) {
          if (Tiles<ExecutionSpace>::host)
            stream_copy(&grad(r0 + i, c0), &acc(i * w), w);
          else
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, w),
                                 [&](std::int64_t c) { grad(r0 + i, c0 + c) = acc(i * w + c); });
        });
        stream_fence();
        saw |= flag;
      },
      Kokkos::BOr<int>(bad));
  return bad != 0;
}

}  // namespace kembed::detail
