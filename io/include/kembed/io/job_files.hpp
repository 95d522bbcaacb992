#pragma once
// The batch job's other files (docs/FORMAT.md): batch files (ids and dy, read in
// blocks so a batch never has to fit in memory), forward outputs, and checkpoints.
#include <kembed/core/bags.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/slabs.hpp>
#include <kembed/io/table_file.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kembed::io {

struct Collective;  // an MPI communicator, in <kembed/io/collective.hpp>

inline constexpr char const* batch_format = "kembed-batch-1";
inline constexpr char const* forward_format = "kembed-forward-1";
inline constexpr char const* checkpoint_format = "kembed-checkpoint-1";

struct BatchMeta {
  std::int64_t num_embeddings = 0;  // the vocabulary the ids index (0: not recorded)
  std::string source;               // where the token stream came from
  std::uint64_t seed = 0;           // the seed dy was drawn from
};

struct BatchInfo {
  std::int64_t positions = 0;  // T
  std::int64_t dim = 0;        // d of dy (0 when dy was not asked for)
  bool kembed_format = false;  // tagged kembed-batch-1 (else a plain file with named datasets)
  BatchMeta meta;
  // A bag batch (it has /offsets): B bags, dy is (B, d), one row per bag; weighted
  // when it has /per_sample_weights (T,). bags = 0: a batch of positions.
  std::int64_t bags = 0;
  bool weighted = false;
};

// A bag batch's shape, for BatchWriter.
struct BagShape {
  std::int64_t bags = 0;
  bool weighted = false;
};

