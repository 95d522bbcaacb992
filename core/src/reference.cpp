#include <kembed/core/error.hpp>
#include <kembed/core/reference.hpp>
#include <kembed/core/validate.hpp>

#include <cstring>

namespace kembed::reference {
namespace {

void check_ids(Config const& config, IdsRef const& ids) {
  auto const t = check_ids_shape(ids.shape());
  auto const bad = first_id_out_of_range(ids, config.num_embeddings);
  if (bad < t) throw_id_out_of_range("ids", bad, ids.at(bad), config.num_embeddings);
}

std::vector<float> start(Config const& config, float const* carry) {
  std::vector<float> g(static_cast<std::size_t>(config.num_embeddings * config.embedding_dim), 0.0f);
  if (carry) std::memcpy(g.data(), carry, g.size() * sizeof(float));
  return g;
}

void zero_padding_row(Config const& config, std::vector<float>& g) {
  if (!config.has_padding()) return;
  auto const d = config.embedding_dim;
  for (std::int64_t c = 0; c < d; ++c) g[config.padding_idx * d + c] = +0.0f;
}

}  // namespace

std::vector<float> forward(float const* weight, Config const& config, IdsRef const& ids) {
  check_ids(config, ids);
  auto const t = ids.size();
  auto const d = config.embedding_dim;
  std::vector<float> y(static_cast<std::size_t>(t * d));
  for (std::int64_t p = 0; p < t; ++p) std::memcpy(&y[p * d], &weight[ids.at(p) * d], d * sizeof(float));
  return y;
}

std::vector<float> backward_identical(Config const& config, IdsRef const& ids, float const* dy, float const* carry) {
  check_ids(config, ids);
  auto const t = ids.size();
  auto const d = config.embedding_dim;
  auto g = start(config, carry);
  // Positions ascending; each term is one binary32 addition onto the row's running sum.
  for (std::int64_t p = 0; p < t; ++p) {
    auto const r = ids.at(p);
    for (std::int64_t c = 0; c < d; ++c) g[r * d + c] = g[r * d + c] + dy[p * d + c];
  }
  zero_padding_row(config, g);
  return g;
}

float pairwise_sum(float const* terms, std::int64_t n) {
  if (n == 1) return terms[0];
  std::int64_t m = 1;
  while (m * 2 < n) m *= 2;
  return pairwise_sum(terms, m) + pairwise_sum(terms + m, n - m);
}

std::vector<float> backward_deterministic(Config const& config, IdsRef const& ids, float const* dy,
                                          float const* carry) {
  check_ids(config, ids);
  auto const t = ids.size();
  auto const v = config.num_embeddings;
  auto const d = config.embedding_dim;
  auto g = start(config, carry);
  std::vector<std::vector<std::int64_t>> positions(static_cast<std::size_t>(v));
  for (std::int64_t p = 0; p < t; ++p) positions[ids.at(p)].push_back(p);
  std::vector<float> terms;
  for (std::int64_t r = 0; r < v; ++r) {
    auto const& ps = positions[r];
    if (ps.empty()) continue;
    terms.resize(ps.size());
    for (std::int64_t c = 0; c < d; ++c) {
      for (std::size_t k = 0; k < ps.size(); ++k) terms[k] = dy[ps[k] * d + c];
      g[r * d + c] = g[r * d + c] + pairwise_sum(terms.data(), static_cast<std::int64_t>(terms.size()));
    }
  }
  zero_padding_row(config, g);
  return g;
}

std::vector<std::int64_t> counts(std::int64_t num_embeddings, IdsRef const& ids) {
  std::vector<std::int64_t> n(static_cast<std::size_t>(num_embeddings), 0);
  auto const t = ids.size();
  for (std::int64_t p = 0; p < t; ++p) {
    auto const r = ids.at(p);
    if (r < 0 || r >= num_embeddings) throw_id_out_of_range("ids", p, r, num_embeddings);
    ++n[r];
  }
  return n;
}

}  // namespace kembed::reference
