#include "common.hpp"
#include "run_checks.hpp"
#include "sharded_file.hpp"

#include <kembed/core/validate.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/sha256.hpp>
#if defined(KEMBED_IO_PARALLEL)
#include <kembed/io/collective.hpp>
#endif

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <stdexcept>
#include <tuple>

namespace kembed::io {

// ---- batch files ------------------------------------------------------------------

struct BatchReader::Impl {
  std::string path, ids_name, dy_name;
  h5::Handle file, ids, offsets;  // offsets: a bag batch's
  detail::FloatMatrix dy, weights;
  BatchInfo info;
  h5::Handle transfer;  // collective reads, or none
  hid_t transfer_id() const { return transfer.valid() ? transfer.get() : H5P_DEFAULT; }
  void open_bags();
};

namespace {
constexpr char const* offsets_name = "/offsets";
constexpr char const* weights_name = "/per_sample_weights";

}  // namespace

// A bag batch's /offsets (B + 1,) and /per_sample_weights: shapes, and the ends
// offsets[0] = 0 and offsets[B] = T (each block read checks the values between).
void BatchReader::Impl::open_bags() {
  std::int64_t entries = 0;
  offsets = detail::open_int_vector(file, path, offsets_name, &entries);
  if (entries < 2)
    throw FileError(path, offsets_name,
                    "has " + std::to_string(entries) + " entries; a bag batch's offsets are (B + 1,) with B >= 1");
  info.bags = entries - 1;
  std::int64_t ends[2] = {0, 0};
  detail::read_ints(offsets, path, offsets_name, 0, 1, &ends[0], transfer_id());
  detail::read_ints(offsets, path, offsets_name, entries - 1, 1, &ends[1], transfer_id());
  if (ends[0] != 0)
    throw FileError(path, offsets_name, "starts at " + std::to_string(ends[0]) + "; offsets[0] must be 0");
  if (ends[1] != info.positions)
    throw FileError(path, offsets_name,
                    "ends at " + std::to_string(ends[1]) + " but '" + ids_name + "' has " +
                        std::to_string(info.positions) + " positions; offsets[B] must be T");
  if (h5::exists(file, weights_name)) {
    weights = detail::open_float_matrix(file, path, weights_name, false, true);
    if (weights.rows != info.positions)
      throw FileError(path, weights_name,
                      "has " + std::to_string(weights.rows) + " entries but '" + ids_name + "' has " +
                          std::to_string(info.positions) + " positions; per_sample_weights must be (T,)");
    info.weighted = true;
  }
}

BatchReader::BatchReader(std::string const& path, bool need_dy, std::string ids_dataset, std::string dy_dataset,
                         Collective const* collective)
    : impl_(std::make_unique<Impl>()) {
  detail::reading(path, [&] {
    auto& m = *impl_;
    m.path = path;
    m.ids_name = ids_dataset.empty() || ids_dataset[0] == '/' ? ids_dataset : "/" + ids_dataset;
    m.dy_name = dy_dataset.empty() || dy_dataset[0] == '/' ? dy_dataset : "/" + dy_dataset;
    m.file = detail::open_for_reading(path, collective);
    m.transfer = detail::transfer_list(collective);
    if (h5::has_attribute(m.file, "format")) {
      detail::check_format(m.file, path, "kembed-batch", 1, "batch");
      m.info.kembed_format = true;
      m.info.meta.num_embeddings = h5::read_int64(m.file, "num_embeddings").value_or(0);
      m.info.meta.source = h5::read_string(m.file, "source").value_or("");
      m.info.meta.seed = static_cast<std::uint64_t>(h5::read_int64(m.file, "seed").value_or(0));
    }
    m.ids = detail::open_int_vector(m.file, path, m.ids_name, &m.info.positions);
    if (m.info.positions < 1) throw FileError(path, m.ids_name, "holds no positions; a batch needs at least one id");
    if (h5::exists(m.file, offsets_name)) m.open_bags();
    if (need_dy) {
      m.dy = detail::open_float_matrix(m.file, path, m.dy_name, false);
      std::int64_t const want = m.info.bags > 0 ? m.info.bags : m.info.positions;
      if (m.dy.rows != want) {
        throw FileError(path, m.dy_name,
                        "has " + std::to_string(m.dy.rows) + " rows but " +
                            (m.info.bags > 0 ? "'" + std::string(offsets_name) + "' has " + std::to_string(want) +
                                                   " bags; a bag batch's dy must be (B, d)"
                                             : "'" + m.ids_name + "' has " + std::to_string(want) +
                                                   " positions; dy must be (T, d)"));
      }
      m.info.dim = m.dy.cols;
    }
  });
}

BatchReader::~BatchReader() = default;
BatchReader::BatchReader(BatchReader&&) noexcept = default;
BatchInfo const& BatchReader::info() const noexcept {
  return impl_->info;
}

void BatchReader::read(std::int64_t first, std::int64_t count, std::int64_t* ids, float* dy) const {
  auto const& m = *impl_;
  if (first < 0 || count < 0 || first > m.info.positions || count > m.info.positions - first)
    throw std::out_of_range("BatchReader::read: positions beyond the batch");
  if (dy && m.info.bags > 0)  // a caller's mistake, but a file's shape: refused as kembed refuses files
    throw FileError(m.path, m.dy_name,
                    "holds one row per bag (B, d) in a bag batch; it is read by bags, not positions");
  detail::reading(m.path, [&] {
    hid_t const transfer = m.transfer_id();
    if (ids) detail::read_ints(m.ids, m.path, m.ids_name, first, count, ids, transfer);
    if (dy) {
      detail::read_rows(m.dy, m.path, m.dy_name, first, count, dy, false, transfer);
      detail::check_finite_values(dy, count, m.dy.cols, first, m.path, m.dy_name, "position", "dy");
    }
  });
}

void BatchReader::read_bags(std::int64_t first, std::int64_t count, std::int64_t* offsets, float* dy) const {
  auto const& m = *impl_;
  if (m.info.bags == 0) throw std::logic_error("BatchReader::read_bags: not a bag batch");
  if (first < 0 || count < 0 || first > m.info.bags || count > m.info.bags - first)
    throw std::out_of_range("BatchReader::read_bags: bags beyond the batch");
  detail::reading(m.path, [&] {
    detail::read_ints(m.offsets, m.path, offsets_name, first, count + 1, offsets, m.transfer_id());
    for (std::int64_t i = 0; i < count; ++i) {
      if (offsets[i + 1] < offsets[i])
        throw FileError(m.path, offsets_name,
                        "offsets[" + std::to_string(first + i + 1) + "] = " + std::to_string(offsets[i + 1]) +
                            " is below offsets[" + std::to_string(first + i) + "] = " + std::to_string(offsets[i]) +
                            "; offsets must be non-decreasing");
      if (offsets[i + 1] > m.info.positions)
        throw FileError(m.path, offsets_name,
                        "offsets[" + std::to_string(first + i + 1) + "] = " + std::to_string(offsets[i + 1]) +
                            " is past T = " + std::to_string(m.info.positions));
    }
    if (dy) {
      detail::read_rows(m.dy, m.path, m.dy_name, first, count, dy, false, m.transfer_id());
      detail::check_finite_values(dy, count, m.dy.cols, first, m.path, m.dy_name, "bag", "dy");
    }
  });
}

void BatchReader::read_weights(std::int64_t first, std::int64_t count, float* weights) const {
  auto const& m = *impl_;
  if (!m.info.weighted) throw std::logic_error("BatchReader::read_weights: the batch has no per_sample_weights");
  if (first < 0 || count < 0 || first > m.info.positions || count > m.info.positions - first)
    throw std::out_of_range("BatchReader::read_weights: positions beyond the batch");
  detail::reading(m.path, [&] {
    detail::read_rows(m.weights, m.path, weights_name, first, count, weights, false, m.transfer_id());
    detail::check_finite_values(weights, count, 0, first, m.path, weights_name, "position", "per_sample_weights");
  });
}

struct BatchWriter::Impl {
  std::string path;
  detail::StreamingFile file;
  std::int64_t positions = 0, bags = 0;
  Impl(std::string const& p) : path(p), file(p) {}
};

BatchWriter::BatchWriter(std::string const& path, std::int64_t positions, std::int64_t dim, BatchMeta const& meta,
                         SaveOptions const& options, BagShape const& bags) {
  if (positions < 1 || dim < 1 || bags.bags < 0)
    throw InvalidArgument("batch", "a batch needs positions >= 1, dim >= 1 and bags >= 0, got " +
                                       std::to_string(positions) + ", " + std::to_string(dim) + " and " +
                                       std::to_string(bags.bags));
  detail::writing(path, "writing the batch failed", [&] {
    impl_ = std::make_unique<Impl>(path);
    impl_->positions = positions;
    impl_->bags = bags.bags;
    auto root = impl_->file.root();
    detail::write_identity(root, batch_format, &options);
    h5::write_int64(root, "num_embeddings", meta.num_embeddings);
    h5::write_string(root, "source", meta.source);
    h5::write_int64(root, "seed", static_cast<std::int64_t>(meta.seed));
    impl_->file.create("ids", H5T_STD_I64LE, positions, 0, options);
    impl_->file.create("dy", H5T_IEEE_F32LE, bags.bags > 0 ? bags.bags : positions, dim, options);
    if (bags.bags > 0) impl_->file.create("offsets", H5T_STD_I64LE, bags.bags + 1, 0, options);
    if (bags.bags > 0 && bags.weighted) impl_->file.create("per_sample_weights", H5T_IEEE_F32LE, positions, 0, options);
  });
}

BatchWriter::~BatchWriter() = default;

void BatchWriter::write(std::int64_t first, std::int64_t count, std::int64_t const* ids, float const* dy) {
  if ((dy != nullptr) == (impl_->bags > 0))
    throw std::logic_error("BatchWriter::write: dy is per position in a batch of positions, per bag in a bag batch");
  detail::writing(impl_->path, "writing the batch failed, nothing was saved", [&] {
    impl_->file.write_rows("ids", H5T_NATIVE_INT64, first, count, ids);
    if (dy) impl_->file.write_rows("dy", H5T_NATIVE_FLOAT, first, count, dy);
  });
}

void BatchWriter::write_bags(std::int64_t first, std::int64_t count, std::int64_t const* offsets, float const* dy) {
  if (impl_->bags == 0) throw std::logic_error("BatchWriter::write_bags: not a bag batch");
  detail::writing(impl_->path, "writing the batch failed, nothing was saved", [&] {
    impl_->file.write_rows("offsets", H5T_NATIVE_INT64, first, count, offsets);
    impl_->file.write_rows("dy", H5T_NATIVE_FLOAT, first, count, dy);
  });
}

void BatchWriter::write_weights(std::int64_t first, std::int64_t count, float const* weights) {
  detail::writing(impl_->path, "writing the batch failed, nothing was saved",
                  [&] { impl_->file.write_rows("per_sample_weights", H5T_NATIVE_FLOAT, first, count, weights); });
}

void BatchWriter::commit() {
  detail::writing(impl_->path, "writing the batch failed, nothing was saved", [&] {
    if (impl_->bags > 0) impl_->file.write_rows("offsets", H5T_NATIVE_INT64, impl_->bags, 1, &impl_->positions);
    impl_->file.commit();
  });
}

// ---- forward outputs --------------------------------------------------------------

// One process streams y into its StreamingFile. Many ranks: each write() gathers the
// ranks' rows (contiguous, in rank order) to the first rank, which writes them as one
// process does. (Parallel HDF5 1.10 writes a filtered dataset's every chunk with fill
// values when a rank opens it through MPI-IO, which tripled a 1 GB forward's time:
// docs/SCALING.md, "The forward".)
struct ForwardWriter::Impl {
  std::string path;
  std::optional<detail::StreamingFile> file;  // the one process's, or the first rank's
  Collective const* collective = nullptr;
  std::int64_t cols = 0;
  std::vector<float> gathered;  // the first rank's: a write's rows from every rank
  explicit Impl(std::string const& p) : path(p) {}
  bool first_rank() const { return detail::rank_in(collective) == 0; }
  // `step` where `here`; then every rank hears the first failure (one process: its own).
  template <class Step>
  void together(std::string const& what, bool here, Step&& step) {
    std::string problem;
    try {
      if (here) detail::writing(path, what, step);
    } catch (IoFailure const& e) {
      problem = detail::problem_of(path, e);
    }
    detail::agree_on_problem(path, problem, collective);
  }
  // Every rank's rows, in rank order, into `gathered` on the first rank; their first row.
  std::pair<std::int64_t, std::int64_t> gather(std::int64_t first, std::int64_t count, std::int64_t cols,
                                               float const* y);
};

#if defined(KEMBED_IO_PARALLEL)
std::pair<std::int64_t, std::int64_t> ForwardWriter::Impl::gather(std::int64_t first, std::int64_t count,
                                                                  std::int64_t cols, float const* y) {
  MPI_Comm const comm = collective->comm;
  int ranks = 1;
  MPI_Comm_size(comm, &ranks);
  std::int64_t const mine[2] = {first, count};
  std::vector<std::int64_t> all(static_cast<std::size_t>(2 * ranks));
  MPI_Gather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, 0, comm);
  std::vector<int> counts(static_cast<std::size_t>(ranks)), at(static_cast<std::size_t>(ranks));
  std::int64_t total = 0;
  for (int r = 0; r < ranks; ++r) {
    std::int64_t const floats = all[std::size_t(2 * r + 1)] * cols;
    if (floats + total * cols > INT_MAX)
      throw InvalidArgument("microbatch", "a block of y over every rank exceeds 2^31 floats; use a smaller microbatch");
    counts[std::size_t(r)] = int(floats), at[std::size_t(r)] = int(total * cols);
    total += all[std::size_t(2 * r + 1)];
  }
  if (first_rank()) gathered.resize(std::size_t(total * cols));
  MPI_Gatherv(y, int(count * cols), MPI_FLOAT, gathered.data(), counts.data(), at.data(), MPI_FLOAT, 0, comm);
  return {all[0], total};
}
#else
std::pair<std::int64_t, std::int64_t> ForwardWriter::Impl::gather(std::int64_t first, std::int64_t count, std::int64_t,
                                                                  float const*) {
  return {first, count};
}
#endif

