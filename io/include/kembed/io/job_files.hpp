#pragma once
// The batch job's other files (docs/FORMAT.md): batch files (ids and dy, read in
// blocks so a batch never has to fit in memory), forward outputs, and checkpoints.
#include <kembed/io/table_file.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kembed::io {

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
};

// Reads positions in blocks. A kembed batch file is tagged; a plain HDF5 file is read
// too when it has the named datasets: ids 1-D integers (T,), dy float32 (T, d).
class BatchReader {
 public:
  explicit BatchReader(std::string const& path, bool need_dy = true, std::string ids_dataset = "ids",
                       std::string dy_dataset = "dy");
  ~BatchReader();
  BatchReader(BatchReader&&) noexcept;
  BatchInfo const& info() const noexcept;
  // Positions [first, first + count): ids into `ids`, dy rows into `dy` (count x d),
  // unless null. dy must be finite; a NaN or inf is reported with its position.
  void read(std::int64_t first, std::int64_t count, std::int64_t* ids, float* dy) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes a kembed batch file in blocks, crash-safely (nothing under `path` until commit).
class BatchWriter {
 public:
  BatchWriter(std::string const& path, std::int64_t positions, std::int64_t dim, BatchMeta const& meta,
              SaveOptions const& options = {});
  ~BatchWriter();
  void write(std::int64_t first, std::int64_t count, std::int64_t const* ids, float const* dy);
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The forward's output y (T, d), written in blocks, crash-safely.
class ForwardWriter {
 public:
  ForwardWriter(std::string const& path, std::int64_t positions, std::int64_t dim, std::string const& table_sha256,
                std::string const& ids_sha256, SaveOptions const& options = {});
  ~ForwardWriter();
  void write(std::int64_t first, std::int64_t count, float const* y);
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
  std::string table_sha256, batch_sha256;
  std::string plan, numeric_mode;
  std::int64_t padding_idx = -1;
  double elapsed_seconds = 0;
  std::int64_t rows = 0, cols = 0;
  std::vector<float> gradient;
  std::vector<std::int64_t> counts;
};

void write_checkpoint(std::string const& path, Checkpoint const& checkpoint);
// Reads a checkpoint; with `with_data` false only its attributes (gradient and counts
// stay empty), to check whose it is before touching it.
Checkpoint read_checkpoint(std::string const& path, bool with_data = true);

}  // namespace kembed::io
