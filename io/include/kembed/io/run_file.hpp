#pragma once
// Run files: what a batch job produced (the gradient, per-row counts) and how
// (inputs, backend, plan, timings, provenance), in HDF5 (docs/FORMAT.md, format tag
// "kembed-run-1").
#include <kembed/core/bags.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/slabs.hpp>
#include <kembed/io/table_file.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kembed::io {

struct Collective;  // an MPI communicator, in <kembed/io/collective.hpp>

inline constexpr char const* run_format = "kembed-run-1";
// A run whose gradient is row-sparse: the rows it lists and their values (docs/FORMAT.md).
inline constexpr char const* sparse_run_format = "kembed-sparse-run-1";
// Either kind of run file.
inline bool is_run_format(std::string const& tag) { return tag == run_format || tag == sparse_run_format; }

// The phases a run file's /timings holds, in the order kembed backward writes them.
// exchange_seconds (part of backward_seconds) only where more than one MPI rank ran;
// hash_wait_seconds (the first rank's wait for the inputs' fingerprints with nothing
// else left to do) in files since chunked fingerprints.
inline constexpr char const* timing_phases[] = {"read_table_seconds", "hash_inputs_seconds", "read_batch_seconds",
                                                "backward_seconds",   "checkpoint_seconds",  "total_seconds",
                                                "exchange_seconds",   "hash_wait_seconds"};

struct InputIdentity {
  std::string role;    // "table", "batch", ...
  std::string path;    // as the run was given it
  std::string sha256;  // the file's fingerprint, of the kind below (attribute sha256 or sha256_of_16MiB_chunks)
  std::int64_t bytes = 0;
  Fingerprint fingerprint = Fingerprint::file;
};
// The attribute an input's fingerprint of `kind` is stored under (docs/FORMAT.md).
inline char const* fingerprint_attribute(Fingerprint kind) {
  return kind == Fingerprint::chunks ? "sha256_of_16MiB_chunks" : "sha256";
}

// One rank's share of a job under MPI: the terms its rows received (the sum of its
// rows' counts: the whole job's, a resume's too), the bytes it sent in the exchange
// and its microseconds in the backward outside the exchange (this process's).
struct RankWork {
  std::int64_t terms = 0, bytes_sent = 0, fold_microseconds = 0;
  bool operator==(RankWork const& o) const {
    return terms == o.terms && bytes_sent == o.bytes_sent && fold_microseconds == o.fold_microseconds;
  }
};

struct RunFile {
  std::string run_id;
  std::string kembed_version;  // filled by write_run
  std::string created;         // UTC, ISO 8601; filled by write_run when empty
  std::string backend;         // "Serial", "OpenMP", ...
  std::int64_t threads = 0;
  std::int64_t ranks = 1;  // MPI ranks that ran the job (files before this field: 1)
  // The settings, typed: io alone writes them as text and reads them back (text
  // kembed never writes is a FileError).
  Plan plan = Plan::automatic;  // as requested ...
  std::string plan_used;        // ... and the path that ran: a plan's name, "atomic" (mode fast) or "sparse"
  Mode numeric_mode = Mode::identical;
  FreqScale scale_grad_by_freq = FreqScale::none;
  std::int64_t padding_idx = -1;
  std::int64_t positions = 0;
  std::int64_t microbatches = 0;
  std::int64_t microbatch_size = 0;
  // A bag run's (EmbeddingBag's gradient of a bag batch): its pooling and the
  // batch's bags; microbatches then count bags. Unset and 0 for positions.
  std::optional<Pooling> pooling;
  std::int64_t bags = 0;
  std::vector<InputIdentity> inputs;
  // Seconds per phase. Reading keeps the phases kembed writes (timing_phases), by
  // name: iterating a hostile file's attributes crashes HDF5 1.10 (docs/DESIGN.md).
  std::vector<std::pair<std::string, double>> timings;
  std::string command_line_json = "[]";
  std::string configuration_json = "{}";
  // Each MPI rank's share of the job, in rank order (empty for one process, and in
  // files written before it): how the work was spread over the rows' owners.
  std::vector<RankWork> rank_work;
  std::int64_t rows = 0, cols = 0;
  std::vector<float> gradient;       // rows x cols (a sparse run's too, unlisted rows +0.0)
  std::vector<std::int64_t> counts;  // rows
  std::string gradient_sha256;       // of the gradient's little-endian bytes; set by write_run
  // Of the counts as stored (a dense run's V, a sparse run's listed ones; int64
  // little-endian); set by write_run. Empty in files written before it existed.
  std::string counts_sha256;
  // A sparse run file's: the rows it lists (ascending). Empty for a dense run.
  bool sparse = false;
  std::vector<std::int64_t> listed_rows;
  std::int64_t listed_count = 0;  // how many (also when only the header was read)
};