ForwardWriter::ForwardWriter(std::string const& path, std::int64_t positions, std::int64_t dim,
                             std::string const& table_sha256, std::string const& ids_sha256, SaveOptions const& options,
                             std::optional<Pooling> pooling, Collective const* collective) {
  detail::require_parallel(collective);
  impl_ = std::make_unique<Impl>(path);
  impl_->collective = collective;
  impl_->cols = dim;
  impl_->together("writing the output failed", impl_->first_rank(), [&] {
    impl_->file.emplace(path);
    auto root = impl_->file->root();
    detail::write_identity(root, forward_format, &options);
    if (!table_sha256.empty() || !ids_sha256.empty()) {
      h5::write_string(root, "table_sha256", table_sha256);
      h5::write_string(root, "ids_sha256", ids_sha256);
    }
    detail::write_pooling(root, pooling, positions);
    impl_->file->create("y", H5T_IEEE_F32LE, positions, dim, options);
  });
}

void ForwardWriter::set_inputs(std::string const& table_sha256, std::string const& ids_sha256) {
  impl_->together("writing the output failed, nothing was saved", impl_->first_rank(), [&] {
    auto root = impl_->file->root();
    h5::write_string(root, "table_sha256", table_sha256);
    h5::write_string(root, "ids_sha256", ids_sha256);
  });
}

