#pragma once
// EmbeddingBag's contract written as plainly as possible (docs/CONTRACT.md, "Bags"):
// sequential loops in the order the contract states, the tests' oracle. The inputs
// are checked as the layer checks them; nothing in the library calls these.
#include <cstdint>
#include <vector>

#include <kembed/core/arrays.hpp>
#include <kembed/core/bags.hpp>

namespace kembed::reference {

// One bag call's inputs: the ids, their bags and optional per-sample weights (T).
struct BagCall {
  IdsRef ids;
  Bags bags;
  float const* weights = nullptr;
};

// (B, d): each bag's positions ascending, the padding row's left out. sum: from +0.0,
// acc + row (weighted: fmaf(row, w, acc)); mean: the sum / float(n), n the bag's
// positions left; max: per column the first position's value, replaced by a larger
// one only (the lowest position wins a tie). A bag with no positions left is +0.0.
// With max_norm, renormalise the table first (reference::renorm over call.ids).
std::vector<float> bag_forward(float const* weight, BagConfig const& config, BagCall const& call);

// Mode max: the position each (bag, column) took its value from, -1 for an empty bag.
std::vector<std::int64_t> bag_argmax(float const* weight, BagConfig const& config, BagCall const& call);

// Each position's factor on its bag's dy, as a binary64 value rounded once to
// binary32: 1 / n_r with scale_grad_by_freq, then / n_b for mean, then * w for
// per-sample weights. Empty where no factor applies (plain sum, max).
std::vector<float> bag_term_scales(BagConfig const& config, BagCall const& call, std::int64_t const* batch_counts);

// Mode identical: G[r, c] = carry or +0.0, then for p ascending with ids[p] == r
// (not the padding row): acc + dy[b(p), c], or fmaf(dy[b(p), c], s_p, acc) where a
// factor applies; for max, dy[b(p), c] where p won the (bag, column), else -0.0
// (which changes nothing). `weight` is read for max only; carry and batch_counts
// may be null.
std::vector<float> bag_backward_identical(float const* weight, BagConfig const& config, BagCall const& call,
                                          float const* dy, float const* carry,
                                          std::int64_t const* batch_counts = nullptr);

// Mode deterministic: G[r, c] = base + pairwise_sum(the row's terms in position
// order), a term being identical's (-0.0 included), times s_p rounded where a factor
// applies.
std::vector<float> bag_backward_deterministic(float const* weight, BagConfig const& config, BagCall const& call,
                                              float const* dy, float const* carry,
                                              std::int64_t const* batch_counts = nullptr);

// The gradient of per_sample_weights (T): for p, acc = +0.0, then for c ascending
// acc = fmaf(dy[b(p), c], W[ids[p], c], acc); +0.0 at the padding row's positions.
std::vector<float> bag_weights_grad(float const* weight, BagConfig const& config, BagCall const& call, float const* dy);

}  // namespace kembed::reference
