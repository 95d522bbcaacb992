#pragma once
// max_norm: before the forward gathers, each distinct referenced row whose norm
// exceeds max_norm is scaled, once, by float(max_norm / (norm + 1e-7)): torch's
// embedding_renorm_, with the norm defined exactly (reference::row_norm). Each row
// is read and written by one thread alone, so duplicates and order cannot matter.
#include <kembed/detail/unique_rows.hpp>

#include <cmath>

namespace kembed::detail {

// The norm for p = 1, 2 and inf: IEEE operations only (sqrt is correctly rounded
// everywhere), so every backend gets the same double. Other p use pow, whose last
// bit differs between math libraries: those run on the host (renorm below).
template <class Table>
KOKKOS_INLINE_FUNCTION double exact_row_norm(Table const& table, std::int64_t r, std::int64_t d, double p) {
  double acc = 0.0;
  for (std::int64_t c = 0; c < d; ++c) {
    double const x = static_cast<double>(table(r, c));
    double const w = x < 0 ? -x : x;  // -0.0 squares and sums as +0.0
    if (p == 1.0)
      acc = dadd_rn(acc, w);
    else if (p == 2.0)
      acc = dadd_rn(acc, dmul_rn(w, w));
    else
      acc = w > acc ? w : acc;
  }
  return p == 2.0 ? dsqrt_rn(acc) : acc;
}

inline bool norm_is_exact(double p) { return p == 1.0 || p == 2.0 || std::isinf(p); }

template <class ExecutionSpace, class IdView, class Table>
void renorm(ExecutionSpace const& space, IdView const& ids, Table const& table, double max_norm, double norm_type) {
  using memory_space = typename ExecutionSpace::memory_space;
  std::int64_t const v = table.extent(0), d = table.extent(1);
  auto const rows = unique_rows(space, ids, v).rows;
  std::int64_t const u = rows.extent(0);
  // A row's scale: 0 where it stays (no row is scaled by 0: max_norm > 0).
  Kokkos::View<float*, memory_space> scale(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::renorm::scale"), u);
  if (norm_is_exact(norm_type)) {
    double const p = std::isinf(norm_type) ? 0.0 : norm_type;  // 0 stands for inf in the kernel
    Kokkos::parallel_for(
        "kembed::renorm::norms", Range<ExecutionSpace>(space, 0, u), KOKKOS_LAMBDA(std::int64_t i) {
          double const norm = exact_row_norm(table, rows(i), d, p);
          scale(i) = norm > max_norm ? static_cast<float>(max_norm / (norm + 1e-7)) : 0.0f;
        });
  } else {
    // The rows to the host (where they are already, on host backends), pow there.
    Kokkos::View<float**, Kokkos::LayoutRight, memory_space> picked(
        Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::renorm::rows"), u, d);
    Kokkos::parallel_for(
        "kembed::renorm::gather", Range<ExecutionSpace>(space, 0, u), KOKKOS_LAMBDA(std::int64_t i) {
          for (std::int64_t c = 0; c < d; ++c) picked(i, c) = table(rows(i), c);
        });
    auto const host_rows = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), picked);
    auto const host_scale = Kokkos::create_mirror_view(Kokkos::HostSpace(), scale);
    for (std::int64_t i = 0; i < u; ++i) {
      double acc = 0.0;
      for (std::int64_t c = 0; c < d; ++c) acc += std::pow(std::fabs(static_cast<double>(host_rows(i, c))), norm_type);
      double const norm = std::pow(acc, 1.0 / norm_type);
      host_scale(i) = norm > max_norm ? static_cast<float>(max_norm / (norm + 1e-7)) : 0.0f;
    }
    Kokkos::deep_copy(space, scale, host_scale);
  }
  Kokkos::parallel_for(
      "kembed::renorm::scale_rows", Range<ExecutionSpace>(space, 0, u), KOKKOS_LAMBDA(std::int64_t i) {
        float const s = scale(i);
        if (s == 0.0f) return;
        std::int64_t const r = rows(i);
        for (std::int64_t c = 0; c < d; ++c) table(r, c) = mul_rn(table(r, c), s);
      });
  space.fence();
}

}  // namespace kembed::detail
