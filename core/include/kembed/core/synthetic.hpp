#pragma once
// Synthetic batches for demos, tests and benchmarks: ids drawn uniformly or from a
// Zipf law (the shape of real text), and dy values, from our own generator so that
// the same seed gives the same batch with any standard library.
#include <cstdint>
#include <vector>

namespace kembed::synthetic {

// SplitMix64: small, fast, and the same sequence everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() noexcept {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1)
  std::int64_t below(std::int64_t n) noexcept { return static_cast<std::int64_t>(uniform() * static_cast<double>(n)); }
  // A float uniform on [-1, 1) with 24 random bits (exact in binary32).
  float uniform_float() noexcept {
    return static_cast<float>(static_cast<std::int64_t>(next() >> 40) - (std::int64_t{1} << 23)) * 0x1p-23f;
  }

 private:
  std::uint64_t state_;
};

// T ids in [0, V), uniform.
std::vector<std::int64_t> uniform_ids(std::int64_t num_embeddings, std::int64_t positions, std::uint64_t seed);
// T ids in [0, V) with P(row k) proportional to 1 / (k + 1)^s: row 0 is the hottest.
std::vector<std::int64_t> zipf_ids(std::int64_t num_embeddings, std::int64_t positions, double s, std::uint64_t seed);
// n floats uniform on [-1, 1) with 24 random bits each (exact in binary32).
std::vector<float> uniform_floats(std::int64_t n, std::uint64_t seed);

// FNV-1a over the bytes: a quick fingerprint of an array's bits for logs.
std::uint64_t fingerprint(void const* data, std::size_t bytes) noexcept;

}  // namespace kembed::synthetic
