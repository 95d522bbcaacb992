#include <kembed/core/error.hpp>
#include <kembed/core/synthetic.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace kembed::synthetic {

std::vector<std::int64_t> uniform_ids(std::int64_t num_embeddings, std::int64_t positions, std::uint64_t seed) {
  if (num_embeddings < 1)
    throw InvalidArgument("num_embeddings", "num_embeddings must be at least 1, got " + std::to_string(num_embeddings));
  Rng rng(seed);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(positions));
  for (auto& id : ids) id = rng.below(num_embeddings);
  return ids;
}

std::vector<std::int64_t> zipf_ids(std::int64_t num_embeddings, std::int64_t positions, double s, std::uint64_t seed) {
  if (num_embeddings < 1)
    throw InvalidArgument("num_embeddings", "num_embeddings must be at least 1, got " + std::to_string(num_embeddings));
  if (!(s > 0.0)) throw InvalidArgument("s", "the Zipf exponent s must be positive, got " + std::to_string(s));
  // Inverse CDF by binary search over the cumulative weights.
  std::vector<double> cdf(static_cast<std::size_t>(num_embeddings));
  double total = 0.0;
  for (std::int64_t k = 0; k < num_embeddings; ++k) {
    total += std::pow(static_cast<double>(k + 1), -s);
    cdf[k] = total;
  }
  Rng rng(seed);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(positions));
  for (auto& id : ids) {
    double const u = rng.uniform() * total;
    auto const it = std::upper_bound(cdf.begin(), cdf.end(), u);
    id = std::min<std::int64_t>(it - cdf.begin(), num_embeddings - 1);
  }
  return ids;
}

std::vector<float> uniform_floats(std::int64_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> out(static_cast<std::size_t>(n));
  for (auto& x : out) x = rng.uniform_float();
  return out;
}

std::uint64_t fingerprint(void const* data, std::size_t bytes) noexcept {
  auto const* p = static_cast<unsigned char const*>(data);
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace kembed::synthetic
