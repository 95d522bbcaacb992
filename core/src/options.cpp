#include <kembed/core/error.hpp>
#include <kembed/core/options.hpp>
#include <kembed/core/shape.hpp>

#include <sstream>

namespace kembed {

std::string_view to_string(Plan plan) noexcept {
  switch (plan) {
    case Plan::scan:
      return "scan";
    case Plan::sort:
      return "sort";
    case Plan::bucket:
      return "bucket";
    case Plan::automatic:
      return "auto";
  }
  return "?";
}

std::string_view to_string(Mode mode) noexcept {
  switch (mode) {
    case Mode::identical:
      return "identical";
    case Mode::deterministic:
      return "deterministic";
    case Mode::fast:
      return "fast";
  }
  return "?";
}

Plan parse_plan(std::string_view text) {
  for (auto plan : {Plan::scan, Plan::sort, Plan::bucket, Plan::automatic})
    if (text == to_string(plan)) return plan;
  throw InvalidArgument("plan", "plan must be 'auto', 'scan', 'sort' or 'bucket', got '" + std::string(text) + "'");
}

Mode parse_mode(std::string_view text) {
  for (auto mode : {Mode::identical, Mode::deterministic, Mode::fast})
    if (text == to_string(mode)) return mode;
  throw InvalidArgument("mode", "mode must be 'identical', 'deterministic' or 'fast', got '" + std::string(text) + "'");
}

Config make_config(std::int64_t num_embeddings, std::int64_t embedding_dim, Options const& options) {
  if (num_embeddings < 1)
    throw InvalidArgument("num_embeddings", "num_embeddings must be at least 1, got " + std::to_string(num_embeddings));
  if (embedding_dim < 1)
    throw InvalidArgument("embedding_dim", "embedding_dim must be at least 1, got " + std::to_string(embedding_dim));
  checked_mul(num_embeddings, embedding_dim, "weight");
  if (options.max_norm) {
    throw Unsupported("max_norm",
                      "max_norm is refused: torch renormalises the gathered rows of the table in place "
                      "during the forward, a write to the table that the contract's forward never makes");
  }
  if (options.norm_type != 2.0) {
    std::ostringstream msg;
    msg << "norm_type must be 2.0 (it has no effect without max_norm, which is refused), got " << options.norm_type;
    throw InvalidArgument("norm_type", msg.str());
  }
  if (options.scale_grad_by_freq) {
    throw Unsupported("scale_grad_by_freq",
                      "scale_grad_by_freq=true is refused: the contract's backward is the plain ascending "
                      "fold, with no division by the row's frequency");
  }
  if (options.sparse) {
    throw Unsupported("sparse", "sparse=true is refused: the backward returns the dense (V, d) gradient only");
  }
  Config config;
  config.num_embeddings = num_embeddings;
  config.embedding_dim = embedding_dim;
  config.plan = options.plan;
  config.mode = options.mode;
  if (options.padding_idx) {
    auto pad = *options.padding_idx;
    if (pad < -num_embeddings || pad >= num_embeddings) {
      throw InvalidArgument("padding_idx", "padding_idx must be within [" + std::to_string(-num_embeddings) + ", " +
                                               std::to_string(num_embeddings) + "), got " + std::to_string(pad));
    }
    config.padding_idx = pad < 0 ? num_embeddings + pad : pad;
  }
  return config;
}

Plan resolve_plan(Plan plan, std::int64_t num_embeddings, std::int64_t positions) noexcept {
  if (plan != Plan::automatic) return plan;
  // V * T compared without overflow: V >= threshold / T  <=>  V * T >= threshold.
  auto const need = (auto_sort_threshold + positions - 1) / positions;
  return num_embeddings >= need ? Plan::sort : Plan::scan;
}

}  // namespace kembed
