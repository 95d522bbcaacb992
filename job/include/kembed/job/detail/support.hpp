#pragma once
// The batch job's parts that do not depend on the backend or the team (job/src).
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/job/failure.hpp>
#include <kembed/job/process.hpp>

#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kembed::job {
struct BackwardSettings;
struct Observer;
}

namespace kembed::job::detail {

using job::peak_rss_bytes;
using job::with_commas;

// A run's id: UTC time, process id and a random tag.
std::string make_run_id();

// Refuses, before anything is read or written, a job that would replace or remove a
// file it was not given for that: the output over an input, a checkpoint path that
// is an input or the output, or a checkpoint path holding anything but a kembed
// checkpoint. Returns the checkpoint found there (attributes only), if any.
// Messages name the settings as `o` does.
std::optional<io::Checkpoint> check_job_paths(BackwardSettings const& s, std::string const& checkpoint_path,
                                              Observer const& o);

// Removes the checkpoint only if it is still this job's: a kembed checkpoint with
// this job's id (or, for one written before checkpoints carried ids, the one this
// job resumed from, with the same inputs). Returns what it did, for the log.
std::string remove_own_checkpoint(std::string const& path, std::string const& job_id,
                                  io::Checkpoint const* resumed_legacy);

// Rethrows a checkpoint's refusal, saying that it is neither resumed nor changed.
[[noreturn]] void refuse_checkpoint(io::FileError const& e);

// The plan that folded the most positions (the first such in name order), as the
// layer's paths reported them (static names: plan_name()); "" when none folded any.
std::string most_positions(std::map<std::string_view, std::int64_t> const& positions_by_plan);

// A block of bags [first, first + n) of a bag batch: offsets[0 .. n] (global
// positions) and, unless null, their dy rows; then their positions' ids (refused
// outside [0, V) with their positions) and, in a weighted batch, weights.
void read_bag_block(io::BatchReader const& batch, std::string const& path, std::string const& ids_dataset,
                    std::int64_t first, std::int64_t n, std::int64_t v, std::vector<std::int64_t>& offsets, float* dy,
                    std::vector<std::int64_t>& ids, std::vector<float>& weights);

// Refuses a checkpoint that belongs to another job than this one.
// `pooling`: a bag job's (its checkpoint must record the same).
void check_resumable(io::Checkpoint const& c, std::string const& path, io::InputIdentity const& table,
                     io::InputIdentity const& batch, Config const& job, std::int64_t microbatch, std::int64_t positions,
                     Observer const& o, std::optional<Pooling> pooling = std::nullopt);

// Checks what this rank read of a checkpoint against what any carried state holds
// (its digests aside): counts >= 0 (>= 1 for a row a sparse checkpoint lists); a row
// never referenced (count 0) and the padding row +0.0 in every bit; no NaN unless
// `deterministic` (a pairwise tree can add +inf to -inf, an ascending or atomic
// sum of finite terms cannot). `first_row`: the global row of its first dense row.
// Returns its counts' sum, for the caller to compare with the position over all ranks.
std::int64_t check_carried(io::Checkpoint const& c, std::string const& path, std::int64_t first_row,
                           std::int64_t padding_idx, bool deterministic);

// (row int64, d float32 values) records, as a sparse run's and checkpoint's digests hash them.
std::vector<unsigned char> sparse_records(std::int64_t const* rows, float const* values, std::int64_t n,
                                          std::int64_t d);

// The run file's record of the settings (JSON; a bag job's pooling too).
std::string settings_json(BackwardSettings const& s, Config const& c, std::string const& backend, int threads,
                          int ranks, std::int64_t resumed_from, std::optional<Pooling> pooling,
                          io::Fingerprint fingerprint);

// Lets the calling helper thread (hashing, reading, writing) run on every core the
// process may use. Under OMP_PROC_BIND the OpenMP runtime pins the main thread to one
// core before main, and a thread it starts inherits that core: the helpers would share
// it with the fold while the other cores wait. Does nothing where nothing is pinned.
void unpin_helper_thread();

// Refuses an id outside [0, V) among ids[0, n), read from positions [first, first + n)
// of `dataset` in `path`, naming its global position (io::FileError, exit 2).
void check_ids(std::string const& path, std::string const& dataset, std::int64_t first, std::int64_t const* ids,
               std::int64_t n, std::int64_t v);


}  // namespace kembed::job::detail
