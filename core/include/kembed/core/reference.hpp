#pragma once
// The contract written as plainly as possible: sequential loops in the order the
// contract states. Tests use these as the oracle for every kernel; nothing in the
// library calls them on a hot path.
#include <cstdint>
#include <vector>

#include <kembed/core/arrays.hpp>
#include <kembed/core/options.hpp>

namespace kembed::reference {

// y[p, :] = W[ids[p], :] for the (V, d) table `weight`; T * d floats.
std::vector<float> forward(float const* weight, Config const& config, IdsRef const& ids);

// Mode `identical`: acc = carry[r, c] (or +0.0); for p ascending with ids[p] == r:
// acc = acc + dy[p, c]; the padding row is +0.0. `carry` may be null.
std::vector<float> backward_identical(Config const& config, IdsRef const& ids, float const* dy, float const* carry);

// Mode `deterministic`: G[r, c] = base + pairwise_sum(dy[p, c] for p ascending with
// ids[p] == r), base = carry[r, c] (or +0.0); a row with no positions keeps base.
std::vector<float> backward_deterministic(Config const& config, IdsRef const& ids, float const* dy, float const* carry);

// Occurrences of each row among the ids (the padding row included).
std::vector<std::int64_t> counts(std::int64_t num_embeddings, IdsRef const& ids);

// The deterministic mode's tree: n == 1 is the term itself; otherwise split after
// m = the largest power of two below n and return sum(first m) + sum(the rest).
// Defined recursively here; the kernels compute the same tree by a stack.
float pairwise_sum(float const* terms, std::int64_t n);

}  // namespace kembed::reference