ForwardWriter::~ForwardWriter() = default;

void ForwardWriter::write(std::int64_t first, std::int64_t count, float const* y) {
  float const* rows = y;
  if (impl_->collective) {
    std::tie(first, count) = impl_->gather(first, count, impl_->cols, y);
    rows = impl_->gathered.data();
  }
  impl_->together("writing the output failed, nothing was saved", impl_->first_rank(), [&] {
    impl_->file->write_rows("y", H5T_NATIVE_FLOAT, first, count, rows);
    impl_->file->start_writeback();
  });
}

void ForwardWriter::sync_so_far() {
  impl_->together("writing the output failed, nothing was saved", impl_->first_rank(),
                  [&] { impl_->file->sync_so_far(); });
}

void ForwardWriter::commit() {
  impl_->together("writing the output failed, nothing was saved", impl_->first_rank(), [&] { impl_->file->commit(); });
}

// ---- checkpoints ------------------------------------------------------------------

std::string checkpoint_sha256(Checkpoint const& c) {
  char elapsed[40];
  std::snprintf(elapsed, sizeof elapsed, "%.17g", c.elapsed_seconds);
  auto line = [](char const* name, std::string const& value) { return std::string(name) + "=" + value + "\n"; };
  auto num = [](std::int64_t v) { return std::to_string(v); };
  auto text = [](auto setting) { return std::string(to_string(setting)); };
  std::string const all =
      std::string(checkpoint_format) + "\n" + line("job_id", c.job_id) + line("position", num(c.position)) +
      line("microbatches", num(c.microbatches)) + line("microbatch_size", num(c.microbatch_size)) +
      line("table_sha256", c.table_sha256) + line("batch_sha256", c.batch_sha256) +
      (c.fingerprint == Fingerprint::file ? std::string() : line("inputs_fingerprint", text(c.fingerprint))) +
      line("plan", text(c.plan)) + line("numeric_mode", text(c.numeric_mode)) +
      line("scale_grad_by_freq", text(c.scale_grad_by_freq)) + line("padding_idx", num(c.padding_idx)) +
      line("elapsed_seconds", elapsed) + line("num_embeddings", num(c.rows)) + line("embedding_dim", num(c.cols)) +
      line("listed_rows", num(c.sparse ? c.listed_count : -1)) + line("gradient_sha256", c.gradient_sha256) +
      line("counts_sha256", c.counts_sha256) +
      (c.pooling ? line("pooling", text(*c.pooling)) + line("bags", num(c.bags)) : std::string());
  return sha256_hex(all.data(), all.size());
}

