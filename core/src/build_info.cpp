#include <kembed/core/build_info.hpp>

#include <kembed/version.hpp>

namespace kembed {
namespace {

// volatile keeps the compiler from folding these at compile time: the point is
// what the floating-point unit does when the library runs.
bool subnormals_survive() noexcept {
  volatile float tiny = 1.0e-40f;  // subnormal in binary32
  volatile float zero = 0.0f;
  float const sum = tiny + zero;
  return sum != 0.0f;
}

bool multiply_add_rounds_twice() noexcept {
  // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: rounded once it is 1 + 2^-11 (tie to even),
  // and minus that exactly gives 0; fused, the 2^-24 survives.
  volatile float a = 1.0f + 0x1p-12f;
  volatile float c = -(1.0f + 0x1p-11f);
  float const x = a, y = c;
  float const r = x * x + y;
  return r == 0.0f;
}

}  // namespace

BuildInfo build_info() noexcept {
  BuildInfo info{};
  info.version = KEMBED_VERSION_STRING;
#ifdef __FAST_MATH__
  info.fast_math = true;
#else
  info.fast_math = false;
#endif
  info.subnormals_kept = subnormals_survive();
  info.additions_unfused = multiply_add_rounds_twice();
  return info;
}

}  // namespace kembed
