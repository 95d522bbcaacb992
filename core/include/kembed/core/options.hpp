#pragma once
// The layer's settings, as torch.nn.Embedding names them, and their validation
// into a normalised Config that kernels can trust.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kembed {

// How the identical backward groups each row's positions. A speed choice only:
// every plan gives the same bits. `bucket` is kembed's addition to the contract's
// two (docs/DESIGN.md).
enum class Plan { scan, sort, bucket, automatic };
// What the backward promises about its bits (docs/DESIGN.md).
enum class Mode { identical, deterministic, fast };
// scale_grad_by_freq: each term of a row scaled by 1 / the row's count among this
// call's ids (`call`, as torch) or among the whole batch's (`batch`, given to each
// call, so that microbatches with a carry reproduce the unsplit gradient).
enum class FreqScale { none, call, batch };

// `auto` picks `sort` when V * T reaches this, else `scan` (CONTRACT.md, Plans).
inline constexpr std::int64_t auto_sort_threshold = std::int64_t{1} << 26;

std::string_view to_string(Plan plan) noexcept;  // "scan", "sort", "bucket", "auto"
std::string_view to_string(Mode mode) noexcept;  // "identical", "deterministic", "fast"
std::string_view to_string(FreqScale scale) noexcept;  // "none", "call", "batch"
Plan parse_plan(std::string_view text);          // throws InvalidArgument naming "plan"
Mode parse_mode(std::string_view text);          // throws InvalidArgument naming "mode"
FreqScale parse_freq_scale(std::string_view text);  // throws InvalidArgument naming "scale_grad_by_freq"

struct Options {
  std::optional<std::int64_t> padding_idx;  // negative counts from the end
  Plan plan = Plan::automatic;
  Mode mode = Mode::identical;
  // As torch: the forward renormalises, in the layer's own table, each referenced
  // row whose norm_type-norm exceeds max_norm (docs/CONTRACT.md, max_norm).
  std::optional<double> max_norm;
  double norm_type = 2.0;  // > 0, or +inf; only with max_norm
  FreqScale scale_grad_by_freq = FreqScale::none;
  // The gradient's preferred form: row-sparse (rows, values). Embedding has both
  // backward() and backward_sparse() either way; the batch job and files follow it.
  bool sparse = false;
};

// Options checked against the table's shape, padding_idx made non-negative.
struct Config {
  std::int64_t num_embeddings = 0;
  std::int64_t embedding_dim = 0;
  std::int64_t padding_idx = -1;  // -1: no padding row
  Plan plan = Plan::automatic;
  Mode mode = Mode::identical;
  double max_norm = 0;  // 0: no renormalisation (a given max_norm is > 0)
  double norm_type = 2.0;
  FreqScale scale_grad_by_freq = FreqScale::none;
  bool sparse = false;

  bool has_padding() const noexcept { return padding_idx >= 0; }
  bool renormalises() const noexcept { return max_norm > 0; }
  bool scales() const noexcept { return scale_grad_by_freq != FreqScale::none; }
};

// Validates V, d and every option; throws InvalidArgument.
Config make_config(std::int64_t num_embeddings, std::int64_t embedding_dim, Options const& options);
// The Options that make_config turns back into `config`: every setting, none dropped.
Options options_of(Config const& config);

// One setting in which two configs differ: its name as table files spell it, and
// each side's value as text ("none" where a setting is absent).
struct SettingDifference {
  std::string name, a, b;
  std::string text() const { return name + ": " + a + " / " + b; }  // "max_norm: none / 0.5"
};
// Which settings `differences` compares: all of them (two tables), or those a
// gradient's bits depend on (two runs, a checkpoint and the job resuming it):
// padding_idx, mode and scale_grad_by_freq; not the plan (a speed choice), sparse
// (the form the gradient is kept in), nor max_norm and norm_type (the forward's).
enum class Settings { all, gradient };
// Each setting of `which`, in Options' order, named as table files name it, with its
// value as text: what a viewer shows and what `differences` compares.
std::vector<std::pair<std::string, std::string>> settings_text(Config const& config, Settings which = Settings::all);
// Every setting of `which` in which a and b differ, in Options' order. The shape is
// not a setting: callers compare num_embeddings and embedding_dim themselves.
std::vector<SettingDifference> differences(Config const& a, Config const& b, Settings which = Settings::all);

// What one backward call folds, as Embedding::path_for weighs it: its positions, the
// rows of dy its terms read (the positions, or a bag call's bags), whether it continues
// its output in place (the carry is the output) and whether each term has its own
// factor (a mean or weighted bag's).
struct CallShape {
  std::int64_t positions = 0;
  std::int64_t dy_rows = 0;
  bool in_place = false;
  bool factors = false;
  bool argmax = false;  // a max bag call: each (bag, column) has one term that is not -0.0
};

// The path one backward call takes, decided in one place (Embedding::path_for): what
// backward dispatches on, the profiling region it names, and what the job, kembed-bench
// and kembed-demo report.
struct BackwardPath {
  Mode mode = Mode::identical;  // as run: mode fast with scale_grad_by_freq runs identical
  Plan plan = Plan::sort;       // scan, sort or bucket; mode deterministic sorts; unused in mode fast
  bool scaled = false;          // terms with factors: the sort, whose index has each row's count first
  bool freq = false;            // scale_grad_by_freq among them (a mean or weighted bag scales without it)
  bool listed = false;          // in place on few rows: the sort over the rows the call lists
  bool on_caller = false;       // listed, and small enough for the calling thread
  bool argmax = false;          // a max bag call adding each winning term to its row, bags in order
  // "scan", "sort" or "bucket" (the plan), "atomic" (mode fast) or "argmax": a run
  // file's plan_used.
  std::string_view plan_name() const noexcept {
    return argmax ? "argmax" : mode == Mode::fast ? "atomic" : to_string(plan);
  }
};

// The plan that runs for T positions: `automatic` resolved by V * T.
Plan resolve_plan(Plan plan, std::int64_t num_embeddings, std::int64_t positions) noexcept;

}  // namespace kembed