// SHA-256 of a sparse gradient as a sparse run file stores it: each listed row as its
// row number (int64) and its cols float32 values, little-endian, rows ascending.
std::string sparse_gradient_sha256(std::int64_t const* rows, float const* values, std::int64_t n, std::int64_t cols);
// SHA-256 of counts as a run file stores them (int64, little-endian).
std::string counts_sha256(std::int64_t const* counts, std::int64_t n);
// Writes a sparse run file (`run`'s gradient and counts unused; gradient_sha256, of
// every rank's records in rank order, must be set, and with `collective` so must
// counts_sha256, of every rank's listed counts in rank order; one process holding
// them all has it computed here). With `collective`,
// every rank calls it with the same `run` and its own slab. The summary is the dense gradient's.
void write_sparse_run(std::string const& path, RunFile const& run, SparseSlab const& mine,
                      SaveOptions const& options = {}, Collective const* collective = nullptr);

// Crash-safe, as save_table. Computes and stores gradient_sha256.
void write_run(std::string const& path, RunFile const& run, SaveOptions const& options = {});
// write_run from row slabs (job_files.hpp): `run`'s gradient and counts are not used,
// and its gradient_sha256 (of the whole gradient, in row order) must be set, and its
// counts_sha256 too with `collective` (where one process holds every row it is
// computed here, whatever it was). With `collective`, every rank calls it with the same
// `run` and its own rows.
void write_run(std::string const& path, RunFile const& run, RowSlab const& mine, SaveOptions const& options,
               Collective const* collective = nullptr);
// The same for one process, with the header completed late: the gradient and counts
// are written (and deflated) first, then `complete` fills in what `run` still lacks
// (a job's inputs' digests, its timings) before the header is written and the file
// published. A job writes its gradient this way while its inputs are still hashed.
void write_run(std::string const& path, RunFile const& run, RowSlab const& all, SaveOptions const& options,
               std::function<void(RunFile&)> const& complete);
// Reads everything; refuses a gradient whose bytes no longer match its SHA-256. A
// sparse run file reads as its dense gradient and counts (with `listed_rows`).
// With `with_gradient` false the gradient is left empty (and not read at all);
// with `verify` false its SHA-256 is not recomputed (a viewer may do it later).
// The counts are always checked: against counts_sha256 where the file has it, and
// each in [0, positions] summing to positions. What the dense form needs in memory
// (V x (4d + 8) bytes, or V x 8 without the gradient) is refused up front when it
// exceeds this machine's memory, whatever the file's own size.
RunFile read_run(std::string const& path, bool with_gradient = true, bool verify = true);
// The attributes, inputs, timings and provenance only: no gradient, no counts (so
// nothing in proportion to the rows); `listed_count` says how many a sparse run lists.
RunFile read_run_header(std::string const& path);
// The settings the run ran with (plan asked, mode, scale_grad_by_freq, padding,
// sparse; max_norm is not recorded) as a Config, for kembed::differences.
Config settings_of(RunFile const& run);
// The stored SHA-256 of the gradient alone, without reading the gradient.
std::string read_run_gradient_sha256(std::string const& path);

// What kind of kembed file `path` is: "kembed-embedding-1", "kembed-run-1", or
// the format tag found; throws FileError when it is not a readable kembed file.
std::string file_format(std::string const& path);

// JSON string escaping, for the provenance datasets.
std::string json_quote(std::string const& text);
std::string json_array(std::vector<std::string> const& items);

}  // namespace kembed::io
