#include "common.hpp"
#include "run_checks.hpp"
#include "sharded_file.hpp"
#include "summary_file.hpp"

#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/summary.hpp>

#if defined(KEMBED_IO_PARALLEL)
#include <kembed/io/collective.hpp>
#endif

#include <algorithm>
#include <cstdio>
#include <future>
#include <stdexcept>

namespace kembed::io {
namespace {

static_assert(sizeof(float) == 4, "float32 tables");

// SHA-256 of the gradient as little-endian float32 bytes, the bytes h5py's
// `f['gradient'][...].astype('<f4').tobytes()` gives.
std::string gradient_sha256(std::vector<float> const& g) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#error "kembed's run-file checksum assumes a little-endian host"
#endif
  return sha256_hex(g.data(), g.size() * sizeof(float));
}

h5::Handle ordered_group(hid_t loc, char const* name) {
  h5::Handle gcpl = h5::plist(H5Pcreate(H5P_GROUP_CREATE));
  H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  H5Pset_attr_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  H5Pset_obj_track_times(gcpl, false);
  h5::Handle g = h5::group(H5Gcreate2(loc, name, H5P_DEFAULT, gcpl, H5P_DEFAULT));
  if (!g.valid()) throw std::runtime_error(std::string("creating group '") + name + "': " + h5::error_text());
  return g;
}

// Runs a read of something inside `object`, naming it in any error.
template <class F>
auto in_object(std::string const& path, std::string const& object, F&& read) {
  try {
    return read();
  } catch (FileError const&) {
    throw;
  } catch (std::exception const& e) {
    throw FileError(path, object, e.what());
  }
}

}  // namespace

