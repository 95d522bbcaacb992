#pragma once
// Plan `bucket`: a cache-blocked middle way between `scan` and `sort`. Rows are cut
// into buckets of 2^k rows whose gradient slice fits in a core's cache; a stable
// counting sort on the bucket (ids read twice, histogram buckets x chunks, not
// V x chunks) lists each bucket's positions in ascending order, packed with the
// row within the bucket. Each bucket is then one team's: it starts its rows from
// the carry (or +0.0, or on the host their first term) in scratch memory, folds
// the listed positions in order, and writes every gradient row of the bucket
// exactly once. So each (row, column) sum
// is still one ascending loop, and the random gradient updates of `scan` stay in
// cache. A hot bucket's rows are dealt to several teams, as the scan deals rows.
#include <kembed/detail/counting_sort.hpp>

namespace kembed::detail {

// The position sits in the low 40 bits of a packed entry, the row within its
// bucket above them; so plan `bucket` needs T < 2^40 and buckets of < 2^23 rows.
inline constexpr int bucket_position_bits = 40;
inline constexpr std::int64_t bucket_max_positions = std::int64_t{1} << bucket_position_bits;

struct BucketShape {
  int shift = 0;             // a bucket holds 2^shift rows
  std::int64_t buckets = 1;  // ceil(V / 2^shift)
  std::int64_t parts = 1;    // a hot bucket's rows are dealt round-robin to this many teams
  std::int64_t hot = 0;      // a bucket with more positions than this is hot
};

// Bucket rows: the most (a power of two) whose d floats each fit in `budget` bytes.
inline BucketShape bucket_rows(std::int64_t v, std::int64_t d, std::int64_t budget) {
  BucketShape s;
  while (s.shift < 22 && (std::int64_t{2} << s.shift) * d * 4 <= budget && (std::int64_t{1} << s.shift) < v) ++s.shift;
  s.buckets = (v + (std::int64_t{1} << s.shift) - 1) >> s.shift;
  return s;
}

// Parts for hot buckets, those with more than 1/concurrency of the positions
// (Zipf's first bucket holds three quarters of them at V = 1e5): enough parts (a
// power of two) that each is within that share. Each part walks all the bucket's
// entries. On a device, where d splits into whole cache lines per part (and the
// bucket is dense), each part folds its own columns of every row: balanced whatever
// the ids, and no branch per entry. Otherwise, and always on the host, it folds its
// own rows (row i to part i mod parts), whole rows, which Zipf's hottest row
// unbalances; the other threads take the remaining buckets meanwhile. Either way
// dy is read once: on 2 cores the share 1/concurrency beat 1/(2 * concurrency) and
// 1/(4 * concurrency) by 10-35% (more parts balance better and read more). Other
// buckets stay whole.
inline void bucket_parts(BucketShape& s, std::int64_t t, std::int64_t busiest, std::int64_t concurrency) {
  s.parts = 1;
  s.hot = t / concurrency;
  if (concurrency > 1 && t > 0) {
    std::int64_t const want = (busiest * concurrency + t - 1) / t;
    std::int64_t const rows = std::int64_t{1} << s.shift;
    while (s.parts < want && s.parts < rows) s.parts *= 2;  // a power of two: ownership is a mask
  }
}

// A bucket whose entries hit fewer than 1/sparse_hits of its rows skips the scratch
// pad (hits are counted where there are under 1/sparse_entries entries per row).
// Measured on 2 cores against the scratch path: 0.5-0.7x the time where 1% of the
// rows are hit, 0.7-0.9x at 2.4% (Zipf ids, 0.1 entries per row), but 1.3x at 9.5%
// (uniform ids, 0.1 entries per row): hence counting the hits. On the host only a
// call with a carry takes this path; without one, rows start lazily (below).
inline constexpr std::int64_t sparse_entries = 8;
inline constexpr std::int64_t sparse_hits = 16;

// A bucket's bitmap of rows: whether `row` is marked, and marking it (returning
// whether it was new).
template <class Bits>
KOKKOS_INLINE_FUNCTION bool row_marked(Bits const& bits, std::int64_t row) {
  return ((bits(row >> 5) >> (row & 31)) & 1) != 0;
}
template <class Bits>
KOKKOS_INLINE_FUNCTION bool mark_row(Bits const& bits, std::int64_t row) {
  std::uint32_t const bit = std::uint32_t{1} << (row & 31);
  bool const fresh = (bits(row >> 5) & bit) == 0;
  bits(row >> 5) |= bit;
  return fresh;
}

// On the host a gradient is written with ordinary stores (left in the cache, as
// torch's memset leaves it) while it is at most 64 MiB and the call hits few of its
// rows (T <= V / 64), else with streaming stores. Measured on 2 cores against
// streaming, same sitting (docs/PERFORMANCE.md, "Stores and prefetches"): 0.90-0.96x
// the time at T = 1e3, V = 1e5, d = 64 and 128; but 1.1-1.3x slower at V = 1e5, d = 64,
// T = 1e5 and V = 1e6, d = 16, T = 1e5, where dy's rows push the gradient out anyway.
inline constexpr std::int64_t grad_stream_bytes = std::int64_t{64} << 20;
inline constexpr std::int64_t grad_cached_rows_per_position = 64;

template <class ExecutionSpace>
struct BucketBudget {
  // Host: a quarter of a typical L2, so the slice stays put while dy streams by.
  // Device: what a team's scratch pad holds.
  static constexpr std::int64_t bytes = Tiles<ExecutionSpace>::host ? 256 * 1024 : 32 * 1024;
};

// Returns whether any dy term was NaN or +-inf (see fold_identical). Gradients over
// `stream_bytes`, or hit by more than V / 64 positions, are streamed on the host.
template <class ExecutionSpace, class IdView, class Dy, class Carry, class Grad, class Counts>
bool backward_bucket(ExecutionSpace const& space, IdView const& ids, Dy const& dy, Carry const& carry, Grad const& grad,
                     Counts const& counts, std::int64_t padding_idx, HostIsa isa,
                     std::int64_t stream_bytes = grad_stream_bytes) {
  std::int64_t const v = grad.extent(0);
  std::int64_t const d = grad.extent(1);
  std::int64_t const t = ids.extent(0);
  std::int64_t const concurrency = space.concurrency() < 1 ? 1 : space.concurrency();
  bool const has_carry = carry.data() != nullptr;
  bool const has_counts = counts.data() != nullptr;
  bool const in_place = has_carry && carry.data() == grad.data();
  bool const stream =
      v * d * std::int64_t(sizeof(float)) > stream_bytes || t > v / grad_cached_rows_per_position;

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
  bucket_parts(shape, t, busiest, concurrency);

  using Policy = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>, Kokkos::IndexType<std::int64_t>>;
  using Member = typename Policy::member_type;
  using Scratch = Kokkos::View<float*, typename ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  using Bits = Kokkos::View<std::uint32_t*, typename ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  std::int64_t const parts = shape.parts, hot = shape.hot, rows = std::int64_t{1} << shift, buckets = shape.buckets;
  std::int64_t const league = buckets * parts;
  Policy policy = Tiles<ExecutionSpace>::host ? Policy(space, league, 1) : Policy(space, league, Kokkos::AUTO);
  policy.set_scratch_size(1, Kokkos::PerTeam(Scratch::shmem_size(rows * d) + Bits::shmem_size((rows + 31) / 32)));
  // One bucket (part) per grab: Kokkos' automatic chunk (16 items at 2 threads and a
  // thousand items) handed a hot bucket's parts and their neighbours to one thread.
  // The league is part-major (item = part * buckets + bucket): a host backend starts
  // each thread on its own contiguous share of the league before any stealing, so
  // bucket-major order gave thread 0 every part of bucket 0, Zipf's hot one, to fold
  // one after the other (V = T = 1e6, d = 128: 2 threads no faster than 1).
  policy.set_chunk_size(1);
  std::int64_t const position_mask = bucket_max_positions - 1;
  int bad = 0;
  Kokkos::parallel_reduce(
      "kembed::backward_bucket::fold", policy,
      KOKKOS_LAMBDA(Member const& team, int& saw) { run_for(isa, [&] {
        std::int64_t const k = team.league_rank() % buckets, part = team.league_rank() / buckets;
        std::int64_t const begin = offsets(k), end = offsets(k + 1);
        bool const split = parts > 1 && end - begin > hot;
        if (!split && part != 0) return;  // a whole bucket is its first item's
        std::int64_t const r0 = k << shift;
        std::int64_t const n_rows = v - r0 < rows ? v - r0 : rows;
        // A split bucket's part owns columns [c0, c0 + dc) of every row (whole lines,
        // dense buckets only), else rows first, first + step, ... of all columns.
        // On the host always by rows: split by columns, the two halves of a row were
        // folded at 1.6-2x different speeds by the same code (V = T = 1e6, d = 128,
        // Zipf; docs/PERFORMANCE.md), and by rows 2 threads took 0.58x the time of 1
        // there, by columns 0.88x (d = 64: 0.65x and 0.95x).
        bool const by_cols = !Tiles<ExecutionSpace>::host && split && d % (line_floats * parts) == 0 &&
                             (end - begin) * sparse_entries >= n_rows;
        bool const by_rows = split && !by_cols;
        std::int64_t const first = by_rows ? part : 0, step = by_rows ? parts : 1;
        std::int64_t const dc = by_cols ? d / parts : d, c0 = by_cols ? part * dc : 0;
        bool const counter = has_counts && (!by_cols || part == 0);  // one part counts each row
        std::int64_t const mine = n_rows > first ? (n_rows - first + step - 1) / step : 0;
        // On the host without a carry, a row starts at its first term (+0.0 + x, the
        // same bits as adding x to +0.0) and rows without terms are streamed zeros:
        // nothing zeroes the pad, a row's first term is a store, not a load and add,
        // and no bucket needs the sparse path. (A device team shares a row's
        // columns, so there every row starts from +0.0 or the carry.)
        bool const lazy = Tiles<ExecutionSpace>::host && !has_carry;
        // A bitmap: the rows seen so far where lazy, else the rows the entries hit
        // where there are few enough entries for the bucket to be sparse.
        Bits hit(team.team_scratch(1), (n_rows + 31) / 32);
        // This team's entries in position order: each is counted, and add(row, c,
        // x, s) gets its terms, or set(row, c, x, s) a row's first where `track`
        // marks the rows seen so far in `hit` (s: the term's factor, or NoFactor).
        // The same thread owns column c at every entry (one range, one split), so
        // each (row, column) sum is one thread's ascending loop.
        int flag = 0;
        auto const walk = [&](auto no_factor, bool check_terms, bool track, auto const& add, auto const& set) {
          for (std::int64_t j = begin; j < end; ++j) {
            if (j + prefetch_rows < end) {  // dy reads are scattered, not streamed: fetch ahead
              std::int64_t const next = entries(j + prefetch_rows);
              if (!by_rows || ((next >> bucket_position_bits) & (step - 1)) == first)  // only what it folds
                for (std::int64_t c = c0; c < c0 + dc; c += line_floats)
                  prefetch(term_address(dy, next & position_mask, c));
            }
            std::int64_t const e = entries(j);
            std::int64_t const row = e >> bucket_position_bits;
            if (by_rows && (row & (step - 1)) != first) continue;
            std::int64_t const p = e & position_mask;
            auto const s = factor_of(dy, p, no_factor);
            if (counter) Kokkos::single(Kokkos::PerTeam(team), [&]() { counts(r0 + row) += 1; });
            bool const first_term = track && mark_row(hit, row);
            if (check_terms)
              Kokkos::parallel_for(Kokkos::TeamThreadRange(team, c0, c0 + dc), [&](std::int64_t c) {
                float const x = dy(p, c);
                flag |= non_finite(x);
                add(row, c, x, s);
              });
            else if (first_term)
              Kokkos::parallel_for(Kokkos::TeamThreadRange(team, c0, c0 + dc),
                                   [&](std::int64_t c) { set(row, c, dy(p, c), s); });
            else
              Kokkos::parallel_for(Kokkos::TeamThreadRange(team, c0, c0 + dc),
                                   [&](std::int64_t c) { add(row, c, dy(p, c), s); });
          }
        };
        // Terms with their own factors (a mean or weighted bag's) get a copy of
        // their own: the plain sum's loop stays an add.
        auto const fold_entries = [&](bool check_terms, bool track, auto const& add, auto const& set) {
          if constexpr (TermsCarryFactors<Dy>::value)
            if (has_term_scales(dy)) return walk(1.0f, check_terms, track, add, set);
          walk(NoFactor{}, check_terms, track, add, set);
        };
        std::int64_t hits = n_rows;
        if (!lazy && (end - begin) * sparse_entries < n_rows) {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, (n_rows + 31) / 32), [&](std::int64_t w) { hit(w) = 0; });
          team.team_barrier();
          Kokkos::single(
              Kokkos::PerTeam(team),
              [&](std::int64_t& h) {
                h = 0;
                for (std::int64_t j = begin; j < end; ++j)
                  if (mark_row(hit, entries(j) >> bucket_position_bits)) ++h;
              },
              hits);
          team.team_barrier();
        }
        if (hits * sparse_hits < n_rows) {
          // Sparse: rows no entry hits are written once (as below); the hit rows are
          // started in the gradient itself and the entries added there, in the same
          // order as in scratch. The scratch pass would cost more than the fold.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, mine), [&](std::int64_t i) {
            std::int64_t const row = first + i * step, r = r0 + row;
            if (has_counts) counts(r) = 0;
            bool const keep = has_carry && r != padding_idx;
            if (keep && in_place) return;  // already holds its carry
            if (Tiles<ExecutionSpace>::host && !row_marked(hit, row)) {
              if (keep)
                stream ? stream_copy(&grad(r, 0), &carry(r, 0), d) : cached_copy(&grad(r, 0), &carry(r, 0), d);
              else
                stream ? stream_zero(&grad(r, 0), d) : cached_zero(&grad(r, 0), d);
            } else {
              Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, d),
                                   [&](std::int64_t c) { grad(r, c) = keep ? carry(r, c) : 0.0f; });
            }
          });
          stream_fence();
          team.team_barrier();
          // Few entries: each term tested (their sums stay in the gradient, unread).
          auto const add = [&](std::int64_t row, std::int64_t c, float x, auto s) {
            if (r0 + row != padding_idx) grad(r0 + row, c) = add_term(grad(r0 + row, c), x, s);  // padding: dropped
          };
          fold_entries(!in_place, false, add, add);
          saw |= flag;
          return;
        }
        // Row i's columns [c0, c0 + dc) at acc(i * dc).
        Scratch acc(team.team_scratch(1), n_rows * dc);
        if (lazy) {
          for (std::int64_t w = 0; w < (n_rows + 31) / 32; ++w) hit(w) = 0;
          if (counter)
            for (std::int64_t i = 0; i < mine; ++i) counts(r0 + first + i * step) = 0;
        } else {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, mine), [&](std::int64_t i) {
            std::int64_t const row = first + i * step;
            if (counter) counts(r0 + row) = 0;
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, dc), [&](std::int64_t c) {
              acc(row * dc + c) = has_carry ? carry(r0 + row, c0 + c) : 0.0f;
            });
          });
        }
        team.team_barrier();
        fold_entries(
            false, lazy,
            [&](std::int64_t row, std::int64_t c, float x, auto s) {
              acc(row * dc + c - c0) = add_term(acc(row * dc + c - c0), x, s);
            },
            [&](std::int64_t row, std::int64_t c, float x, auto s) { acc(row * dc + c - c0) = add_term(0.0f, x, s); });
        team.team_barrier();
        // Every gradient row written once (streamed where the host can and the
        // gradient would not stay in cache), its sums tested on the way (the
        // padding row's terms were summed and tested, then dropped).
        bool const check = !in_place;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, mine), [&](std::int64_t i) {
          std::int64_t const row = first + i * step;
          bool const untouched = lazy && !row_marked(hit, row);
          if (r0 + row == padding_idx) {
            for (std::int64_t c = 0; c < dc; ++c) {
              if (check && !untouched) flag |= non_finite(acc(row * dc + c));
              grad(r0 + row, c0 + c) = 0.0f;
            }
          } else if (untouched) {
            stream ? stream_zero(&grad(r0 + row, c0), dc) : cached_zero(&grad(r0 + row, c0), dc);
          } else if (Tiles<ExecutionSpace>::host) {
            int const bad_row = stream ? stream_copy(&grad(r0 + row, c0), &acc(row * dc), dc)
                                       : cached_copy(&grad(r0 + row, c0), &acc(row * dc), dc);
            if (check) flag |= bad_row;
          } else {
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, dc), [&](std::int64_t c) {
              float const sum = acc(row * dc + c);
              if (check) flag |= non_finite(sum);
              grad(r0 + row, c0 + c) = sum;
            });
          }
        });
        stream_fence();
        saw |= flag;
      }); },
      Kokkos::BOr<int>(bad));
  return bad != 0;
}

}  // namespace kembed::detail
