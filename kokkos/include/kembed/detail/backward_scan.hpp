#pragma once
// Plan `scan`: each block owns a set of (row, column) sums outright and walks every
// position in ascending order, folding the terms it owns; so each sum is one
// thread's ascending loop, whatever the blocks. Blocks split the columns when the
// rows are wide (each thread then streams its own slice of dy, and no dy byte is
// read twice), and deal the rows round-robin otherwise (row r to row block
// r mod R, so that the hot low ids of Zipf-shaped data spread over the threads).
// With more than one block, each block folds into its own scratch copy of its sums
// where that fits (see scan_private_bytes), and writes them to the gradient once;
// where it does not, the blocks own whole rows in runs (see scan_run_bytes).
#include <kembed/detail/kernel_common.hpp>

#include <algorithm>
#include <cstring>

namespace kembed::detail {

// How many column slices `blocks` threads cut a row of d floats into: slices of 16
// to 128 floats (at least a 64-byte line, so no two threads write one line; wider
// slices of one dy row measured slower on 2 cores, d = 512: the hardware prefetcher
// pulls in the neighbour's half).
inline std::int64_t scan_column_blocks(std::int64_t blocks, std::int64_t d) {
  for (std::int64_t c = blocks; c > 1; --c)
    if (blocks % c == 0 && d >= 16 * c && d <= 128 * c) return c;
  return 1;
}

// The most bytes of sums a block keeps in its own scratch copy. Folding straight
// into a gradient that other threads write (neighbouring lines of one row, or of
// neighbouring rows) ran 2.1-2.4x slower on 2 threads than on one at V = 1e3,
// d = 64, T = 1e5: the hardware prefetchers pull the other thread's lines, which
// then bounce between cores. A private copy in the core's L2 has no neighbour.
inline constexpr std::int64_t scan_private_bytes = 1 << 20;

// Where blocks fold straight into the gradient, past scan_runs_gradient bytes, or
// from scan_run_gradient with at least one position per row, each owns whole rows
// in runs of scan_run_bytes. Two threads splitting every row's columns there ran up
// to 2x slower than one thread (V = 1e5, d = 64, 16,384 bags of 128: 47-59 ms
// against 30), each core's writes pulling the other's lines of the same rows; runs
// of 1 MiB took 24 ms (of 2 KiB: 32, of 64 KiB: 26). Within the 32 MiB L3 and under
// one position per row the halves were faster (V = 1e5, d = 64, 2,048 bags of 32:
// 1.03 ms against 1.22), and under 8 MiB at any count (V = 2e4, d = 64, 16,384 x 32:
// 4.6 against 5.2).
inline constexpr std::int64_t scan_run_gradient = std::int64_t{8} << 20;
inline constexpr std::int64_t scan_runs_gradient = std::int64_t{32} << 20;
inline constexpr std::int64_t scan_run_bytes = std::int64_t{1} << 20;

// How the blocks share a (V, d) gradient: column slices, and row blocks that own
// rows in runs of 2^run_shift (row r is row block ((r >> run_shift) mod
// row_blocks)'s); run_shift 0 deals single rows round-robin, so that Zipf's hot
// low ids spread over the threads.
struct ScanSplit {
  std::int64_t row_blocks = 1, col_blocks = 1;
  int run_shift = 0;
  bool runs = false;  // folding into the gradient itself, in runs of rows
  std::int64_t width(std::int64_t d) const { return d / col_blocks / 16 * 16; }  // slices start on 16 floats
  std::int64_t widest(std::int64_t d) const { return d - width(d) * (col_blocks - 1); }
  std::int64_t most_rows(std::int64_t v) const {  // the most rows one row block owns
    std::int64_t const run = std::int64_t{1} << run_shift, count = (v + run - 1) / run;
    return (count + row_blocks - 1) / row_blocks * run;
  }
  // Whether each block folds into its own scratch copy of its sums.
  bool in_scratch(std::int64_t v, std::int64_t d) const {  // without a product that could overflow
    return row_blocks * col_blocks > 1 && (d == 0 || most_rows(v) <= scan_private_bytes / 4 / widest(d));
  }
};

// Columns, then rows; where each block's sums do not fit its scratch copy, past
// scan_runs_gradient or from scan_run_gradient with t >= v positions, whole rows in
// runs of scan_run_bytes.
inline ScanSplit scan_split(std::int64_t blocks, std::int64_t v, std::int64_t d, std::int64_t t) {
  ScanSplit s;
  s.col_blocks = scan_column_blocks(blocks, d);
  s.row_blocks = std::min(blocks / s.col_blocks, v);
  if (d == 0 || s.row_blocks * s.col_blocks == 1 || s.in_scratch(v, d)) return s;
  std::int64_t const row_bytes = d * std::int64_t(sizeof(float));
  bool const past_cache = v > scan_runs_gradient / row_bytes;
  if (!past_cache && (t < v || v < scan_run_gradient / row_bytes)) return s;
  while ((row_bytes << (s.run_shift + 1)) <= scan_run_bytes) ++s.run_shift;
  s.col_blocks = 1;
  s.row_blocks = std::min(blocks, ((v - 1) >> s.run_shift) + 1);
  s.runs = true;
  return s;
}

// From how many positions per row a block that folds into the gradient itself
// tests its finished sums in a pass after the fold, not each term as it folds.
inline constexpr std::int64_t scan_sums_positions_per_row = 8;

// One block's walk over every position in order: block b = (rb, cb) owns the runs
// of rows rb, rb + R, ... (local row q: its rank among them) and columns [c0, c1);
// at(r, q, c) is where the sum of (r, c) lives while the block folds, count(r, q)
// where row r is counted.
// A struct, not a lambda, so that both kernels below share it on every backend.
template <class IdView, class Dy>
struct ScanWalk {
  IdView ids;
  Dy dy;
  std::int64_t v, t, d, rows_b, cols_b, width, padding_idx;
  int shift;  // rows_b = 2^shift, where it is a power of two
  int run_shift;  // rows are owned in runs of 2^run_shift
  bool pow2;
  bool scaled;  // the terms carry their own factors (has_term_scales)
  bool fetch_sums;  // the sums live in the gradient, not in the block's scratch copy

