#pragma once
// What `auto` runs, as measured with bench/kembed_bench.cpp on 2 cores over the
// whole grid at 1 and 2 threads (docs/PERFORMANCE.md). Every plan gives the same
// bits, so this rule is a speed choice only.
#include <kembed/core/options.hpp>
#include <kembed/detail/backward_scan.hpp>

#include <cstdint>

namespace kembed::detail {

struct AutoThresholds {
  // Several threads (one thread always scans).
  static constexpr std::int64_t scan_gradient = std::int64_t{32} << 20;
  static constexpr std::int64_t scan_few_positions_rows = 12;  // rows per position, at least
  static constexpr std::int64_t small_gradient = std::int64_t{2} << 20;
  static constexpr std::int64_t scan_tiny_dy = std::int64_t{256} << 10;
  static constexpr std::int64_t scan_narrow_slice = 64;  // floats
  static constexpr std::int64_t scan_narrow_dy = std::int64_t{4} << 20;
  static constexpr std::int64_t sort_dy_rows_per_row = 8;
  // Bag calls (positions per dy row, at least).
  static constexpr std::int64_t scan_bag_positions_threads = 16;
  // Bag calls on 2-4 threads past scan_gradient (positions per table row, at least).
  static constexpr std::int64_t scan_bag_positions_per_row_large = 8;
};

// On host backends (sizes in bytes):
// - one thread: `scan` at every size, unpooled or bags. It starts its gradient with one
//   memset (or a memcpy of the carry) and fetches each term's gradient row 32 positions
//   ahead; the bucket plan writes every row once too, and reads its dy rows scattered.
//   Zen 4 guest, issue 37, against bucket: unpooled, uniform and Zipf, V = 1e3 to 1e7,
//   d = 16 to 512, T = 1e4 to 1e6, 1.02-3.1x faster at 39 of 40 points (bucket 1.03-1.21x
//   ahead at V = 1e5, d = 128, T = 1e6 uniform, which scanned before too); bags of
//   one, V = 1e5 and 1e6, d = 64 and 128: 1.7-3.2x; longer bags: 1.03-2.1x. (Before the
//   memset start and the fetch, bucket won past 32 MiB of gradient: issues 35 and 37.)
// - 2-4 threads, a bag call of at least 16 positions per bag whose scan splits the
//   columns into slices of at most 64 floats, with a gradient of at most 32 MiB, or 8
//   positions per table row at any size: `scan`, with factors (mean, weighted) or
//   without. Its dy is one row per bag and stays in cache, where the bucket plan with
//   factors reads a bag number per position. Zen 4 guest, 2 threads, Zipf ids, sum,
//   mean and weighted, lowest of 5 (issue 37): under one position per row (V = 8,200
//   to 1e5, d = 64, 256-2,048 bags of 16 and 32) 1.6-2.1x faster than bucket; V = 5e4,
//   d = 128, 2,048 x 32 (1.3 per row) 1.2x; V = 1e5, d = 64, 2,048 x 128 and
//   16,384 x 32 (2.6 and 5.2 per row) 1.6x; 16,384 x 128 (21 per row) even. Past
//   32 MiB: under 8 per row bucket was even or 1.1-2.1x faster (V = 1e5, d = 128,
//   2,048 x 32 and 128, 16,384 x 32; V = 2e5, d = 64, 16,384 x 32; V = 1e6, 2,048 x 128,
//   16,384 x 32 and 128) but at V = 2e5, d = 64, 2,048 x 32 (scan 1.6-1.9x), at 21
//   per row scan 1.09x (V = 1e5, d = 128, 16,384 x 128). At d = 256 (slices of 128)
//   bucket by 1.2-1.3x;
// - 2-4 threads, at most V/12 positions (unpooled or bags, factors or not), at any
//   size: `scan`. Its gradient starts as each thread's memset (streamed past 32 MiB,
//   start_host_gradient) of its own rows, and then each thread walks the few positions
//   for its columns. Against bucket on the Zen 4 guest, 2 threads, uniform and Zipf
//   ids, unpooled: V = 1e5 and 1e6, d = 64 and 128, at V/32 and V/16 1.1-2.5x faster,
//   at V/12 0.9-1.9x (V = 1e6, d = 64, uniform: 1.08x slower), at V/8 bucket up to
//   1.2x faster at V = 1e6, d = 64; bags of one and of 32 within V/12: 1.15-2.1x
//   (V = 1e6, 2,048 x 32 at V/15: 3.1 ms against 5.1);
// - 2-4 threads, other terms with factors on a gradient of at most 2 MiB: `sort`
//   (bags of 1 weighted, V = 8,000, d = 64: sort 2.1-3.4 ms, scan 4.6, its column
//   halves each walking every term; at d = 128 scan was faster, 17.8 against 23.9:
//   mixed, so kept as it was);
// - 2-4 threads, gradient at most 2 MiB: `scan` while dy is at most 256 KiB (one
//   launch, no sort: a few microseconds), and from 4 MiB of dy where the scan
//   splits the columns into slices of at most 64 floats (each thread streams its
//   slice of every dy row, prefetched: 1.1-1.25x faster than the sort at V = 1e3,
//   d = 64 and 128, T = 1e6; even at T = 1e5; 1.2x slower at d = 128, T = 1e3,
//   0.5 MiB of dy); else `sort`. At d = 16 and 512 the scan splits the rows instead,
//   every thread walking past the other's positions: the sort was 1.5-1.7x faster
//   at d = 16 and 1.2-1.3x at d = 512 (all but uniform ids at T = 1e6: 0.93x);
// - 2-4 threads, larger gradients: `sort` where dy has at least 8 rows per table
//   row (an unpooled call's T >= 8 V): each row's sum stays in registers while its
//   segment is read, where the bucket plan adds every dy row into its cache slice;
//   it won by 1.1-1.3x at V = 1e5, T = 1e6. At 2-4 positions per row the two traded
//   places with the ids' distribution, and at V = 1e6 with 3-4 the bucket plan's
//   smaller histogram won by 1.4-1.9x; at 1 or fewer it won by 1.5-3x. A bag call's
//   terms read one dy row per bag (B, not T), so the sort's pass over T ids is what
//   is left to pay (V = 1e5, 16,384 bags of 128, d = 64 and 128: bucket 1.07-1.7x
//   faster than sort at every point). Otherwise `bucket` (its updates stay in cache,
//   each gradient row is written once, and a hot bucket's rows are shared out, where
//   the scan re-reads every id on every thread);
// - past 4 threads: `bucket` for gradients over 2 MiB, and the contract's V * T
//   rule below that, until measured.
// A device backend sorts, in its device shape (row_index.hpp, fold.hpp): the scan's
// thousands of blocks would each walk every position, and a hot bucket serialises
// on one team's scratch pad (docs/DESIGN.md, "Device backends").
// `dy_rows`: the rows of dy the call's terms read (T unpooled, B for bags);
// `factors`: the terms carry their own factors (mean or weighted bags, an owner's
// weighted terms under MPI).
inline Plan auto_plan(bool host, std::int64_t threads, std::int64_t v, std::int64_t d, std::int64_t t,
                      std::int64_t dy_rows, bool factors = false) {
  if (!host) return Plan::sort;
  if (threads <= 1) return Plan::scan;
  using K = AutoThresholds;
  std::int64_t const row_bytes = d * std::int64_t(sizeof(float));
  // rows * row_bytes <= bytes, without forming a product that could overflow.
  auto const at_most = [&](std::int64_t rows, std::int64_t bytes) { return rows <= bytes / row_bytes; };
  // A bag call of at least k positions per bag (its terms read one dy row per bag).
  auto const bags_of = [&](std::int64_t k) { return dy_rows > 0 && dy_rows <= t / k; };
  bool const rows_fed = at_most(v, K::scan_gradient) || v <= t / K::scan_bag_positions_per_row_large;
  if (threads <= 4 && bags_of(K::scan_bag_positions_threads) && rows_fed &&
      d <= K::scan_narrow_slice * scan_split(threads, v, d).col_blocks)
    return Plan::scan;
  if (threads <= 4 && t <= v / K::scan_few_positions_rows) return Plan::scan;
  if (factors && at_most(v, K::small_gradient)) return Plan::sort;
  if (threads > 4) return at_most(v, K::small_gradient) ? resolve_plan(Plan::automatic, v, t) : Plan::bucket;
  if (at_most(v, K::small_gradient)) {
    ScanSplit const split = scan_split(threads, v, d);
    bool const narrow = split.col_blocks > 1 && d <= K::scan_narrow_slice * split.col_blocks &&
                        !at_most(t, K::scan_narrow_dy);
    return at_most(t, K::scan_tiny_dy) || narrow ? Plan::scan : Plan::sort;
  }
  return v <= dy_rows / K::sort_dy_rows_per_row ? Plan::sort : Plan::bucket;
}
inline Plan auto_plan(bool host, std::int64_t threads, std::int64_t v, std::int64_t d, std::int64_t t) {
  return auto_plan(host, threads, v, d, t, t);
}

}  // namespace kembed::detail
