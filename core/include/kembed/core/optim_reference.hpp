#pragma once
// The update step written as plainly as possible (docs/CONTRACT.md, "Updates"): one
// element after another, each the contract's sequence of binary32 operations. Tests
// use it as the oracle for every update kernel.
#include <cstdint>

#include <kembed/core/optim.hpp>
#include <kembed/core/sparse.hpp>

namespace kembed::reference {

// One step on the (V, d) table `weight` with the dense gradient `grad` (V x d):
// every row. Checks the settings, the state and the gradient first (InvalidArgument,
// nothing changed), then advances state.step.
void optim_step(OptimSettings const& settings, float* weight, std::int64_t num_embeddings, std::int64_t embedding_dim,
                float const* grad, OptimState& state);

// The same with a row-sparse gradient: only the rows it lists, and their state.
void optim_step(OptimSettings const& settings, float* weight, std::int64_t num_embeddings, std::int64_t embedding_dim,
                SparseGradient const& grad, OptimState& state);

}  // namespace kembed::reference
