#pragma once
// The layer's settings, as torch.nn.Embedding names them, and their validation
// into a normalised Config that kernels can trust.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kembed {

// How the identical backward groups each row's positions. A speed choice only:
// every plan gives the same bits. `bucket` is kembed's addition to the contract's
// two (docs/DESIGN.md).
enum class Plan { scan, sort, bucket, automatic };
// What the backward promises about its bits (docs/DESIGN.md).
enum class Mode { identical, deterministic, fast };

// `auto` picks `sort` when V * T reaches this, else `scan` (CONTRACT.md, Plans).
inline constexpr std::int64_t auto_sort_threshold = std::int64_t{1} << 26;

std::string_view to_string(Plan plan) noexcept;  // "scan", "sort", "bucket", "auto"
std::string_view to_string(Mode mode) noexcept;  // "identical", "deterministic", "fast"
Plan parse_plan(std::string_view text);          // throws InvalidArgument naming "plan"
Mode parse_mode(std::string_view text);          // throws InvalidArgument naming "mode"

struct Options {
  std::optional<std::int64_t> padding_idx;  // negative counts from the end
  Plan plan = Plan::automatic;
  Mode mode = Mode::identical;
  // Present for torch parity and refused until an issue implements them.
  std::optional<double> max_norm;
  double norm_type = 2.0;
  bool scale_grad_by_freq = false;
  bool sparse = false;
};

// Options checked against the table's shape, padding_idx made non-negative.
struct Config {
  std::int64_t num_embeddings = 0;
  std::int64_t embedding_dim = 0;
  std::int64_t padding_idx = -1;  // -1: no padding row
  Plan plan = Plan::automatic;
  Mode mode = Mode::identical;

  bool has_padding() const noexcept { return padding_idx >= 0; }
};

// Validates V, d and every option; throws InvalidArgument or Unsupported.
Config make_config(std::int64_t num_embeddings, std::int64_t embedding_dim, Options const& options);

// The plan that runs for T positions: `automatic` resolved by V * T.
Plan resolve_plan(Plan plan, std::int64_t num_embeddings, std::int64_t positions) noexcept;

}  // namespace kembed
