#pragma once
// A row-sparse gradient: the rows it holds, ascending and unique, and their values.
// Every row it does not list is +0.0 in the dense (V, d) gradient it stands for,
// and every listed row's values are bit for bit that row of the dense gradient.
#include <cstdint>
#include <vector>

namespace kembed {

struct SparseGradient {
  std::int64_t num_embeddings = 0, embedding_dim = 0;
  std::vector<std::int64_t> rows;    // ascending, unique, in [0, num_embeddings)
  std::vector<float> values;         // rows.size() x embedding_dim, row-major
  std::vector<std::int64_t> counts;  // each listed row's occurrences among the call's ids (0: from the carry)

  std::int64_t size() const noexcept { return static_cast<std::int64_t>(rows.size()); }
};

// Throws InvalidArgument (naming `argument`) unless `g` is a well-formed sparse
// gradient of a (V, d) table: sizes agree, rows ascending and unique within [0, V),
// every value finite, counts >= 0.
void check_sparse(char const* argument, SparseGradient const& g, std::int64_t num_embeddings,
                  std::int64_t embedding_dim);

// The dense (V, d) gradient `g` stands for (unlisted rows +0.0), and its counts.
std::vector<float> to_dense(SparseGradient const& g);
std::vector<std::int64_t> dense_counts(SparseGradient const& g);

// The rows of a dense (V, d) gradient that differ from +0.0 in any bit or have a
// count (`counts` may be null): to_dense of the result gives `values` back exactly.
SparseGradient to_sparse(float const* values, std::int64_t const* counts, std::int64_t num_embeddings,
                         std::int64_t embedding_dim);

}  // namespace kembed