namespace {
// A checkpoint's attributes (docs/FORMAT.md), dense or sparse, its digests included.
void write_checkpoint_attributes(hid_t root, Checkpoint const& c) {
  detail::write_identity(root, checkpoint_format);
  h5::write_string(root, "job_id", c.job_id);
  h5::write_int64(root, "position", c.position);
  h5::write_int64(root, "microbatches", c.microbatches);
  h5::write_int64(root, "microbatch_size", c.microbatch_size);
  h5::write_string(root, "table_sha256", c.table_sha256);
  h5::write_string(root, "batch_sha256", c.batch_sha256);
  if (c.fingerprint != Fingerprint::file)  // files before it: whole-file SHA-256s
    h5::write_string(root, "inputs_fingerprint", std::string(to_string(c.fingerprint)));
  detail::write_settings(root, c.plan, c.numeric_mode, c.scale_grad_by_freq);
  h5::write_int64(root, "padding_idx", c.padding_idx);
  h5::write_double(root, "elapsed_seconds", c.elapsed_seconds);
  h5::write_int64(root, "num_embeddings", c.rows);
  h5::write_int64(root, "embedding_dim", c.cols);
  if (c.sparse) h5::write_int64(root, "listed_rows", c.listed_count);
  h5::write_string(root, "gradient_sha256", c.gradient_sha256);
  h5::write_string(root, "counts_sha256", c.counts_sha256);
  detail::write_pooling(root, c.pooling, c.bags);
  h5::write_string(root, "checkpoint_sha256", checkpoint_sha256(c));
}

// The checkpoint as it will be stored: `c` with the data digests computed where this
// process holds every row and the caller left them empty.
Checkpoint with_digests(Checkpoint const& c, bool every_row, std::function<std::string()> const& gradient_digest,
                        std::function<std::string()> const& counts_digest) {
  Checkpoint h = c;
  h.gradient = {}, h.counts = {}, h.listed_rows = {};
  if (every_row && h.gradient_sha256.empty()) h.gradient_sha256 = gradient_digest();
  if (every_row && h.counts_sha256.empty()) h.counts_sha256 = counts_digest();
  if (h.gradient_sha256.size() != 64 || h.counts_sha256.size() != 64)
    throw InvalidArgument("checkpoint", "a checkpoint written by many ranks needs the SHA-256 of every rank's "
                                        "gradient and counts (gradient_sha256, counts_sha256)");
  return h;
}
}  // namespace

