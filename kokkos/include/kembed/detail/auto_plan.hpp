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
  static constexpr std::int64_t scan_few_positions_rows = 12;  // rows per position, at least
  static constexpr std::int64_t scan_few_positions_rows_large = 6;  // from scan_run_gradient
  static constexpr std::int64_t small_gradient = std::int64_t{2} << 20;
  static constexpr std::int64_t scan_tiny_dy = std::int64_t{256} << 10;
  static constexpr std::int64_t scan_narrow_slice = 64;  // floats
  static constexpr std::int64_t scan_narrow_dy = std::int64_t{4} << 20;
  static constexpr std::int64_t sort_dy_rows_per_row = 8;
  // Bag calls (positions per dy row, at least).
  static constexpr std::int64_t scan_bag_positions_threads = 16;
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
//   columns into slices of at most 64 floats (d <= 128 on 2 threads), at any size:
//   `scan`, with factors (mean, weighted) or without. Its dy is one row per bag and
//   stays in cache, where the bucket plan with factors reads a bag number per
//   position. Zen 4 guest, 2 threads, Zipf ids, sum, mean and weighted, lowest of 5
//   (issue 37): under one position per row (V = 8,200 to 1e5, d = 64, 256-2,048 bags
//   of 16 and 32) 1.6-2.1x faster than bucket; V = 5e4, d = 128, 2,048 x 32 1.2x.
//   From 8 MiB at a position per row, or past 32 MiB, where the scan's blocks own
//   runs of whole rows (scan_split), V = 1e5 and 1e6, d = 64 and 128, 2,048 and 16,384
//   bags of 32 and 128: 1.2-2.3x (with column halves, bucket had been even or ahead
//   at most of those past 32 MiB). At d = 256 bucket by 1.02-1.11x;
// - 2-4 threads, at most V/12 positions (unpooled or bags, factors or not), at any
//   size, or V/6 from 8 MiB where d <= 128 (2 threads): `scan`. Its gradient starts as
//   each thread's memset (streamed past 32 MiB, start_host_gradient) of its own rows,
//   and then each thread walks the few positions for its columns (or, past 32 MiB,
//   its runs of rows). Against bucket on the Zen 4 guest, 2 threads, uniform and Zipf
//   ids, unpooled, V = 1e5 and 1e6, d = 64 and 128: with column halves at V/32 and
//   V/16 1.1-2.5x faster, at V/12 0.9-1.9x, at V/8 bucket up to 1.2x faster at
//   V = 1e6, d = 64; in runs at V = 1e6, V/8 and V/6 0.67-0.98 of bucket's time, V/4
//   0.86-1.06; bags of one at V/6 (V = 1e5, 16,384, 25.6 MB, column halves) 0.63-0.71
//   ms against 0.88-0.92, at 51 MB in runs 1.15-1.5x;
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
  bool const narrow_rows = d <= K::scan_narrow_slice * scan_column_blocks(threads, d);
  if (threads <= 4 && bags_of(K::scan_bag_positions_threads) && narrow_rows) return Plan::scan;
  bool const large = v >= scan_run_gradient / row_bytes;
  std::int64_t const few = large && narrow_rows ? K::scan_few_positions_rows_large : K::scan_few_positions_rows;
  if (threads <= 4 && t <= v / few) return Plan::scan;
  if (factors && at_most(v, K::small_gradient)) return Plan::sort;
  if (threads > 4) return at_most(v, K::small_gradient) ? resolve_plan(Plan::automatic, v, t) : Plan::bucket;
  if (at_most(v, K::small_gradient)) {
    ScanSplit const split = scan_split(threads, v, d, t);
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