// Reads positions in blocks. A kembed batch file is tagged; a plain HDF5 file is read
// too when it has the named datasets: ids 1-D integers (T,), dy float32 (T, d).
// A bag batch adds /offsets (B + 1,): offsets[0] = 0, non-decreasing, offsets[B] = T,
// bag b holding positions [offsets[b], offsets[b + 1]); its dy is (B, d), and
// /per_sample_weights (T,) float32 may weight its positions.
//
// With `collective` (<kembed/io/collective.hpp>), every rank of its communicator opens
// the file and each read() is one collective read, in which every rank takes part
// (a rank may ask for no positions) and gets its own range.
class BatchReader {
 public:
  explicit BatchReader(std::string const& path, bool need_dy = true, std::string ids_dataset = "ids",
                       std::string dy_dataset = "dy", Collective const* collective = nullptr);
  ~BatchReader();
  BatchReader(BatchReader&&) noexcept;
  BatchInfo const& info() const noexcept;
  // Positions [first, first + count): ids into `ids`, dy rows into `dy` (count x d),
  // unless null. dy must be finite; a NaN or inf is reported with its position.
  // A bag batch's dy is per bag: read it with read_bags.
  void read(std::int64_t first, std::int64_t count, std::int64_t* ids, float* dy) const;
  // A bag batch's bags [first, first + count): offsets[first .. first + count] into
  // `offsets` (count + 1 values, checked: non-decreasing, within [0, T]) and, unless
  // null, their dy rows into `dy` (count x d, finite).
  void read_bags(std::int64_t first, std::int64_t count, std::int64_t* offsets, float* dy) const;
  // A weighted bag batch's weights of positions [first, first + count) (finite).
  void read_weights(std::int64_t first, std::int64_t count, float* weights) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes a kembed batch file in blocks, crash-safely (nothing under `path` until commit).
// A bag batch (`bags.bags` > 0) gets its positions' ids from write() (dy null), its
// bags from write_bags() and its weights from write_weights(); /offsets[B] = T is
// written by commit().
class BatchWriter {
 public:
  BatchWriter(std::string const& path, std::int64_t positions, std::int64_t dim, BatchMeta const& meta,
              SaveOptions const& options = {}, BagShape const& bags = {});
  ~BatchWriter();
  void write(std::int64_t first, std::int64_t count, std::int64_t const* ids, float const* dy);
  // Bags [first, first + count): their first positions (offsets) and dy rows.
  void write_bags(std::int64_t first, std::int64_t count, std::int64_t const* offsets, float const* dy);
  void write_weights(std::int64_t first, std::int64_t count, float const* weights);
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The forward's output y (T, d), written in blocks, crash-safely.
class ForwardWriter {
 public:
  // `pooling`: a bag batch's forward (y is then one row per bag), recorded with `positions` as bags.
  // With `collective`, every rank of its communicator constructs it with the same
  // arguments and each write() and commit() is collective (each rank its own rows,
  // possibly none); the first rank's set_inputs() is the one recorded. y's bytes are
  // one process's.
  ForwardWriter(std::string const& path, std::int64_t positions, std::int64_t dim, std::string const& table_sha256,
                std::string const& ids_sha256, SaveOptions const& options = {},
                std::optional<Pooling> pooling = std::nullopt, Collective const* collective = nullptr);
  ~ForwardWriter();
  void write(std::int64_t first, std::int64_t count, float const* y);
  // The inputs' SHA-256, when they were not known at construction (hashed meanwhile).
  void set_inputs(std::string const& table_sha256, std::string const& ids_sha256);
  // Makes the rows written so far durable (fsync) while the file is still being
  // made: a job calls it while it waits for its inputs' digests, so that commit()
  // has only the attributes left to write.
  void sync_so_far();
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Where a backward job stood: the carried gradient and counts after `position`
// positions, and what it must match to be resumed.
struct Checkpoint {
  std::string job_id;  // the job that wrote it: only that job (or its resumption) removes it
  std::int64_t position = 0;
  std::int64_t microbatches = 0;
  std::int64_t microbatch_size = 0;
  std::string table_sha256, batch_sha256;       // the inputs' fingerprints, of this kind:
  Fingerprint fingerprint = Fingerprint::file;  // attribute inputs_fingerprint (absent: file)
  Plan plan = Plan::automatic;                  // typed, as a run file's
  Mode numeric_mode = Mode::identical;
  FreqScale scale_grad_by_freq = FreqScale::none;
  std::int64_t padding_idx = -1;
  // A bag job's: its pooling and the bags folded (`position` counts their positions).
  std::optional<Pooling> pooling;
  std::int64_t bags = 0;
  double elapsed_seconds = 0;
  std::int64_t rows = 0, cols = 0;
  std::vector<float> gradient;
  std::vector<std::int64_t> counts;
  // A sparse job's checkpoint: the listed rows (global, ascending) that `gradient`
  // (listed x cols) and `counts` hold; false: every row, densely.
  bool sparse = false;
  std::vector<std::int64_t> listed_rows;
  std::int64_t listed_count = 0;  // a sparse checkpoint's listed rows in all (every rank's)
  // Digests (docs/FORMAT.md): of the whole carried gradient (dense: its float32
  // bytes; sparse: (row, values) records as a sparse run's) and counts (int64), in
  // row order; and checkpoint_sha256, of every attribute a resume builds on, these
  // two included. A resume that reads only its own rows checks the first two itself.
  std::string gradient_sha256, counts_sha256, checkpoint_sha256;
};

// The settings the checkpoint's job ran with (plan, mode, scale_grad_by_freq, padding,
// sparse; max_norm is not recorded) as a Config, for kembed::differences.
Config settings_of(Checkpoint const& checkpoint);

// checkpoint_sha256 of a checkpoint's attributes (its data digests included).
std::string checkpoint_sha256(Checkpoint const& checkpoint);

// Computes every digest (the checkpoint holds all rows).
void write_checkpoint(std::string const& path, Checkpoint const& checkpoint);
// Reads a checkpoint; with `with_data` false only its attributes (gradient and counts
// stay empty), to check whose it is before touching it. With `row_count` >= 0 only
// rows [first_row, first_row + row_count) of the gradient and counts are read (a
// rank's own rows; any number of ranks may have written the file).
// The attributes are checked against checkpoint_sha256 whenever the file has one,
// and with data it must have one (a checkpoint that cannot be verified is not
// resumed). The data are checked against their digests when every row is read;
// a caller reading part of them compares what all parts hash to (the MPI job does).
Checkpoint read_checkpoint(std::string const& path, bool with_data = true, std::int64_t first_row = 0,
                           std::int64_t row_count = -1);

// write_checkpoint from row slabs: `checkpoint`'s gradient and counts are not used,
// and its gradient_sha256 and counts_sha256 must be set (of every rank's rows in
// row order) unless one process writes every row, when they are computed here.
// With `collective`, every rank calls it with the same attributes and its own rows
// (the slabs cover the rows in rank order); the file's datasets are byte for byte
// those one process writes.
void write_checkpoint(std::string const& path, Checkpoint const& checkpoint, RowSlab const& mine,
                      Collective const* collective = nullptr);
// A sparse job's checkpoint from each rank's listed rows (as write_sparse_run's slabs):
// the attributes as above, `listed_rows`, and /rows, /gradient, /counts of the listed rows.
void write_checkpoint(std::string const& path, Checkpoint const& checkpoint, SparseSlab const& mine,
                      Collective const* collective = nullptr);

}  // namespace kembed::io
