#pragma once
// The bare memory access patterns kembed's kernels are made of, as plain loops with
// no kembed code, compiled as kembed's folds are (kembed::detail::run_host: AVX2
// where the CPU has it). kembed-ceilings runs them over large buffers; kembed-bench
// runs them on each grid point's own data as that point's ceiling: a kernel at its
// pattern's speed cannot gain by tuning its loops, only by moving fewer bytes
// (docs/PERFORMANCE.md, "The kernels against their patterns").
#include <kembed/detail/kernel_common.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>
#if defined(__SSE__)
#include <immintrin.h>
#endif

namespace kembed::bench {

constexpr std::int64_t fetch_ahead = 32;  // rows prefetched ahead, as the forward and the folds do

// One work item per thread; thread i gets [lo, hi) of n.
template <class Space, class F>
void per_thread(char const* label, int threads, std::int64_t n, F const& f) {
  kembed::detail::HostIsa const isa = kembed::detail::host_isa();
  Kokkos::parallel_for(label, Kokkos::RangePolicy<Space>(Space(), 0, threads), [=](int i) {
    kembed::detail::run_host(isa, [&] { f(i, n * i / threads, n * (i + 1) / threads); });
  });
  Space().fence();
}

// Adds a row (w floats, a multiple of 32) into 32 running sums: independent lanes,
// so the compiler vectorises it without reassociating anything.
inline void sum_row(float const* row, std::int64_t w, float* s) {
  for (std::int64_t c = 0; c < w; c += 32)
    for (int k = 0; k < 32; ++k) s[k] += row[c + k];
}

inline void fetch_row(float const* row, std::int64_t w) {
  for (std::int64_t c = 0; c < w; c += 16) __builtin_prefetch(row + c, 0, 1);
}

// Copies a row of w floats (a multiple of 4, 16-byte aligned) with streaming stores.
inline void stream_row(float* dst, float const* src, std::int64_t w) {
#if defined(__SSE__)
  for (std::int64_t c = 0; c < w; c += 4) _mm_stream_ps(dst + c, _mm_loadu_ps(src + c));
#else
  std::memcpy(dst, src, std::size_t(w) * sizeof(float));
#endif
}

inline void stream_fence() {
#if defined(__SSE__)
  _mm_sfence();
#endif
}

// The forward's pattern: y[p] = table[ids[p]] for p in [0, t), rows of w floats
// fetched ahead at random, streamed out in order.
template <class Space>
void gather(int threads, float const* table, std::int64_t const* ids, std::int64_t t, std::int64_t w, float* y) {
  per_thread<Space>("kembed::bench::pattern_gather", threads, t, [=](int, std::int64_t lo, std::int64_t hi) {
    for (std::int64_t p = lo; p < hi; ++p) {
      if (p + fetch_ahead < hi) fetch_row(table + ids[p + fetch_ahead] * w, w);
      stream_row(y + p * w, table + ids[p] * w, w);
    }
    stream_fence();
  });
}

// Positions grouped by row, ascending within each (a stable counting sort): row r's
// are by_row[start[r], start[r + 1]). Made outside any timing.
struct ByRow {
  std::vector<std::int64_t> by_row, start;
  ByRow(std::int64_t const* ids, std::int64_t t, std::int64_t v) : by_row(std::size_t(t)), start(std::size_t(v) + 1, 0) {
    for (std::int64_t p = 0; p < t; ++p) ++start[std::size_t(ids[p]) + 1];
    for (std::int64_t r = 0; r < v; ++r) start[std::size_t(r) + 1] += start[std::size_t(r)];
    std::vector<std::int64_t> next(start.begin(), start.end() - 1);
    for (std::int64_t p = 0; p < t; ++p) by_row[std::size_t(next[std::size_t(ids[p])]++)] = p;
  }
};

// The sort's and the bucket's pattern: each thread its share of the rows; a row's dy
// rows read (scattered, fetched ahead) and summed in order, the gradient row streamed
// out once (zeros for a row no position names). w at most 512.
template <class Space>
void fold_by_row(int threads, float const* dy, ByRow const& rows, std::int64_t v, std::int64_t w, float* grad) {
  std::int64_t const* by_row = rows.by_row.data();
  std::int64_t const* start = rows.start.data();
  per_thread<Space>("kembed::bench::pattern_fold_by_row", threads, v, [=](int, std::int64_t lo, std::int64_t hi) {
    alignas(64) float acc[512];
    std::int64_t const last = start[hi];
    for (std::int64_t r = lo; r < hi; ++r) {
      std::fill(acc, acc + w, 0.0f);
      for (std::int64_t j = start[r]; j < start[r + 1]; ++j) {
        if (j + fetch_ahead < last) fetch_row(dy + by_row[j + fetch_ahead] * w, w);
        float const* row = dy + by_row[j] * w;
        for (std::int64_t c = 0; c < w; ++c) acc[c] += row[c];
      }
      stream_row(grad + r * w, acc, w);
    }
    stream_fence();
  });
}

// The scan's pattern: the gradient zeroed, then dy read in position order and each
// row added into its gradient row; each thread takes a slice of the columns (as the
// scan does on several threads), so no two threads write one value.
template <class Space>
void scan_add(int threads, float const* dy, std::int64_t const* ids, std::int64_t t, std::int64_t v, std::int64_t w,
              float* grad) {
  per_thread<Space>("kembed::bench::pattern_zero", threads, v, [=](int, std::int64_t lo, std::int64_t hi) {
    std::memset(grad + lo * w, 0, std::size_t((hi - lo) * w) * sizeof(float));
  });
  per_thread<Space>("kembed::bench::pattern_scan", threads, w, [=](int, std::int64_t c0, std::int64_t c1) {
    for (std::int64_t p = 0; p < t; ++p) {
      float* g = grad + ids[p] * w;
      float const* row = dy + p * w;
      for (std::int64_t c = c0; c < c1; ++c) g[c] += row[c];
    }
  });
}

}  // namespace kembed::bench