  KOKKOS_INLINE_FUNCTION std::int64_t c0(std::int64_t b) const { return width * (b % cols_b); }
  KOKKOS_INLINE_FUNCTION std::int64_t c1(std::int64_t b) const {
    return b % cols_b == cols_b - 1 ? d : width * (b % cols_b + 1);  // the last slice takes the rest
  }
  // Returns whether any term of the block's columns was NaN or +-inf: all of them
  // with check_terms, else only the padding row's, whose terms no sum keeps (the
  // caller then tests the finished sums).
  template <class At, class Count>
  KOKKOS_INLINE_FUNCTION int fold(std::int64_t b, At const& at, bool counter, Count const& count,
                                  bool check_terms) const {
    std::int64_t const rb = b / cols_b, lo = c0(b), hi = c1(b);
    int flag = 0;
    if constexpr (WalksBags<Dy>::value) {
      // Bags hold ascending, disjoint position ranges: walking them visits the
      // positions in the same order, each bag's dy row held, no bag number read
      // (T int64 less to write and read). Max's terms keep the position walk.
      if (dy.won.data() == nullptr) {
        std::int64_t const bags = dy.dy.extent(0);
        std::int64_t begin = bags > 0 ? dy.bounds(0) : 0;
        for (std::int64_t g = 0; g < bags; ++g) {
          float const* const row = &dy.dy(g, 0);
          std::int64_t const end = dy.bounds(g + 1);
          for (std::int64_t p = begin; p < end; ++p) {
            std::int64_t r, q;
            fetch_sums_ahead(p, rb, lo, hi, at);
            if (!owns(p, rb, r, q)) continue;
            flag |= add_terms(
                p, r, q, lo, hi, [&](std::int64_t c) { return row[c]; }, at, counter, count, check_terms);
          }
          begin = end;
        }
        return flag;
      }
    }
    for (std::int64_t p = 0; p < t; ++p) {
      std::int64_t r, q;
      fetch_sums_ahead(p, rb, lo, hi, at);
      if (!owns(p, rb, r, q)) continue;
      // dy is read in order, but one core's hardware prefetcher keeps too few lines
      // in flight (1 thread, V = 1e3, T = 1e6, d = 128: 52 -> 43 ms). Where blocks
      // split the rows, the next position may be another block's: no fetch there.
      if (rows_b == 1 && p + prefetch_rows < t)
        for (std::int64_t c = lo; c < hi; c += line_floats) prefetch(term_address(dy, p + prefetch_rows, c));
      flag |= add_terms(
          p, r, q, lo, hi, [&](std::int64_t c) { return dy(p, c); }, at, counter, count, check_terms);
    }
    return flag;
  }

  // Fetches the sums that position p + prefetch_rows will add to, if this block owns
  // its row. Each term's update reads its row's sums first; in the gradient those
  // are random lines, which the core otherwise waits for one term after another
  // (1 thread, V = 1e5, 16,384 bags of 128: d = 64 34 -> 22 ms, d = 128 76 -> 40).
  template <class At>
  KOKKOS_INLINE_FUNCTION void fetch_sums_ahead(std::int64_t p, std::int64_t rb, std::int64_t lo, std::int64_t hi,
                                               At const& at) const {
    std::int64_t r, q;
    if (!fetch_sums || p + prefetch_rows >= t || !owns(p + prefetch_rows, rb, r, q)) return;
    for (std::int64_t c = lo; c < hi; c += line_floats) prefetch_kept(&at(r, q, c));
  }