std::string json_quote(std::string const& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string json_array(std::vector<std::string> const& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + json_quote(items[i]);
  return out + "]";
}

namespace {
// The writers' side of the readers' rule: counts never negative, summing to the
// positions (checked where this process holds them all).
void check_counts_to_write(std::int64_t const* counts, std::int64_t n, std::int64_t positions) {
  std::int64_t sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (counts[i] < 0 || counts[i] > positions - sum)
      throw InvalidArgument("run", "count " + std::to_string(counts[i]) + " at entry " + std::to_string(i) +
                                       " is negative or takes the counts past positions = " +
                                       std::to_string(positions));
    sum += counts[i];
  }
  if (sum != positions)
    throw InvalidArgument("run", "the counts sum to " + std::to_string(sum) + " but positions = " +
                                     std::to_string(positions) + "; every position counts once");
}

// The counts' digest a run file stores. Where this process holds every count they are
// checked and digested here, once (a stale digest given with them is replaced); ranks
// that each hold a part must give the digest of all of them.
std::string counts_digest_to_write(RunFile const& run, std::int64_t const* counts, std::int64_t n, bool every_row) {
  if (every_row) {
    check_counts_to_write(counts, n, run.positions);
    return sha256_hex(counts, static_cast<std::size_t>(n) * sizeof(std::int64_t));
  }
  if (run.counts_sha256.size() != 64)
    throw InvalidArgument("run", "a run written by many ranks needs the SHA-256 of every rank's counts "
                                 "(counts_sha256)");
  return run.counts_sha256;
}

// /rank_work: a vector of P per field (docs/FORMAT.md); none for one process.
constexpr char const* rank_work_fields[] = {"terms", "bytes_sent", "fold_microseconds"};
std::int64_t RankWork::*const rank_work_members[] = {&RankWork::terms, &RankWork::bytes_sent,
                                                     &RankWork::fold_microseconds};

void write_rank_work(hid_t file, std::vector<RankWork> const& work) {
  if (work.empty()) return;
  auto group = ordered_group(file, "rank_work");
  std::vector<std::int64_t> values(work.size());
  for (int f = 0; f < 3; ++f) {
    for (std::size_t r = 0; r < work.size(); ++r) values[r] = work[r].*rank_work_members[f];
    auto d = detail::create_matrix(group, rank_work_fields[f], H5T_STD_I64LE, std::int64_t(work.size()), 0, {});
    detail::write_block(d, rank_work_fields[f], H5T_NATIVE_INT64, 0, std::int64_t(work.size()), values.data());
  }
}

std::vector<RankWork> read_rank_work(hid_t file, std::string const& path, std::int64_t ranks) {
  std::vector<RankWork> work;
  if (!h5::exists(file, "/rank_work")) return work;
  std::vector<std::int64_t> values;
  for (int f = 0; f < 3; ++f) {
    std::string const name = std::string("/rank_work/") + rank_work_fields[f];
    std::int64_t n = 0;
    auto d = detail::open_int_vector(file, path, name, &n);  // its storage checked against the file's size
    if (n != ranks)
      throw FileError(path, name,
                      "holds " + std::to_string(n) + " values for a run of " + std::to_string(ranks) +
                          " ranks; the file is damaged");
    values.resize(std::size_t(n));
    work.resize(std::size_t(n));
    detail::read_ints(d, path, name, 0, n, values.data());
    for (std::size_t r = 0; r < work.size(); ++r) work[r].*rank_work_members[f] = values[r];
  }
  return work;
}

// Everything a run file's header holds but the summary: attributes, inputs,
// timings and provenance (docs/FORMAT.md), for either kind of run file.
void write_run_attributes(hid_t file, RunFile const& run, char const* format) {
  detail::write_identity(file, format);
  h5::write_string(file, "run_id", run.run_id);
  h5::write_string(file, "created", run.created.empty() ? detail::utc_now_iso8601() : run.created);
  h5::write_string(file, "backend", run.backend);
  h5::write_int64(file, "threads", run.threads);
  h5::write_int64(file, "ranks", run.ranks);
  h5::write_string(file, "plan", std::string(to_string(run.plan)));
  h5::write_string(file, "plan_used", run.plan_used);  // attributes in the order files always had
  detail::write_settings(file, std::nullopt, run.numeric_mode, run.scale_grad_by_freq);
  h5::write_int64(file, "padding_idx", run.padding_idx);
  h5::write_int64(file, "positions", run.positions);
  h5::write_int64(file, "microbatches", run.microbatches);
  h5::write_int64(file, "microbatch_size", run.microbatch_size);
  h5::write_int64(file, "num_embeddings", run.rows);
  h5::write_int64(file, "embedding_dim", run.cols);
  h5::write_string(file, "gradient_sha256", run.gradient_sha256);
  h5::write_string(file, "counts_sha256", run.counts_sha256);
  detail::write_pooling(file, run.pooling, run.bags);
  auto inputs = ordered_group(file, "inputs");
  for (auto const& input : run.inputs) {
    auto g = ordered_group(inputs, input.role.c_str());
    h5::write_string(g, "path", input.path);
    h5::write_string(g, fingerprint_attribute(input.fingerprint), input.sha256);
    h5::write_int64(g, "bytes", input.bytes);
  }
  auto timings = ordered_group(file, "timings");
  for (auto const& [name, seconds] : run.timings) h5::write_double(timings, name.c_str(), seconds);
  auto provenance = ordered_group(file, "provenance");
  h5::write_string_dataset(provenance, "command_line", run.command_line_json);
  h5::write_string_dataset(provenance, "configuration", run.configuration_json);
  write_rank_work(file, run.rank_work);
}

// Ranks fold their own rows' summary; the finest level is reduced exactly (as
// integer keys and sums) onto the first rank, which writes it.
void reduce_summary(SummaryBuilder& builder, Collective const* collective) {
#if defined(KEMBED_IO_PARALLEL)
  if (collective) {
    auto keys = builder.keys();
    auto const third = int(keys.size() / 3);
    std::vector<std::int32_t> reduced(keys.size());
    MPI_Reduce(keys.data(), reduced.data(), third, MPI_INT32_T, MPI_MIN, 0, collective->comm);
    MPI_Reduce(keys.data() + third, reduced.data() + third, 2 * third, MPI_INT32_T, MPI_MAX, 0, collective->comm);
    auto& counts = builder.counts();
    std::vector<std::int64_t> sums(counts.size());
    MPI_Reduce(counts.data(), sums.data(), int(counts.size()), MPI_INT64_T, MPI_SUM, 0, collective->comm);
    int rank = 0;
    MPI_Comm_rank(collective->comm, &rank);
    if (rank == 0) builder.set_keys(reduced), counts = sums;  // the rank that writes it
  }
#else
  (void)builder, (void)collective;
#endif
}

void write_run_slabs(std::string const& path, RunFile const& given, RowSlab const& mine, SaveOptions const& options,
                     Collective const* collective, std::function<void(RunFile&)> const& complete) {
  RunFile completed;
  RunFile const* header_of = &given;
  RunFile const& run = given;
  if (run.rows < 1 || run.cols < 1 || mine.first < 0 || mine.count < 0 || mine.first > run.rows ||
      mine.count > run.rows - mine.first || (mine.count > 0 && (!mine.gradient || !mine.counts)))
    throw InvalidArgument("run", "rows [" + std::to_string(mine.first) + ", +" + std::to_string(mine.count) +
                                     ") are not rows of a (" + std::to_string(run.rows) + ", " +
                                     std::to_string(run.cols) + ") gradient, or have no data");
  if (run.gradient_sha256.size() != 64)
    throw InvalidArgument("run", "write_run from row slabs needs the whole gradient's SHA-256 (gradient_sha256)");
  std::string const counts_digest =
      counts_digest_to_write(run, mine.counts, mine.count, !collective && mine.first == 0 && mine.count == run.rows);
  if (counts_digest != run.counts_sha256) {
    completed = given;
    completed.counts_sha256 = counts_digest;
    return write_run_slabs(path, completed, mine, options, collective, complete);
  }
  detail::check_padding_to_store("the run", run.padding_idx, run.rows);
  // The gradient's summary (/summary): one process folds it on a thread of its own
  // while the datasets are written (the header comes after them); ranks fold their
  // own rows, then reduce the finest level (exact, so the bits do not depend on the
  // rank count) before rank 0 writes the header.
  SummaryBuilder builder(run.rows, run.cols);
  auto summarize = [&] { builder.add(mine.first, mine.count, mine.gradient, mine.counts); };
  std::future<void> summarizing;
  if (collective)
    summarize();
  else
    summarizing = std::async(std::launch::async, summarize);
  reduce_summary(builder, collective);
  auto header = [&](hid_t file) {
    if (complete) {  // what the caller learnt while the rows were written
      completed = given;
      complete(completed);
      header_of = &completed;
      if (completed.gradient_sha256 != given.gradient_sha256 || completed.counts_sha256 != given.counts_sha256 ||
          completed.rows != given.rows || completed.cols != given.cols)
        throw std::logic_error("write_run: complete() may not change the gradient's shape or digest");
    }
    write_run_attributes(file, *header_of, run_format);
    if (summarizing.valid()) summarizing.get();
    detail::write_summary(file, builder.finish(), options);
  };
  detail::write_slabs(path, "writing the run failed, the file is unchanged", header,
                      {detail::float_rows("gradient", run.rows, run.cols, mine.gradient),
                       detail::int64_rows("counts", run.rows, mine.counts)},
                      mine, options, collective);
}
}  // namespace

