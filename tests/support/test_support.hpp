#pragma once
// Shared by the kembed tests: the backend under test, exact bit comparison, and
// the catalogue of inputs that the contract's edge cases call for.
#include <gtest/gtest.h>

#include <kembed/core/arrays.hpp>
#include <kembed/core/options.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#ifdef KEMBED_TEST_USES_KOKKOS
#include <Kokkos_Core.hpp>
// Cabana-style category: each test binary is built for one backend.
#ifndef KEMBED_TEST_EXECSPACE
#error "define KEMBED_TEST_EXECSPACE (Kokkos::Serial, Kokkos::OpenMP, ...)"
#endif
using TEST_EXECSPACE = KEMBED_TEST_EXECSPACE;
#endif

namespace kembed::test {

// A file of tests/data: under $KEMBED_TEST_DATA_DIR where it is set (a device bundle
// carries the files to a machine without the source tree), else where the build found them.
inline std::string data_file(char const* name) {
  char const* dir = std::getenv("KEMBED_TEST_DATA_DIR");
#ifdef KEMBED_TEST_DATA_DIR
  if (!dir || !*dir) dir = KEMBED_TEST_DATA_DIR;
#endif
  return std::string(dir ? dir : ".") + "/" + name;
}

// Sets an environment variable for a scope, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(char const* name, char const* value) : name_(name) {
    if (char const* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(ScopedEnv const&) = delete;
  ScopedEnv& operator=(ScopedEnv const&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

inline std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
inline float from_bits(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// memcmp equality; on failure, how many floats differ and the first one, in hex.
::testing::AssertionResult same_bits(std::vector<float> const& got, std::vector<float> const& want);
::testing::AssertionResult same_values(std::vector<std::int64_t> const& got, std::vector<std::int64_t> const& want);

// How many values have torch's bits, and the largest distance of the others in units
// in the last place: what the stored torch comparisons hold.
struct Agreement {
  std::int64_t equal = 0, ulps = 0;
  bool operator==(Agreement const& o) const { return equal == o.equal && ulps == o.ulps; }
};
std::ostream& operator<<(std::ostream& out, Agreement const& a);
Agreement agreement(std::vector<float> const& a, std::vector<float> const& b);

// Lines of the stored torch results: hexadecimal float bits, and integers.
std::vector<float> parse_hex(std::string const& line);
std::vector<std::int64_t> parse_ints(std::string const& line);

// One input of the catalogue: ids (used as int32 when `as_int32`), dy, settings.
struct Batch {
  std::string name;
  std::int64_t rows = 0, dim = 0;
  std::vector<std::int64_t> ids;
  std::vector<float> dy;
  std::optional<std::int64_t> padding_idx;
  bool as_int32 = false;

  std::int64_t positions() const { return static_cast<std::int64_t>(ids.size()); }
  Options options(Plan plan, Mode mode) const {
    Options o;
    o.padding_idx = padding_idx;
    o.plan = plan;
    o.mode = mode;
    return o;
  }
  Config config() const { return make_config(rows, dim, options(Plan::automatic, Mode::identical)); }
  Shape dy_shape() const { return Shape{positions(), dim}; }
};

// Short names in test listings (CTest names come from these).
inline void PrintTo(Batch const& b, std::ostream* os) {
  *os << b.name;
}

// Ids as the batch asks for them: storage must outlive the returned IdsRef.
struct IdsHolder {
  std::vector<std::int32_t> i32;
  std::vector<std::int64_t> const* i64 = nullptr;
  explicit IdsHolder(Batch const& b);
  IdsRef ref() const;
};

// One input of the catalogue, by name. Its data is made on first use, once per
// process: each test binary registers every test at start-up and CTest runs one
// test a process, so making every input there cost 0.8 s a test.
struct Input {
  std::string name;
  Batch const& batch() const;
};
inline void PrintTo(Input const& input, std::ostream* os) {
  *os << input.name;
}

// The inputs point 5 of the core issue names, each small enough to run fast.
std::vector<Input> catalogue();
Batch const& catalogue_batch(std::string const& name);

// A table of V x d finite values from a seed.
std::vector<float> table_for(std::int64_t rows, std::int64_t dim, std::uint64_t seed = 7);

}  // namespace kembed::test
