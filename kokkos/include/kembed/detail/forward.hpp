#pragma once
// The forward: a gather of whole table rows, copied bit for bit, after a check of
// every id. Nothing is written unless every id is in [0, V).
#include <kembed/detail/checks.hpp>
#include <kembed/detail/kernel_common.hpp>

#include <algorithm>
#include <cstring>

namespace kembed::detail {

// Host outputs of at least this many bytes are written with streaming stores, smaller
// ones with ordinary stores (which leave them in the cache). Measured on the Intel
// host, V = 1e6, Zipf, d = 64, 128, 512 alike, 1 and 2 threads (docs/PERFORMANCE.md,
// "Stores and prefetches"): ordinary stores 1.1-1.4x faster up to 51 MB, even at 77 MB,
// streaming 1.2-1.8x faster from 102 MB. (The AMD host, 32 MiB of L3 per chiplet,
// had 512-byte rows gain from streaming at 51 MB.)
inline constexpr std::int64_t forward_stream_bytes = std::int64_t{64} << 20;
// Rows are fetched ahead unless the table is at most this large and the output is
// not streamed: then the rows come from the cache anyway, and the prefetches only
// compete with the output's stores. Same host, same sitting: without them V = 1e5,
// T = 1e5, d = 64 and 128 took 0.83-0.93x the time (Zipf and uniform ids, 1 and 2
// threads); with V = 1e6 uniform ids, 1.0-1.4x at T = 1e5 and 1.6-1.7x at T = 1e6.
inline constexpr std::int64_t forward_prefetch_table_bytes = std::int64_t{64} << 20;

// Throws kembed::IdOutOfRange (nothing written) if an id is outside [0, V).
template <class ExecutionSpace, class IdView, class Table, class Out>
void forward(ExecutionSpace const& space, IdView const& ids, Table const& weight, Out const& y,
             std::int64_t stream_bytes = forward_stream_bytes) {
  static_assert(std::is_same<typename Out::array_layout, Kokkos::LayoutRight>::value &&
                    std::is_same<typename Table::array_layout, Kokkos::LayoutRight>::value,
                "kembed::detail::forward copies whole rows: the table and y must be LayoutRight");
  std::int64_t const v = weight.extent(0);
  std::int64_t const d = weight.extent(1);
  std::int64_t const t = ids.extent(0);
  check_ids(space, ids, v);
  if constexpr (!Tiles<ExecutionSpace>::host) {
    // A device: one team thread per position, the row's columns on vector lanes,
    // so a warp reads and writes a row's consecutive floats together.
    using Policy = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
    constexpr int threads = 4, lanes = 32;
    Kokkos::parallel_for(
        "kembed::forward", Policy(space, (t + threads - 1) / threads, threads, lanes),
        KOKKOS_LAMBDA(typename Policy::member_type const& team) {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, threads), [&](int k) {
            std::int64_t const p = std::int64_t(team.league_rank()) * threads + k;
            if (p >= t) return;
            auto const r = static_cast<std::int64_t>(ids(p));
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, d), [&](std::int64_t c) { y(p, c) = weight(r, c); });
          });
        });
  } else {
    // Host: blocks of positions; each fetches the row prefetch_rows positions ahead
    // where the table is not in cache (the reads are random rows, which no hardware
    // prefetcher predicts) and, for large outputs, streams its rows out and fences
    // once per block.
    constexpr std::int64_t block = 64, ahead = prefetch_rows;
    bool const stream = t * d * std::int64_t(sizeof(float)) >= stream_bytes;
    bool const fetch = stream || v * d * std::int64_t(sizeof(float)) > forward_prefetch_table_bytes;
    Kokkos::parallel_for(
        "kembed::forward", Range<ExecutionSpace>(space, 0, (t + block - 1) / block), KOKKOS_LAMBDA(std::int64_t b) {
          std::int64_t const end = (b + 1) * block < t ? (b + 1) * block : t;
          for (std::int64_t p = b * block; p < end; ++p) {
            if (fetch && p + ahead < t) {
              auto const next = static_cast<std::int64_t>(ids(p + ahead));
              for (std::int64_t c = 0; c < d; c += line_floats) prefetch(&weight(next, c));
            }
            float* const out = &y(p, 0);
            float const* const row = &weight(static_cast<std::int64_t>(ids(p)), 0);
            if (stream)
              stream_copy(out, row, d);
            else
              std::memcpy(out, row, std::size_t(d) * sizeof(float));
          }
          if (stream) stream_fence();
        });
  }
}

}  // namespace kembed::detail