void write_run(std::string const& path, RunFile const& run, SaveOptions const& options) {
  if (run.rows < 1 || run.cols < 1 || std::int64_t(run.gradient.size()) != run.rows * run.cols ||
      std::int64_t(run.counts.size()) != run.rows) {
    throw InvalidArgument("run", "run has a gradient of " + std::to_string(run.gradient.size()) + " values and " +
                                     std::to_string(run.counts.size()) + " counts for shape (" +
                                     std::to_string(run.rows) + ", " + std::to_string(run.cols) + ")");
  }
  RunFile header = run;
  header.gradient = {};
  header.counts = {};
  header.gradient_sha256 = gradient_sha256(run.gradient);
  write_run(path, header, RowSlab{0, run.rows, run.gradient.data(), run.counts.data()}, options);
}

void write_run(std::string const& path, RunFile const& run, RowSlab const& mine, SaveOptions const& options,
               Collective const* collective) {
  write_run_slabs(path, run, mine, options, collective, {});
}

void write_run(std::string const& path, RunFile const& run, RowSlab const& all, SaveOptions const& options,
               std::function<void(RunFile&)> const& complete) {
  if (all.first != 0 || all.count != run.rows)
    throw InvalidArgument("run", "write_run with a late header writes all " + std::to_string(run.rows) +
                                     " rows from one process");
  write_run_slabs(path, run, all, options, nullptr, complete);
}