void write_checkpoint(std::string const& path, Checkpoint const& c) {
  if (std::int64_t(c.gradient.size()) != c.rows * c.cols || std::int64_t(c.counts.size()) != c.rows)
    throw InvalidArgument("checkpoint", "the checkpoint's gradient and counts do not have its shape");
  Checkpoint dense = c;
  dense.sparse = false;
  write_checkpoint(path, dense, RowSlab{0, c.rows, c.gradient.data(), c.counts.data()});
}

void write_checkpoint(std::string const& path, Checkpoint const& c, RowSlab const& mine, Collective const* collective) {
  detail::check_padding_to_store("the checkpoint", c.padding_idx, c.rows);
  if (mine.first < 0 || mine.count < 0 || mine.first > c.rows || mine.count > c.rows - mine.first ||
      (mine.count > 0 && (!mine.gradient || !mine.counts)))
    throw InvalidArgument("checkpoint", "rows [" + std::to_string(mine.first) + ", +" + std::to_string(mine.count) +
                                            ") are not rows of the checkpoint's " + std::to_string(c.rows) +
                                            ", or have no data");
  Checkpoint h = with_digests(
      c, !collective && mine.first == 0 && mine.count == c.rows,
      [&] { return sha256_hex(mine.gradient, std::size_t(mine.count * c.cols) * sizeof(float)); },
      [&] { return counts_sha256(mine.counts, mine.count); });
  h.sparse = false;
  auto header = [&](hid_t root) { write_checkpoint_attributes(root, h); };
  detail::write_slabs(path, "writing the checkpoint failed, the previous one stays", header,
                      {detail::float_rows("gradient", c.rows, c.cols, mine.gradient),
                       detail::int64_rows("counts", c.rows, mine.counts)},
                      mine, SaveOptions{}, collective);
}

