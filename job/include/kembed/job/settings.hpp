#pragma once
// What a batch job (kembed/job/backward.hpp, forward.hpp) is asked to do, and what it reports.
#include <kembed/core/bags.hpp>
#include <kembed/core/optim.hpp>
#include <kembed/core/options.hpp>
#include <kembed/io/sha256.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kembed::job {

// How many ranks own the gradient's rows while they fold (the files always hold
// them in row order): `spread` (row mod P, the hot rows placed by count, after a pass
// over the ids) or `ranges` (contiguous, as the files; no pass). One process owns all.
enum class RowOwners { spread, ranges };
inline std::string_view to_string(RowOwners o) {
  return o == RowOwners::spread ? "spread" : "ranges";
}
RowOwners parse_row_owners(std::string const& text, std::string const& setting = "owners");

// What the job does; the CLI fills it from its options.
struct BackwardSettings {
  std::string table, batch, out;
  std::string ids_dataset = "ids", dy_dataset = "dy";
  std::int64_t microbatch = 65536;
  std::optional<Plan> plan;                 // default: the table file's
  std::optional<Mode> mode;                 // default: the table file's
  std::optional<FreqScale> scale_grad_by_freq;  // default: the table file's
  std::optional<std::int64_t> padding_idx;  // overrides the table file's
  bool no_padding = false;
  bool sparse = false;  // a row-sparse run file (also when the table file asks for one)
  // A bag batch's pooling (default sum); a batch of positions refuses one. A bag job
  // counts microbatch and checkpoint_every in bags.
  std::optional<Pooling> pooling;
  std::int64_t checkpoint_every = 0;  // positions (bags); 0: no checkpoints
  std::string checkpoint;             // default: <out>.checkpoint
  bool resume = false;
  bool deflate = false;
  // How the run file and checkpoints fingerprint the inputs (a resume keeps its
  // checkpoint's): 16 MiB chunks hashed by every rank, or whole files by the first.
  io::Fingerprint fingerprint = io::Fingerprint::chunks;
  RowOwners owners = RowOwners::spread;   // under MPI
  std::string run_id;                     // default: time, process and a random tag
  std::vector<std::string> command_line;  // recorded in the run file's provenance
};

// What the job did, the same on every rank.
struct BackwardReport {
  std::string out, gradient_sha256, plan_used, mode, backend;
  std::int64_t rows = 0, cols = 0, positions = 0, microbatches = 0, microbatch_size = 0, resumed_from = 0;
  std::string pooling;    // a bag job's ("sum", "mean", "max"), else empty
  std::int64_t bags = 0;  // a bag job's B (microbatches and resumed_from then count bags)
  int threads = 0, ranks = 1;
  std::int64_t bytes_exchanged = 0;  // by all ranks, to other ranks (ids and dy rows)
  double exchange_seconds = 0;       // the first rank's share of backward_seconds spent exchanging
  double read_table_seconds = 0, hash_seconds = 0, read_seconds = 0, backward_seconds = 0, checkpoint_seconds = 0,
         write_seconds = 0, total_seconds = 0;
  double hash_wait_seconds = 0;  // spent waiting for the inputs' digests with nothing else left to do
};

// What `kembed forward` does (kembed/job/forward.hpp).
struct ForwardSettings {
  std::string table, ids, out;
  std::string ids_dataset = "ids";
  std::int64_t microbatch = 65536;  // positions per forward call (and per block read and written)
  std::optional<double> max_norm;    // overrides the table file's (with norm_type)
  std::optional<double> norm_type;
  // A bag batch's pooling (default sum): y is then one row per bag, and microbatch
  // counts bags; a batch of positions refuses one.
  std::optional<Pooling> pooling;
};

struct ForwardReport {
  std::string out, backend;
  std::int64_t positions = 0, cols = 0;  // y's rows (a bag batch's bags) and columns
  std::string pooling;                   // a bag batch's, else empty
  int threads = 0, ranks = 1;
  double read_table_seconds = 0, hash_seconds = 0, forward_seconds = 0, write_seconds = 0, total_seconds = 0;
  double hash_wait_seconds = 0;  // spent waiting for the inputs' digests with nothing else left to do
};

// What `kembed step` does (kembed/job/step.hpp): one optimizer step of a table by a
// run file's gradient (dense, or row-sparse: only its rows and their state change).
struct StepSettings {
  std::string table, run, out;
  std::string state;      // the optimizer's state so far (a state file); "": the first step
  std::string state_out;  // default: <out>.state
  // The optimizer: required for a first step; with a state, the state's (naming
  // another is refused).
  std::optional<Optimizer> optimizer;
  // The settings given (the command line's flags), applied over the state's settings
  // or, for a first step, over torch's defaults for `optimizer`. Null: none given.
  std::function<void(OptimSettings&)> adjust;
  bool deflate = false;
};

struct StepReport {
  std::string out, state_out, table_sha256, state_sha256, optimizer, backend;
  std::int64_t step = 0;  // the step taken (1 for the first)
  std::int64_t rows = 0, cols = 0;
  std::int64_t rows_updated = 0;  // all of them for a dense gradient, the listed ones for a sparse one
  bool sparse = false;
  int threads = 0, ranks = 1;
  double read_seconds = 0, step_seconds = 0, write_seconds = 0, total_seconds = 0;
};

// Where the job reports while it runs (on the first rank only), and how its messages
// name a setting. Any may be empty.
struct Observer {
  std::function<void(std::string const&)> log;
  std::function<void(std::int64_t done, std::int64_t total, std::int64_t start)> progress;
  // What progress counts ("positions", or "bags" in a bag job), told before it starts.
  std::function<void(std::string const& unit)> unit;
  // A setting's name in messages: its member's ("microbatch", "checkpoint_every")
  // unless this says otherwise (the CLI: its flag, "--microbatch").
  std::function<std::string(std::string const& setting)> name;
  std::string name_of(std::string const& setting) const { return name ? name(setting) : setting; }
};

}  // namespace kembed::job
