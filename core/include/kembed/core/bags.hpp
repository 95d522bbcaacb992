#pragma once
// EmbeddingBag's settings and bags, as torch.nn.EmbeddingBag names them, checked
// into a form kernels can trust (docs/CONTRACT.md, "Bags").
#include <cstdint>
#include <string_view>
#include <vector>

#include <kembed/core/arrays.hpp>
#include <kembed/core/options.hpp>

namespace kembed {

// How a bag's rows become one output row: torch's `mode`.
enum class Pooling { sum, mean, max };
std::string_view to_string(Pooling pooling) noexcept;  // "sum", "mean", "max"
Pooling parse_pooling(std::string_view text);          // throws InvalidArgument naming "mode"

struct BagOptions {
  // What an EmbeddingBag shares with an Embedding: padding_idx, plan, the numeric
  // mode, max_norm, norm_type, scale_grad_by_freq and sparse, with their meanings.
  Options embedding;
  Pooling pooling = Pooling::mean;   // torch's default
  bool include_last_offset = false;  // offsets has B + 1 entries, the last T (CSR)
};

struct BagConfig {
  Config embedding;
  Pooling pooling = Pooling::mean;
  bool include_last_offset = false;
};

// Validates V, d and every option (make_config's checks, and max refusing
// scale_grad_by_freq, as torch); throws InvalidArgument.
BagConfig make_bag_config(std::int64_t num_embeddings, std::int64_t embedding_dim, BagOptions const& options);

// B bags over T positions: bag b holds positions [bounds[b], bounds[b + 1]), in order;
// bounds has B + 1 entries, from 0 to T. A bag may be empty.
struct Bags {
  std::vector<std::int64_t> bounds{0};
  std::int64_t count() const noexcept { return std::int64_t(bounds.size()) - 1; }
  std::int64_t positions() const noexcept { return bounds.back(); }
  std::int64_t begin(std::int64_t b) const { return bounds[std::size_t(b)]; }
  std::int64_t end(std::int64_t b) const { return bounds[std::size_t(b) + 1]; }
};

// The bags of a call, by torch's rules: 2-D ids (B, L) are B bags of L positions and
// take no offsets; 1-D ids take offsets (int32 or int64, 1-D), each bag starting at
// one, the first 0, none decreasing, none past T; with include_last_offset the last
// is T and ends the last bag. Anything else is refused by name ("ids", "offsets").
Bags make_bags(Shape const& ids_shape, IdsRef const* offsets, bool include_last_offset);
// The checks make_bags makes of 1-D offsets over T ids, without copying them: the
// number of bags (bag b holds [offsets[b], offsets[b + 1]), the last ending at T).
std::int64_t check_offsets(IdsRef const& offsets, std::int64_t t, bool include_last_offset);

// per_sample_weights, if given: the ids' shape, finite, and only with pooling sum.
void check_bag_weights(BagConfig const& config, Shape const& ids_shape, FloatsRef const& weights);
// dy of a bag call: (B, d).
void check_bag_dy(Shape const& dy_shape, std::int64_t bags, std::int64_t embedding_dim);

}  // namespace kembed
