#pragma once
// Device-side validation: each check finds the first offending element with one
// reduction, so the error can name it, before any output is written.
#include <kembed/detail/kernel_common.hpp>

#include <kembed/core/validate.hpp>

namespace kembed::detail {

// Throws the error for ids(first), the first id outside [0, num_embeddings).
template <class IdView>
[[noreturn]] void throw_bad_id(IdView const& ids, std::int64_t first, std::int64_t num_embeddings) {
  typename IdView::non_const_value_type value{};
  Kokkos::deep_copy(value, Kokkos::subview(ids, first));
  throw_id_out_of_range("ids", first, static_cast<std::int64_t>(value), num_embeddings);
}

// Up to this many ids in host memory are checked by the calling thread: a parallel
// reduction's launch (1.2 us on 2 cores) cost as much as the whole forward at T = 1e3.
inline constexpr std::int64_t inline_id_check = 8192;
inline constexpr std::int64_t inline_finite_check = 64 * 1024;  // elements
inline constexpr std::int64_t host_id_chunk = 4096;             // ids a host thread checks in one loop

// 1 if any of ids [begin, end) is outside [0, v): one unsigned compare per id (a
// negative id wraps past v), OR-ed, in the copy `isa` names. The baseline (SSE2)
// copy has no 64-bit compare: 0.55 ns an id, a fifth of a forward of bags of 32.
template <class IdView>
int any_bad_id(HostIsa isa, IdView const& ids, std::int64_t begin, std::int64_t end, std::int64_t v) {
  int bad = 0;
  run_host(isa, [&] {
    for (std::int64_t p = begin; p < end; ++p)
      bad |= static_cast<std::uint64_t>(static_cast<std::int64_t>(ids(p))) >= static_cast<std::uint64_t>(v);
  });
  return bad;
}

// Nothing is thrown unless some id is out of range; then the first is found and named.
template <class ExecutionSpace, class IdView>
void check_ids(ExecutionSpace const& space, IdView const& ids, std::int64_t num_embeddings) {
  std::int64_t const n = ids.extent(0);
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename IdView::memory_space>::accessible) {
    HostIsa const isa = host_isa();
    if (n <= inline_id_check) {
      space.fence();  // the ids may still be being written on `space`
      if (any_bad_id(isa, ids, 0, n, num_embeddings) == 0) return;
    } else if constexpr (Tiles<ExecutionSpace>::host) {  // chunks, each one vectorised loop
      int bad = 0;
      auto const chunks = (n + host_id_chunk - 1) / host_id_chunk;
      Kokkos::parallel_reduce(
          "kembed::check_ids", Range<ExecutionSpace>(space, 0, chunks),
          [=](std::int64_t i, int& any) {
            std::int64_t const begin = i * host_id_chunk;
            any |= any_bad_id(isa, ids, begin, begin + host_id_chunk < n ? begin + host_id_chunk : n, num_embeddings);
          },
          Kokkos::BOr<int>(bad));
      if (bad == 0) return;
    }
  }
  std::int64_t first = n;
  Kokkos::parallel_reduce(
      "kembed::check_ids", Range<ExecutionSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t p, std::int64_t & lowest) {
        auto const r = static_cast<std::int64_t>(ids(p));
        if ((r < 0 || r >= num_embeddings) && p < lowest) lowest = p;
      },
      Kokkos::Min<std::int64_t>(first));
  if (first < n) throw_bad_id(ids, first, num_embeddings);
}

// A (rows, cols) matrix named `argument`; `row_name` words the error ("position", "row").
template <class ExecutionSpace, class Matrix>
void check_finite(ExecutionSpace const& space, Matrix const& m, char const* argument, char const* row_name) {
  std::int64_t const cols = m.extent(1);
  std::int64_t const n = static_cast<std::int64_t>(m.extent(0)) * cols;
  if (n == 0) return;
  std::int64_t first = n;
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Matrix::memory_space>::accessible) {
    if (n <= inline_finite_check) {  // as check_ids: a launch would cost more
      space.fence();
      int bad = 0;
      for (std::int64_t r = 0; r < std::int64_t(m.extent(0)); ++r)
        for (std::int64_t c = 0; c < cols; ++c) bad |= non_finite(m(r, c));
      if (bad == 0) return;
    }
  }
  // Row by row, so the common case (nothing bad) is one vectorised OR per row; a
  // division per element made this 10x slower than the read (213 ms for 512 MB).
  Kokkos::parallel_reduce(
      "kembed::check_finite", Range<ExecutionSpace>(space, 0, m.extent(0)),
      KOKKOS_LAMBDA(std::int64_t r, std::int64_t & lowest) {
        int bad = 0;
        for (std::int64_t c = 0; c < cols; ++c) bad |= non_finite(m(r, c));
        if (bad == 0) return;
        for (std::int64_t c = 0; c < cols; ++c)
          if (!is_finite(m(r, c))) {
            if (r * cols + c < lowest) lowest = r * cols + c;
            break;
          }
      },
      Kokkos::Min<std::int64_t>(first));
  if (first >= n) return;
  typename Matrix::non_const_value_type value{};
  Kokkos::deep_copy(value, Kokkos::subview(m, first / cols, first % cols));
  throw_non_finite(argument, first, static_cast<float>(value), cols, row_name);
}

}  // namespace kembed::detail
