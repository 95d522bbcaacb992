#pragma once
// The contract written as plainly as possible: sequential loops in the order the
// contract states. Tests use these as the oracle for every kernel; nothing in the
// library calls them on a hot path.
#include <cstdint>
#include <vector>

#include <kembed/core/arrays.hpp>
#include <kembed/core/options.hpp>
#include <kembed/core/sparse.hpp>

namespace kembed::reference {

// y[p, :] = W[ids[p], :] for the (V, d) table `weight`; T * d floats.
std::vector<float> forward(float const* weight, Config const& config, IdsRef const& ids);

// Mode `identical`: acc = carry[r, c] (or +0.0); for p ascending with ids[p] == r:
// acc = acc + dy[p, c]; the padding row is +0.0. `carry` may be null.
// With scale_grad_by_freq, s = float(1.0 / n) for the row's count n (among `ids`
// for `call`, batch_counts[r] for `batch`) and each term is acc = fmaf(dy[p, c], s, acc).
std::vector<float> backward_identical(Config const& config, IdsRef const& ids, float const* dy, float const* carry,
                                      std::int64_t const* batch_counts = nullptr);

// Mode `deterministic`: G[r, c] = base + pairwise_sum(dy[p, c] for p ascending with
// ids[p] == r), base = carry[r, c] (or +0.0); a row with no positions keeps base.
// With scale_grad_by_freq the terms are dy[p, c] * s, each rounded to binary32.
std::vector<float> backward_deterministic(Config const& config, IdsRef const& ids, float const* dy, float const* carry,
                                          std::int64_t const* batch_counts = nullptr);

// The mode's dense backward, listed as a sparse gradient: the rows `ids` reference
// and the carry's rows, each bit for bit that row of the dense gradient.
SparseGradient backward_sparse(Config const& config, IdsRef const& ids, float const* dy,
                               SparseGradient const* carry, std::int64_t const* batch_counts = nullptr);

// The norm max_norm compares (docs/CONTRACT.md): binary64, columns ascending from
// +0.0: p = 1 sums |w|; p = 2 sums w * w (each product exact) and takes sqrt; p = inf
// is the largest |w|; any other p sums pow(|w|, p) and takes pow(sum, 1 / p).
double row_norm(float const* row, std::int64_t d, double norm_type);

// torch's embedding_renorm_: every row `ids` reference whose norm exceeds max_norm
// is multiplied, once, by float(max_norm / (norm + 1e-7)) (one binary32 product per
// value). The padding row too, as torch. `weight` is the (V, d) table, changed in place.
void renorm(float* weight, Config const& config, IdsRef const& ids);

// Occurrences of each row among the ids (the padding row included).
std::vector<std::int64_t> counts(std::int64_t num_embeddings, IdsRef const& ids);

// The deterministic mode's tree: n == 1 is the term itself; otherwise split after
// m = the largest power of two below n and return sum(first m) + sum(the rest).
// Defined recursively here; the kernels compute the same tree by a stack.
float pairwise_sum(float const* terms, std::int64_t n);

}  // namespace kembed::reference
