#pragma once
// What every kembed kernel needs: the range policy, the IEEE guard, and a finite
// test that works on every backend.
#include <Kokkos_Core.hpp>

#include <cstdint>

// The contract needs one IEEE-754 binary32 addition per term, in order. Fast-math
// lets the compiler reassociate and flush subnormals, which changes the bits.
#ifdef __FAST_MATH__
#error "kembed kernels need IEEE-754 semantics: remove -ffast-math / -Ofast from this translation unit"
#endif

namespace kembed::detail {

template <class ExecutionSpace>
using Range = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
// For loops whose iterations differ wildly in cost (rows of Zipf-distributed ids).
template <class ExecutionSpace>
using DynamicRange =
    Kokkos::RangePolicy<ExecutionSpace, Kokkos::Schedule<Kokkos::Dynamic>, Kokkos::IndexType<std::int64_t>>;

// x - x is +0 for every finite x and NaN for NaN and the infinities (no fast-math).
template <class T>
KOKKOS_INLINE_FUNCTION bool is_finite(T x) {
  T const diff = x - x;
  return diff == diff;
}

// Whether a term is NaN or +-inf, in a form compilers vectorise: x - x is 0 for
// every finite x. Kernels OR this over the terms they read anyway, so the input
// check costs no extra pass over dy.
template <class T>
KOKKOS_INLINE_FUNCTION int non_finite(T x) {
  return (x - x) != T(0);
}

// Columns a thread folds together. On host backends a whole row (up to 256 columns)
// at once: each dy row is read in one piece and each gradient row written once. On
// devices narrower tiles keep per-thread state in registers.
template <class ExecutionSpace>
struct Tiles {
  static constexpr bool host =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecutionSpace::memory_space>::accessible;
  static constexpr std::int64_t fold = host ? 256 : 16;
  static constexpr std::int64_t pairwise = host ? 32 : 4;  // 64 stack levels per column
};

// [begin, end) of part `i` out of `parts` equal parts of n, without forming i * n.
KOKKOS_INLINE_FUNCTION std::int64_t part_begin(std::int64_t n, std::int64_t parts, std::int64_t i) {
  std::int64_t const base = n / parts, extra = n % parts;
  return i * base + (i < extra ? i : extra);
}

// Labels the region a path runs in, so Kokkos tools show which path ran.
class ScopedRegion {
 public:
  explicit ScopedRegion(std::string const& name) { Kokkos::Profiling::pushRegion(name); }
  ~ScopedRegion() { Kokkos::Profiling::popRegion(); }
  ScopedRegion(ScopedRegion const&) = delete;
  ScopedRegion& operator=(ScopedRegion const&) = delete;
};

}  // namespace kembed::detail