  // Whether position p's row r is one of row block rb's, and its local row q.
  KOKKOS_INLINE_FUNCTION bool owns(std::int64_t p, std::int64_t rb, std::int64_t& r, std::int64_t& q) const {
    r = static_cast<std::int64_t>(ids(p));
    std::int64_t const run = r >> run_shift;
    // A shift where it can be: a division costs more than the fold.
    std::int64_t const k = pow2 ? run >> shift : run / rows_b;
    q = (k << run_shift) | (r & ((std::int64_t{1} << run_shift) - 1));
    return run - k * rows_b == rb;
  }

  // Calls f(r, q) for each row r of row block rb, ascending, with its local row q.
  template <class F>
  KOKKOS_INLINE_FUNCTION void for_rows(std::int64_t rb, F const& f) const {
    std::int64_t const run = std::int64_t{1} << run_shift;
    for (std::int64_t start = rb * run, q = 0; start < v; start += rows_b * run)
      for (std::int64_t r = start; r < start + run && r < v; ++r) f(r, q++);
  }
  KOKKOS_INLINE_FUNCTION bool owns_row(std::int64_t r, std::int64_t rb) const {
    return r >= 0 && (r >> run_shift) % rows_b == rb;
  }

  // Position p's terms term(c), c in [lo, hi), added to row r's sums (local row q).
  template <class Term, class At, class Count>
  KOKKOS_INLINE_FUNCTION int add_terms(std::int64_t p, std::int64_t r, std::int64_t q, std::int64_t lo, std::int64_t hi,
                                       Term const& term, At const& at, bool counter, Count const& count,
                                       bool check_terms) const {
    if (counter) count(r, q) += 1;
    int flag = 0;
    if (r == padding_idx) {
      for (std::int64_t c = lo; c < hi; ++c) flag |= non_finite(term(c));
      return flag;
    }
    if (scaled) {  // a term with its own factor (a mean or weighted bag's): fma(dy, s_p, sum)
      float const sp = term_scale(dy, p, 1.0f);
      if (check_terms)  // two loops: the test stays out of the inner one
        for (std::int64_t c = lo; c < hi; ++c) {
          float const x = term(c);
          flag |= non_finite(x);
          at(r, q, c) = fma_rn(x, sp, at(r, q, c));
        }
      else
        for (std::int64_t c = lo; c < hi; ++c) at(r, q, c) = fma_rn(term(c), sp, at(r, q, c));
    } else if (check_terms) {
      for (std::int64_t c = lo; c < hi; ++c) {
        float const x = term(c);
        flag |= non_finite(x);
        at(r, q, c) = at(r, q, c) + x;
      }
    } else {
      for (std::int64_t c = lo; c < hi; ++c) at(r, q, c) = at(r, q, c) + term(c);
    }
    return flag;
  }
};

// Returns whether any dy term was NaN or +-inf (see fold_identical).
template <class ExecutionSpace, class IdView, class Dy, class Carry, class Grad, class Counts>
bool backward_scan(ExecutionSpace const& space, IdView const& ids, Dy const& dy, Carry const& carry, Grad const& grad,
                   Counts const& counts, std::int64_t padding_idx, ScanSplit split, HostIsa isa) {
  std::int64_t const v = grad.extent(0);
  std::int64_t const d = grad.extent(1);
  std::int64_t const t = ids.extent(0);
  bool const has_carry = carry.data() != nullptr;
  bool const has_counts = counts.data() != nullptr;
  bool const in_place = has_carry && carry.data() == grad.data();
  std::int64_t const rows_b = split.row_blocks, cols_b = split.col_blocks;
  int shift = 0;
  while ((std::int64_t{1} << shift) < rows_b) ++shift;
  bool const pow2 = (rows_b & (rows_b - 1)) == 0;
  std::int64_t const widest = split.widest(d), most_rows = split.most_rows(v);
  bool const in_scratch = split.in_scratch(v, d);
  std::int64_t const width = split.width(d);
  bool const scaled = has_term_scales(dy);
  ScanWalk<IdView, Dy> const walk{
      ids, dy, v, t, d, rows_b, cols_b, width, padding_idx, shift, split.run_shift, pow2, scaled, !in_scratch};

  // In place, dy was checked before the call, and the carry may hold sums that
  // overflowed: nothing to test. Where the block folds into the gradient itself,
  // testing its sums takes a pass over them, which cost ~5x a term's test (1 thread:
  // V = 1e5, d = 64, T = 1e5 3.4 -> 4.9 ms; V = 1e3, d = 128, T = 1e6 63 -> 56 ms).
  bool const check = !in_place;
  bool const check_sums = check && t / scan_sums_positions_per_row >= v;
  // A contiguous host gradient starts before the fold, as each thread's memset or
  // memcpy of its rows (start_host_gradient), not a loop per row in each block: at
  // V = 1e5, d = 16, T = 1e3 that loop alone took 1.1x torch's whole zero_() and
  // index_add_. Scratch blocks write every element themselves.
  bool const whole = !in_place && !in_scratch && v * d > 0 && start_host_gradient(space, carry, grad);
  int bad = 0;
  if (!in_scratch) {
    Kokkos::parallel_reduce(
        "kembed::backward_scan", Range<ExecutionSpace>(space, 0, rows_b * cols_b),
        KOKKOS_LAMBDA(std::int64_t b, int& saw) { run_for(isa, [&] {
          std::int64_t const rb = b / cols_b, c0 = walk.c0(b), c1 = walk.c1(b);
          bool const counter = has_counts && b % cols_b == 0;  // one block per row counts it
          // In place, the rows already hold the carry; else each element is read
          // (from carry) before this thread writes it (where whole, done above).
          if (!whole || counter)
            walk.for_rows(rb, [&](std::int64_t r, std::int64_t) {
              if (!in_place && !whole)
                for (std::int64_t c = c0; c < c1; ++c) grad(r, c) = has_carry ? carry(r, c) : 0.0f;
              if (counter) counts(r) = 0;
            });
          int flag = walk.fold(
              b, [&](std::int64_t r, std::int64_t, std::int64_t c) -> float& { return grad(r, c); }, counter,
              [&](std::int64_t r, std::int64_t) -> auto& { return counts(r); }, check && !check_sums);
          if (check_sums)
            walk.for_rows(rb, [&](std::int64_t r, std::int64_t) {
              if (r != padding_idx)
                for (std::int64_t c = c0; c < c1; ++c) flag |= non_finite(grad(r, c));
            });
          if (walk.owns_row(padding_idx, rb))
            for (std::int64_t c = c0; c < c1; ++c) grad(padding_idx, c) = 0.0f;
          saw |= flag;
        }); },
        Kokkos::BOr<int>(bad));
    return bad != 0;
  }

  using Policy = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
  using Member = typename Policy::member_type;
  using Sums = Kokkos::View<float*, typename ExecutionSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  using Tally = Kokkos::View<typename Counts::non_const_value_type*, typename ExecutionSpace::scratch_memory_space,
                             Kokkos::MemoryUnmanaged>;
  Policy policy(space, rows_b * cols_b, 1);
  policy.set_scratch_size(1, Kokkos::PerTeam(Sums::shmem_size(most_rows * widest) + Tally::shmem_size(most_rows)));
  Kokkos::parallel_reduce(
      "kembed::backward_scan", policy,
      KOKKOS_LAMBDA(Member const& team, int& saw) { run_for(isa, [&] {
        std::int64_t const b = team.league_rank();
        std::int64_t const rb = b / cols_b, c0 = walk.c0(b), c1 = walk.c1(b), w = c1 - c0;
        bool const counter = has_counts && b % cols_b == 0;
        Sums sums(team.team_scratch(1), most_rows * widest);
        Tally tally(team.team_scratch(1), most_rows);
        walk.for_rows(rb, [&](std::int64_t r, std::int64_t q) {
          for (std::int64_t c = c0; c < c1; ++c) sums(q * w + c - c0) = has_carry ? carry(r, c) : 0.0f;
          tally(q) = 0;
        });
        int flag = walk.fold(
            b, [&](std::int64_t, std::int64_t q, std::int64_t c) -> float& { return sums(q * w + c - c0); }, counter,
            [&](std::int64_t, std::int64_t q) -> auto& { return tally(q); }, false);
        // Each gradient element written once, its sum tested on the way (the
        // padding row's terms were tested in the fold, then dropped).
        walk.for_rows(rb, [&](std::int64_t r, std::int64_t q) {
          if (r == padding_idx) {
            for (std::int64_t c = c0; c < c1; ++c) grad(r, c) = 0.0f;
          } else {
            for (std::int64_t c = c0; c < c1; ++c) {
              float const sum = sums(q * w + c - c0);
              if (check) flag |= non_finite(sum);
              grad(r, c) = sum;
            }
          }
          if (counter) counts(r) = tally(q);
        });
        saw |= flag;
      }); },
      Kokkos::BOr<int>(bad));
  return bad != 0;
}

}  // namespace kembed::detail
