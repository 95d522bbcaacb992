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

// x - x is +0 for every finite x and NaN for NaN and the infinities (no fast-math).
template <class T>
KOKKOS_INLINE_FUNCTION bool is_finite(T x) {
  T const diff = x - x;
  return diff == diff;
}

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
