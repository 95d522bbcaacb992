#pragma once
// What `auto` runs, as measured with bench/kembed_bench.cpp on 2 cores over the
// whole grid at 1 and 2 threads (docs/PERFORMANCE.md). Every plan gives the same
// bits, so this rule is a speed choice only.
#include <kembed/core/options.hpp>

#include <cstdint>

namespace kembed::detail {

struct AutoThresholds {
  // One thread.
  static constexpr std::int64_t scan_gradient = std::int64_t{32} << 20;
  static constexpr std::int64_t scan_large_dy = std::int64_t{256} << 20;
  static constexpr std::int64_t scan_large_dy_gradient = std::int64_t{256} << 20;
  // Several threads.
  static constexpr std::int64_t small_gradient = std::int64_t{2} << 20;
  static constexpr std::int64_t scan_tiny_dy = std::int64_t{256} << 10;
  static constexpr std::int64_t sort_dy = std::int64_t{16} << 20;
  static constexpr std::int64_t scan_dy = std::int64_t{128} << 20;
};

// On host backends (sizes in bytes):
// - one thread: `scan` (one pass, nothing to sort) while the gradient is at most
//   32 MiB, and also when dy exceeds 256 MiB and the gradient is at most 256 MiB
//   (there the bucket plan's scattered dy reads cost more than the scan's gradient
//   updates); else `bucket`. Fitted on three earlier runs, then confirmed on fresh
//   ones (docs/PERFORMANCE.md);
// - 2-4 threads, gradient at most 2 MiB: `scan` while dy is at most 256 KiB (one
//   launch, no sort: a few microseconds), `sort` up to 16 MiB of dy (a small
//   histogram, and dy's random reads hit cache), `scan` again up to 128 MiB (each
//   thread folds into its own copy of its sums; it beat the sort by 1.25-1.35x at
//   V = 1e3, d = 64 and 128, T = 1e5, and d = 16, T = 1e6), then `bucket`;
// - 2-4 threads otherwise: `bucket` (its updates stay in cache, each gradient row
//   is written once, and a hot bucket's rows are shared out, where the scan
//   re-reads every id on every thread). The scan past 1 GiB of dy, which this rule
//   had until dy's rows were prefetched into L2, now loses to it by 1.1-1.3x;
// - past 4 threads: `bucket` for gradients over 2 MiB, and the contract's V * T
//   rule below that, until measured.
// A device backend sorts: the scan reads the ids once per block, and the bucket
// plan, written portably, has never been compiled for a device here.
inline Plan auto_plan(bool host, std::int64_t threads, std::int64_t v, std::int64_t d, std::int64_t t) {
  if (!host) return Plan::sort;
  using K = AutoThresholds;
  std::int64_t const row_bytes = d * std::int64_t(sizeof(float));
  // rows * row_bytes <= bytes, without forming a product that could overflow.
  auto const at_most = [&](std::int64_t rows, std::int64_t bytes) { return rows <= bytes / row_bytes; };
  if (threads <= 1) {
    bool const scan = at_most(v, K::scan_gradient) ||
                      (!at_most(t, K::scan_large_dy) && at_most(v, K::scan_large_dy_gradient));
    return scan ? Plan::scan : Plan::bucket;
  }
  if (threads > 4) return at_most(v, K::small_gradient) ? resolve_plan(Plan::automatic, v, t) : Plan::bucket;
  if (at_most(v, K::small_gradient)) {
    if (at_most(t, K::scan_tiny_dy)) return Plan::scan;
    if (at_most(t, K::sort_dy)) return Plan::sort;
    if (at_most(t, K::scan_dy)) return Plan::scan;
  }
  return Plan::bucket;
}

}  // namespace kembed::detail
