#include <kembed/core/error.hpp>
#include <kembed/core/sparse.hpp>
#include <kembed/core/validate.hpp>

#include <cstring>
#include <string>

namespace kembed {

void check_sparse(char const* argument, SparseGradient const& g, std::int64_t num_embeddings,
                  std::int64_t embedding_dim) {
  std::string const name = argument;
  if (g.num_embeddings != num_embeddings || g.embedding_dim != embedding_dim)
    throw InvalidArgument(argument, name + " is for a (" + std::to_string(g.num_embeddings) + ", " +
                                        std::to_string(g.embedding_dim) + ") table, want (" +
                                        std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim) + ")");
  auto const n = g.size();
  if (std::int64_t(g.values.size()) != n * embedding_dim || std::int64_t(g.counts.size()) != n)
    throw InvalidArgument(argument, name + " lists " + std::to_string(n) + " rows but holds " +
                                        std::to_string(g.values.size()) + " values and " +
                                        std::to_string(g.counts.size()) + " counts; want " +
                                        std::to_string(n * embedding_dim) + " and " + std::to_string(n));
  for (std::int64_t i = 0; i < n; ++i) {
    auto const r = g.rows[i];
    if (r < 0 || r >= num_embeddings)
      throw InvalidArgument(argument, name + ".rows[" + std::to_string(i) + "] = " + std::to_string(r) +
                                          " is outside [0, " + std::to_string(num_embeddings) + ")");
    if (i > 0 && r <= g.rows[i - 1])
      throw InvalidArgument(argument, name + ".rows must be ascending and unique: rows[" + std::to_string(i - 1) +
                                          "] = " + std::to_string(g.rows[i - 1]) + ", rows[" + std::to_string(i) +
                                          "] = " + std::to_string(r));
    if (g.counts[i] < 0)
      throw InvalidArgument(argument, name + ".counts[" + std::to_string(i) + "] = " + std::to_string(g.counts[i]) +
                                          " is negative");
  }
  auto const bad = first_non_finite(g.values.data(), n * embedding_dim);
  if (bad < n * embedding_dim) throw_non_finite(argument, bad, g.values[bad], embedding_dim, "listed row");
}

std::vector<float> to_dense(SparseGradient const& g) {
  auto const d = g.embedding_dim;
  std::vector<float> out(static_cast<std::size_t>(g.num_embeddings * d), 0.0f);
  for (std::int64_t i = 0; i < g.size(); ++i)
    std::memcpy(&out[g.rows[i] * d], &g.values[i * d], static_cast<std::size_t>(d) * sizeof(float));
  return out;
}

std::vector<std::int64_t> dense_counts(SparseGradient const& g) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(g.num_embeddings), 0);
  for (std::int64_t i = 0; i < g.size(); ++i) out[g.rows[i]] = g.counts[i];
  return out;
}

SparseGradient to_sparse(float const* values, std::int64_t const* counts, std::int64_t num_embeddings,
                         std::int64_t embedding_dim) {
  SparseGradient g;
  g.num_embeddings = num_embeddings;
  g.embedding_dim = embedding_dim;
  auto const d = embedding_dim;
  for (std::int64_t r = 0; r < num_embeddings; ++r) {
    bool keep = counts && counts[r] > 0;
    for (std::int64_t c = 0; c < d && !keep; ++c) {
      std::uint32_t bits;
      std::memcpy(&bits, &values[r * d + c], sizeof bits);
      keep = bits != 0;  // -0.0 too: the dense gradient's bits come back exactly
    }
    if (!keep) continue;
    g.rows.push_back(r);
    g.values.insert(g.values.end(), values + r * d, values + (r + 1) * d);
    g.counts.push_back(counts ? counts[r] : 0);
  }
  return g;
}

}  // namespace kembed
