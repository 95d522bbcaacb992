#include <kembed/core/error.hpp>
#include <kembed/core/reference.hpp>
#include <kembed/core/validate.hpp>

#include <algorithm>
#include <cmath>
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

// Each row's scale_grad_by_freq factor, float(1.0 / count); empty when not scaling.
std::vector<float> scales(Config const& config, IdsRef const& ids, std::int64_t const* batch_counts);

}  // namespace

std::vector<float> forward(float const* weight, Config const& config, IdsRef const& ids) {
  check_ids(config, ids);
  auto const t = ids.size();
  auto const d = config.embedding_dim;
  std::vector<float> y(static_cast<std::size_t>(t * d));
  for (std::int64_t p = 0; p < t; ++p) std::memcpy(&y[p * d], &weight[ids.at(p) * d], d * sizeof(float));
  return y;
}

std::vector<float> backward_identical(Config const& config, IdsRef const& ids, float const* dy, float const* carry,
                                      std::int64_t const* batch_counts) {
  check_ids(config, ids);
  auto const t = ids.size();
  auto const d = config.embedding_dim;
  auto g = start(config, carry);
  auto const scale = scales(config, ids, batch_counts);
  // Positions ascending; each term is one binary32 addition onto the row's running
  // sum (a fused multiply-add with scale_grad_by_freq, as torch's CPU backward).
  for (std::int64_t p = 0; p < t; ++p) {
    auto const r = ids.at(p);
    if (scale.empty()) {
      for (std::int64_t c = 0; c < d; ++c) g[r * d + c] = g[r * d + c] + dy[p * d + c];
    } else {
      for (std::int64_t c = 0; c < d; ++c) g[r * d + c] = std::fmaf(dy[p * d + c], scale[r], g[r * d + c]);
    }
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
                                          float const* carry, std::int64_t const* batch_counts) {
  check_ids(config, ids);
  auto const scale = scales(config, ids, batch_counts);
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
      for (std::size_t k = 0; k < ps.size(); ++k)
        terms[k] = scale.empty() ? dy[ps[k] * d + c] : dy[ps[k] * d + c] * scale[r];
      g[r * d + c] = g[r * d + c] + pairwise_sum(terms.data(), static_cast<std::int64_t>(terms.size()));
    }
  }
  zero_padding_row(config, g);
  return g;
}

namespace {
std::vector<float> scales(Config const& config, IdsRef const& ids, std::int64_t const* batch_counts) {
  if (!config.scales()) return {};
  auto const n = config.scale_grad_by_freq == FreqScale::batch
                     ? std::vector<std::int64_t>(batch_counts, batch_counts + config.num_embeddings)
                     : counts(config.num_embeddings, ids);
  std::vector<float> s(n.size(), 0.0f);
  for (std::size_t r = 0; r < n.size(); ++r)
    if (n[r] > 0) s[r] = static_cast<float>(1.0 / static_cast<double>(n[r]));
  return s;
}
}  // namespace

SparseGradient backward_sparse(Config const& config, IdsRef const& ids, float const* dy,
                               SparseGradient const* carry, std::int64_t const* batch_counts) {
  std::vector<float> dense_carry;
  if (carry) dense_carry = to_dense(*carry);
  auto const dense = config.mode == Mode::deterministic
                         ? backward_deterministic(config, ids, dy, carry ? dense_carry.data() : nullptr, batch_counts)
                         : backward_identical(config, ids, dy, carry ? dense_carry.data() : nullptr, batch_counts);
  auto const n = counts(config.num_embeddings, ids);
  SparseGradient g;
  g.num_embeddings = config.num_embeddings;
  g.embedding_dim = config.embedding_dim;
  std::vector<char> listed(static_cast<std::size_t>(config.num_embeddings), 0);
  if (carry)
    for (auto r : carry->rows) listed[r] = 1;
  auto const d = config.embedding_dim;
  for (std::int64_t r = 0; r < config.num_embeddings; ++r) {
    if (!listed[r] && n[r] == 0) continue;
    g.rows.push_back(r);
    g.values.insert(g.values.end(), dense.begin() + r * d, dense.begin() + (r + 1) * d);
    g.counts.push_back(n[r]);
  }
  return g;
}

double row_norm(float const* row, std::int64_t d, double norm_type) {
  double acc = 0.0;
  if (std::isinf(norm_type)) {
    for (std::int64_t c = 0; c < d; ++c) acc = std::max(acc, static_cast<double>(std::fabs(row[c])));
    return acc;
  }
  for (std::int64_t c = 0; c < d; ++c) {
    double const w = std::fabs(static_cast<double>(row[c]));
    acc += norm_type == 1.0 ? w : norm_type == 2.0 ? w * w : std::pow(w, norm_type);
  }
  return norm_type == 1.0 ? acc : norm_type == 2.0 ? std::sqrt(acc) : std::pow(acc, 1.0 / norm_type);
}

void renorm(float* weight, Config const& config, IdsRef const& ids) {
  check_ids(config, ids);
  if (!config.renormalises()) return;
  auto const d = config.embedding_dim;
  auto const n = counts(config.num_embeddings, ids);
  for (std::int64_t r = 0; r < config.num_embeddings; ++r) {
    if (n[r] == 0) continue;
    float* row = weight + r * d;
    double const norm = row_norm(row, d, config.norm_type);
    if (!(norm > config.max_norm)) continue;
    float const scale = static_cast<float>(config.max_norm / (norm + 1e-7));
    for (std::int64_t c = 0; c < d; ++c) row[c] = row[c] * scale;
  }
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
