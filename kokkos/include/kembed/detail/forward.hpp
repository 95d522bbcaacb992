#pragma once
// The forward: a gather of whole table rows, copied bit for bit, after a check of
// every id. Nothing is written unless every id is in [0, V).
#include <kembed/detail/checks.hpp>
#include <kembed/detail/kernel_common.hpp>

#include <algorithm>
#include <cstring>

namespace kembed::detail {

// Outputs at least this large are written with streaming stores on the host.
// Measured on 2 cores (docs/PERFORMANCE.md): streaming made 512 MB outputs 1.5-2x
// faster, was even at 51 MB, and slower at 6-64 MB, which the cache still holds.
inline constexpr std::int64_t forward_stream_bytes = std::int64_t{128} << 20;
// Rows of at least 512 bytes stream from 48 MiB: on the AMD host (32 MiB of L3 per
// chiplet) a 51 MB output of 512-byte rows was written 1.4x faster at 1 thread and
// 1.1-1.4x at 2, where 64 and 128 MB outputs of 64- and 128-byte rows were 1.1-1.2x
// slower streamed.
inline constexpr std::int64_t forward_stream_bytes_wide = std::int64_t{48} << 20;
inline constexpr std::int64_t forward_wide_row_floats = 128;

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
    // (the reads are random rows, which no hardware prefetcher predicts) and, for
    // large outputs, streams its rows out and fences once per block.
    constexpr std::int64_t block = 64, ahead = prefetch_rows;
    std::int64_t const out_bytes = t * d * std::int64_t(sizeof(float));
    bool const stream = out_bytes >= stream_bytes ||
                        (d >= forward_wide_row_floats && out_bytes >= std::min(stream_bytes, forward_stream_bytes_wide));
    Kokkos::parallel_for(
        "kembed::forward", Range<ExecutionSpace>(space, 0, (t + block - 1) / block), KOKKOS_LAMBDA(std::int64_t b) {
          std::int64_t const end = (b + 1) * block < t ? (b + 1) * block : t;
          for (std::int64_t p = b * block; p < end; ++p) {
            if (p + ahead < t) {
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
