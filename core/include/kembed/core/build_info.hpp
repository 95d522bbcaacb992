#pragma once
// What the library was built with, as far as it affects the bits. Tests assert on
// these so that a build with fast-math or flush-to-zero cannot pass silently.
#include <string_view>

namespace kembed {

struct BuildInfo {
  std::string_view version;
  bool fast_math;          // the core library was compiled with __FAST_MATH__
  bool subnormals_kept;    // a subnormal float survives an addition at run time
  bool additions_unfused;  // a * b + c rounds twice in the core library (no contraction)
};

BuildInfo build_info() noexcept;

}  // namespace kembed