void write_checkpoint(std::string const& path, Checkpoint const& c, SparseSlab const& mine,
                      Collective const* collective) {
  detail::check_padding_to_store("the checkpoint", c.padding_idx, c.rows);
  if (mine.first < 0 || mine.count < 0 || mine.total < 1 || mine.first > mine.total ||
      mine.count > mine.total - mine.first || (mine.count > 0 && (!mine.rows || !mine.values || !mine.counts)))
    throw InvalidArgument("checkpoint", "listed rows [" + std::to_string(mine.first) + ", +" +
                                            std::to_string(mine.count) + ") of " + std::to_string(mine.total) +
                                            " are not a slab of a sparse checkpoint, or have no data");
  Checkpoint h = with_digests(
      c, !collective && mine.first == 0 && mine.count == mine.total,
      [&] { return sparse_gradient_sha256(mine.rows, mine.values, mine.count, c.cols); },
      [&] { return counts_sha256(mine.counts, mine.count); });
  h.sparse = true;
  h.listed_count = mine.total;
  auto header = [&](hid_t root) { write_checkpoint_attributes(root, h); };
  detail::write_slabs(path, "writing the checkpoint failed, the previous one stays", header,
                      {detail::int64_rows("rows", mine.total, mine.rows),
                       detail::float_rows("gradient", mine.total, c.cols, mine.values),
                       detail::int64_rows("counts", mine.total, mine.counts)},
                      RowSlab{mine.first, mine.count, mine.values, mine.counts}, SaveOptions{}, collective);
}