std::string sparse_gradient_sha256(std::int64_t const* rows, float const* values, std::int64_t n, std::int64_t cols) {
  Sha256 hash;
  for (std::int64_t i = 0; i < n; ++i) {
    hash.update(rows + i, sizeof(std::int64_t));
    hash.update(values + i * cols, static_cast<std::size_t>(cols) * sizeof(float));
  }
  return hash.hex_digest();
}

std::string counts_sha256(std::int64_t const* counts, std::int64_t n) {
  return sha256_hex(counts, static_cast<std::size_t>(n) * sizeof(std::int64_t));
}

void write_sparse_run(std::string const& path, RunFile const& run, SparseSlab const& mine, SaveOptions const& options,
                      Collective const* collective) {
  auto const d = run.cols;
  bool const slab_ok = mine.first >= 0 && mine.count >= 0 && mine.total >= 1 && mine.first <= mine.total &&
                       mine.count <= mine.total - mine.first && mine.row_begin >= 0 &&
                       mine.row_begin <= mine.row_end && mine.row_end <= run.rows &&
                       (mine.count == 0 || (mine.rows && mine.values && mine.counts));
  if (run.rows < 1 || d < 1 || !slab_ok)
    throw InvalidArgument("run", "listed rows [" + std::to_string(mine.first) + ", +" + std::to_string(mine.count) +
                                     ") of " + std::to_string(mine.total) + " are not a slab of a sparse (" +
                                     std::to_string(run.rows) + ", " + std::to_string(d) + ") gradient");
  for (std::int64_t i = 0; i < mine.count; ++i)
    if (mine.rows[i] < mine.row_begin || mine.rows[i] >= mine.row_end || (i > 0 && mine.rows[i] <= mine.rows[i - 1]))
      throw InvalidArgument("run", "listed row " + std::to_string(mine.rows[i]) +
                                       " is not ascending within this slab's rows [" +
                                       std::to_string(mine.row_begin) + ", " + std::to_string(mine.row_end) + ")");
  if (run.gradient_sha256.size() != 64)
    throw InvalidArgument("run", "write_sparse_run needs the records' SHA-256 (gradient_sha256)");
  std::string const counts_digest =
      counts_digest_to_write(run, mine.counts, mine.count, !collective && mine.first == 0 && mine.count == mine.total);
  if (counts_digest != run.counts_sha256) {
    RunFile with = run;
    with.counts_sha256 = counts_digest;
    return write_sparse_run(path, with, mine, options, collective);
  }
  detail::check_padding_to_store("the run", run.padding_idx, run.rows);
  // The dense gradient's summary: the listed rows, and one +0.0 row (count 0) in each
  // finest block where this slab's table rows are not all listed.
  SummaryBuilder builder(run.rows, d);
  for (std::int64_t i = 0; i < mine.count; ++i) builder.add(mine.rows[i], 1, mine.values + i * d, mine.counts + i);
  detail::add_unlisted_zeros(builder, mine.rows, mine.count, mine.row_begin, mine.row_end);
  reduce_summary(builder, collective);
  auto header = [&](hid_t file) {
    write_run_attributes(file, run, sparse_run_format);
    h5::write_int64(file, "listed_rows", mine.total);
    detail::write_summary(file, builder.finish(), options);
  };
  detail::write_slabs(path, "writing the run failed, the file is unchanged", header,
                      {detail::int64_rows("rows", mine.total, mine.rows),
                       detail::float_rows("gradient", mine.total, d, mine.values),
                       detail::int64_rows("counts", mine.total, mine.counts)},
                      RowSlab{mine.first, mine.count, mine.values, mine.counts}, options, collective);
}

namespace {
// Whether the file's tag is the sparse run's (anything unreadable: no, and
// check_format then says what is wrong).
bool tagged_sparse(hid_t file) {
  try {
    return h5::read_string(file, "format").value_or("") == sparse_run_format;
  } catch (std::exception const&) {
    return false;
  }
}

// What holding a run's dense form takes, refused up front beyond this machine's
// memory (a small sparse file may declare a huge V).
void check_dense_memory(std::string const& path, RunFile const& run, bool with_gradient) {
  detail::check_size(path, "/gradient", run.rows, run.cols, 4);  // V x d x 4 fits 64 bits
  double const v = double(run.rows), d = double(run.cols);
  if (with_gradient)
    detail::check_memory(path, "", v * (4 * d + 8), "to hold its gradient and counts densely (V x (4d + 8) bytes)");
  else
    detail::check_memory(path, "", v * 8, "to hold its counts densely (V x 8 bytes)");
}

// The counts as stored (entries of a dense or a sparse run), checked and digested.
void check_run_counts(std::string const& path, RunFile const& run, std::vector<std::int64_t> const& stored) {
  detail::check_counts(path, "/counts", stored.data(), std::int64_t(stored.size()), run.positions, 0);
  if (!run.counts_sha256.empty())
    detail::check_digest(path, "/counts", "counts_sha256", run.counts_sha256,
                         counts_sha256(stored.data(), std::int64_t(stored.size())));
}

// A sparse run file's rows, gradient and counts, as the dense gradient and counts.
void read_sparse_datasets(hid_t file, std::string const& path, RunFile& run, bool with_gradient, bool verify) {
  auto const n = run.listed_count;
  if (n < 1) throw FileError(path, "/rows", "listed_rows = " + std::to_string(n) + "; a sparse run lists 1 to num_embeddings rows");
  std::int64_t n_counts = 0;
  auto counts = detail::open_int_vector(file, path, "/counts", &n_counts);
  if (n_counts != n)
    throw FileError(path, "/counts", "must hold listed_rows = " + std::to_string(n) + " entries; it holds " +
                                         std::to_string(n_counts));
  auto gradient = detail::open_float_matrix(file, path, "/gradient", false);
  if (gradient.rows != n || gradient.cols != run.cols)
    throw FileError(path, "/gradient",
                    "has shape (" + std::to_string(gradient.rows) + ", " + std::to_string(gradient.cols) +
                        ") but a sparse run of " + std::to_string(n) + " listed rows of " +
                        std::to_string(run.cols) + " columns needs (" + std::to_string(n) + ", " +
                        std::to_string(run.cols) + ")");
  check_dense_memory(path, run, with_gradient);  // the dense form it is read as
  run.listed_rows = detail::read_listed_rows(file, path, n, run.rows);
  std::vector<std::int64_t> listed_counts(static_cast<std::size_t>(n));
  detail::read_ints(counts, path, "/counts", 0, n, listed_counts.data());
  check_run_counts(path, run, listed_counts);
  run.counts.assign(static_cast<std::size_t>(run.rows), 0);
  for (std::int64_t i = 0; i < n; ++i) run.counts[std::size_t(run.listed_rows[std::size_t(i)])] = listed_counts[std::size_t(i)];
  if (!with_gradient) return;
  std::vector<float> values(static_cast<std::size_t>(n * run.cols));
  detail::read_rows(gradient, path, "/gradient", 0, n, values.data(), false);
  if (verify)
    detail::check_digest(path, "/gradient", "gradient_sha256", run.gradient_sha256,
                         sparse_gradient_sha256(run.listed_rows.data(), values.data(), n, run.cols));
  run.gradient.assign(static_cast<std::size_t>(run.rows * run.cols), 0.0f);
  for (std::int64_t i = 0; i < n; ++i)
    std::copy_n(values.data() + i * run.cols, run.cols,
                run.gradient.data() + run.listed_rows[std::size_t(i)] * run.cols);
}

// A dense run file's gradient and counts.
void read_dense_datasets(hid_t file, std::string const& path, RunFile& run, bool with_gradient, bool verify) {
  auto gradient = detail::open_float_matrix(file, path, "/gradient", false);
  if (gradient.rows != run.rows || gradient.cols != run.cols) {
    throw FileError(path, "/gradient",
                    "has shape (" + std::to_string(gradient.rows) + ", " + std::to_string(gradient.cols) +
                        ") but the attributes say (" + std::to_string(run.rows) + ", " + std::to_string(run.cols) +
                        ")");
  }
  std::int64_t n_counts = 0;
  auto counts = detail::open_int_vector(file, path, "/counts", &n_counts);
  if (n_counts != run.rows)
    throw FileError(path, "/counts", "does not hold one count per row (" + std::to_string(run.rows) + ")");
  check_dense_memory(path, run, with_gradient);
  if (with_gradient) {
    run.gradient.resize(static_cast<std::size_t>(run.rows * run.cols));
    // A gradient may hold infinities (a sum can overflow); read it without the table's finite check.
    if (H5Dread(gradient.dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, run.gradient.data()) < 0)
      throw FileError(path, "/gradient",
                      "cannot be read: the stored data do not match their checksum or cannot be "
                      "decoded, so the file is damaged (HDF5: " +
                          h5::error_text() + ")");
    if (verify)
      detail::check_digest(path, "/gradient", "gradient_sha256", run.gradient_sha256, gradient_sha256(run.gradient));
  }
  run.counts.resize(static_cast<std::size_t>(run.rows));
  detail::read_ints(counts, path, "/counts", 0, run.rows, run.counts.data());
  check_run_counts(path, run, run.counts);
}

// Everything but the datasets: attributes, inputs, timings, provenance.
RunFile read_header(hid_t file, std::string const& path) {
  bool const sparse = tagged_sparse(file);
  detail::check_format(file, path, sparse ? "kembed-sparse-run" : "kembed-run", 1, sparse ? "sparse run" : "run");
  RunFile run;
  auto str = [&](char const* name) { return detail::required_string(file, path, name); };
  auto num = [&](char const* name) { return detail::required_int64(file, path, name); };
  run.kembed_version = str("kembed_version");
  run.run_id = str("run_id");
  run.created = str("created");
  run.backend = str("backend");
  run.threads = num("threads");
  run.ranks = h5::read_int64(file, "ranks").value_or(1);
  run.plan = detail::recorded_plan(file, path);
  run.plan_used = str("plan_used");
  run.numeric_mode = detail::recorded_mode(file, path);
  run.scale_grad_by_freq = detail::recorded_scale(file, path);
  run.padding_idx = num("padding_idx");
  run.positions = num("positions");
  run.microbatches = num("microbatches");
  run.microbatch_size = num("microbatch_size");
  run.pooling = detail::recorded_pooling(file, path);
  run.bags = detail::recorded_bags(file, path, run.pooling);
  run.rows = num("num_embeddings");
  run.cols = num("embedding_dim");
  if (run.rows < 1 || run.cols < 1 || run.positions < 0)
    throw FileError(path, "", "declares a (" + std::to_string(run.rows) + ", " + std::to_string(run.cols) +
                                  ") gradient of " + std::to_string(run.positions) +
                                  " positions; a run has V, d >= 1 and positions >= 0");
  run.padding_idx = detail::stored_padding_idx(path, run.padding_idx, run.rows);
  run.gradient_sha256 = str("gradient_sha256");
  run.counts_sha256 = h5::read_string(file, "counts_sha256").value_or("");
  run.sparse = sparse;
  if (sparse) run.listed_count = num("listed_rows");

  if (auto inputs = detail::open_group_if_present(file, path, "/inputs")) {
    for (auto const& role : h5::link_names(*inputs)) {
      auto g = detail::open_group_if_present(file, path, "/inputs/" + role);
      if (!g) throw FileError(path, "/inputs/" + role, "is listed but cannot be found; the file is damaged");
      InputIdentity in;
      in.role = role;
      in_object(path, "/inputs/" + role, [&] {
        in.path = h5::read_string(*g, "path").value_or("");
        auto chunked = h5::read_string(*g, fingerprint_attribute(Fingerprint::chunks));
        in.fingerprint = chunked ? Fingerprint::chunks : Fingerprint::file;
        in.sha256 = chunked ? *chunked : h5::read_string(*g, "sha256").value_or("");
        in.bytes = h5::read_int64(*g, "bytes").value_or(0);
      });
      run.inputs.push_back(std::move(in));
    }
  }
  if (auto timings = detail::open_group_if_present(file, path, "/timings")) {
    for (char const* phase : timing_phases)
      if (auto seconds = in_object(path, "/timings", [&] { return h5::read_double(*timings, phase); }))
        run.timings.emplace_back(phase, *seconds);
  }
  if (auto provenance = detail::open_group_if_present(file, path, "/provenance")) {
    auto text = [&](char const* name) {
      return in_object(path, std::string("/provenance/") + name,
                       [&] { return h5::read_string_dataset(*provenance, name); });
    };
    run.command_line_json = text("command_line");
    run.configuration_json = text("configuration");
  }
  run.rank_work = read_rank_work(file, path, run.ranks);
  return run;
}
}  // namespace