namespace {
// A sparse checkpoint's listed rows within [first_row, first_row + row_count).
void read_sparse_checkpoint(hid_t file, std::string const& path, Checkpoint& c, std::int64_t first_row,
                            std::int64_t row_count) {
  auto const n = c.listed_count;
  std::int64_t n_counts = 0;
  auto counts = detail::open_int_vector(file, path, "/counts", &n_counts);
  auto g = detail::open_float_matrix(file, path, "/gradient", false);
  if (n < 0 || n > c.rows || n_counts != n || g.rows != n || g.cols != c.cols)
    throw FileError(path, "/rows", "and /gradient, /counts do not hold listed_rows = " + std::to_string(n) +
                                       " entries of the checkpoint's shape");
  auto const all = detail::read_listed_rows(file, path, n, c.rows);
  auto const k0 = std::lower_bound(all.begin(), all.end(), first_row) - all.begin();
  auto const k1 = std::lower_bound(all.begin(), all.end(), first_row + row_count) - all.begin();
  c.listed_rows.assign(all.begin() + k0, all.begin() + k1);
  c.gradient.resize(static_cast<std::size_t>((k1 - k0) * c.cols));
  c.counts.resize(static_cast<std::size_t>(k1 - k0));
  if (k1 > k0) {
    detail::read_rows(g, path, "/gradient", k0, k1 - k0, c.gradient.data(), false);
    detail::read_ints(counts, path, "/counts", k0, k1 - k0, c.counts.data());
  }
  if (k0 == 0 && k1 == n) {  // every listed row: its digests are checked here
    detail::check_digest(path, "/gradient", "gradient_sha256", c.gradient_sha256,
                         sparse_gradient_sha256(c.listed_rows.data(), c.gradient.data(), n, c.cols));
    detail::check_digest(path, "/counts", "counts_sha256", c.counts_sha256, counts_sha256(c.counts.data(), n));
  }
}

void read_dense_checkpoint(hid_t file, std::string const& path, Checkpoint& c, std::int64_t first_row,
                           std::int64_t row_count) {
  auto g = detail::open_float_matrix(file, path, "/gradient", false);
  if (g.rows != c.rows || g.cols != c.cols) throw FileError(path, "/gradient", "does not match the attributes' shape");
  std::int64_t n = 0;
  auto counts = detail::open_int_vector(file, path, "/counts", &n);
  if (n != c.rows) throw FileError(path, "/counts", "does not hold one count per row");
  detail::check_size(path, "/gradient", row_count, c.cols, 4);
  detail::check_memory(path, "", double(row_count) * (4.0 * double(c.cols) + 8),
                       "to hold its gradient and counts (V x (4d + 8) bytes)");
  c.gradient.resize(static_cast<std::size_t>(row_count * c.cols));
  detail::read_rows(g, path, "/gradient", first_row, row_count, c.gradient.data(), false);
  c.counts.resize(static_cast<std::size_t>(row_count));
  detail::read_ints(counts, path, "/counts", first_row, row_count, c.counts.data());
  if (first_row == 0 && row_count == c.rows) {  // every row: its digests are checked here
    detail::check_digest(path, "/gradient", "gradient_sha256", c.gradient_sha256,
                         sha256_hex(c.gradient.data(), c.gradient.size() * sizeof(float)));
    detail::check_digest(path, "/counts", "counts_sha256", c.counts_sha256, counts_sha256(c.counts.data(), c.rows));
  }
}

// The attributes, checked against checkpoint_sha256 where the file has one.
Checkpoint read_checkpoint_attributes(hid_t file, std::string const& path, bool need_digest) {
  detail::check_format(file, path, "kembed-checkpoint", 1, "checkpoint");
  Checkpoint c;
  c.job_id = h5::read_string(file, "job_id").value_or("");
  c.position = detail::required_int64(file, path, "position");
  c.microbatches = detail::required_int64(file, path, "microbatches");
  c.microbatch_size = detail::required_int64(file, path, "microbatch_size");
  c.table_sha256 = detail::required_string(file, path, "table_sha256");
  c.batch_sha256 = detail::required_string(file, path, "batch_sha256");
  if (auto kind = h5::read_string(file, "inputs_fingerprint")) {
    try {
      c.fingerprint = parse_fingerprint(*kind, "inputs_fingerprint");
    } catch (InvalidArgument const& e) {
      throw FileError(path, "", std::string("attribute ") + e.message() + "; the checkpoint is damaged or was edited");
    }
  }
  c.plan = detail::recorded_plan(file, path);
  c.numeric_mode = detail::recorded_mode(file, path);
  c.scale_grad_by_freq = detail::recorded_scale(file, path);
  c.padding_idx = detail::required_int64(file, path, "padding_idx");
  c.elapsed_seconds = h5::read_double(file, "elapsed_seconds").value_or(0.0);
  c.rows = detail::required_int64(file, path, "num_embeddings");
  c.cols = detail::required_int64(file, path, "embedding_dim");
  c.padding_idx = detail::stored_padding_idx(path, c.padding_idx, c.rows);
  c.sparse = h5::has_attribute(file, "listed_rows");
  if (c.sparse) c.listed_count = detail::required_int64(file, path, "listed_rows");
  c.gradient_sha256 = h5::read_string(file, "gradient_sha256").value_or("");
  c.counts_sha256 = h5::read_string(file, "counts_sha256").value_or("");
  c.pooling = detail::recorded_pooling(file, path);
  c.bags = detail::recorded_bags(file, path, c.pooling);
  auto const stored = h5::read_string(file, "checkpoint_sha256");
  if (!stored && need_digest)
    throw FileError(path, "",
                    "has no checkpoint_sha256, so what it holds cannot be verified (an older kembed wrote it, or it "
                    "was edited)");
  if (stored && *stored != checkpoint_sha256(c))
    throw FileError(path, "",
                    "is damaged or was edited: its attributes do not match checkpoint_sha256 = " + *stored);
  if (stored) c.checkpoint_sha256 = *stored;
  return c;
}
}  // namespace

Checkpoint read_checkpoint(std::string const& path, bool with_data, std::int64_t first_row, std::int64_t row_count) {
  return detail::reading(path, [&] {
    auto file = detail::open_for_reading(path);
    Checkpoint c = read_checkpoint_attributes(file, path, with_data);
    if (!with_data) return c;
    if (c.rows < 1 || c.cols < 1)
      throw FileError(path, "", "declares a (" + std::to_string(c.rows) + ", " + std::to_string(c.cols) +
                                    ") gradient; a checkpoint's has V, d >= 1");
    if (row_count < 0) first_row = 0, row_count = c.rows;
    if (first_row < 0 || first_row > c.rows || row_count > c.rows - first_row)
      throw InvalidArgument("rows", "rows [" + std::to_string(first_row) + ", +" + std::to_string(row_count) +
                                        ") are not within the checkpoint's " + std::to_string(c.rows) + " rows (" +
                                        path + ")");
    if (c.sparse)
      read_sparse_checkpoint(file, path, c, first_row, row_count);
    else
      read_dense_checkpoint(file, path, c, first_row, row_count);
    return c;
  });
}

}  // namespace kembed::io