RunFile read_run(std::string const& path, bool with_gradient, bool verify) {
  return detail::reading(path, [&] {
    auto file = detail::open_for_reading(path);
    RunFile run = read_header(file, path);
    if (run.sparse)
      read_sparse_datasets(file, path, run, with_gradient, verify);
    else
      read_dense_datasets(file, path, run, with_gradient, verify);
    return run;
  });
}

RunFile read_run_header(std::string const& path) {
  return detail::reading(path, [&] {
    auto file = detail::open_for_reading(path);
    return read_header(file, path);
  });
}

std::string read_run_gradient_sha256(std::string const& path) {
  return detail::reading(path, [&] {
    auto file = detail::open_for_reading(path);
    bool const sparse = tagged_sparse(file);
    detail::check_format(file, path, sparse ? "kembed-sparse-run" : "kembed-run", 1, sparse ? "sparse run" : "run");
    return detail::required_string(file, path, "gradient_sha256");
  });
}

std::string file_format(std::string const& path) {
  return detail::reading(path, [&] {
    auto file = detail::open_for_reading(path);
    auto tag = h5::read_string(file, "format");
    if (!tag) throw FileError(path, "", "has no 'format' attribute, so it is not a kembed file");
    if (tag->empty())
      throw FileError(path, "",
                      "has an empty 'format' attribute; kembed never writes one, so the file is damaged (its "
                      "strings do not read back) or was not written by kembed");
    return *tag;
  });
}

}  // namespace kembed::io
