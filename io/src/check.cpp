#include "common.hpp"
#include "run_checks.hpp"
#include "summary_file.hpp"

#include <kembed/io/check.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/optim_file.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/summary.hpp>

#include <algorithm>

namespace kembed::io {
namespace {

constexpr std::int64_t piece_bytes = std::int64_t{16} << 20;  // read at a time

// The stored summary against the one recomputed from the rows (an older file's,
// without summary_sha256, is checked this way too).
void check_summary(std::string const& path, SummaryBuilder const& rebuilt, CheckReport& report) {
  auto const stored = read_summary(path);  // its digest and block counts
  if (stored.empty()) {
    report.unverified.push_back("summary: none stored (an older file)");
    return;
  }
  if (!same_bits(stored, rebuilt.finish()))
    throw FileError(path, "/summary", "is not the summary of this gradient (recomputed from its rows, the bits differ)");
  report.verified.push_back(std::string("summary: ") + (stored.verified ? "summary_sha256 matches, and " : "") +
                            "it is the gradient's, recomputed from its rows");
}

void counts_line(RunFile const& run, CheckReport& report) {
  report.verified.push_back("counts: each in [0, positions], summing to positions = " + std::to_string(run.positions));
  if (run.counts_sha256.empty()) report.unverified.push_back("counts: no counts_sha256 (an older file)");
  else report.verified.push_back("counts: counts_sha256 matches");
}

void check_dense_run(std::string const& path, RunFile const& run, CheckReport& report) {
  detail::reading(path, [&] {
    auto file = detail::open_for_reading(path);
    auto gradient = detail::open_float_matrix(file, path, "/gradient", false);
    std::int64_t n = 0;
    auto counts = detail::open_int_vector(file, path, "/counts", &n);
    if (gradient.rows != run.rows || gradient.cols != run.cols || n != run.rows)
      throw FileError(path, "/gradient", "and /counts do not have the attributes' shape");
    std::int64_t const piece = std::max<std::int64_t>(1, piece_bytes / (4 * run.cols));
    std::vector<float> rows(static_cast<std::size_t>(std::min(piece, run.rows) * run.cols));
    std::vector<std::int64_t> tally(static_cast<std::size_t>(std::min(piece, run.rows)));
    Sha256 g, c;
    detail::CountsCheck check(path, "/counts", run.positions, 0);
    SummaryBuilder summary(run.rows, run.cols);
    for (std::int64_t at = 0; at < run.rows; at += piece) {
      std::int64_t const k = std::min(piece, run.rows - at);
      detail::read_rows(gradient, path, "/gradient", at, k, rows.data(), false);
      detail::read_ints(counts, path, "/counts", at, k, tally.data());
      g.update(rows.data(), std::size_t(k * run.cols) * sizeof(float));
      c.update(tally.data(), std::size_t(k) * sizeof(std::int64_t));
      check.add(at, tally.data(), k);
      summary.add(at, k, rows.data(), tally.data());
    }
    check.finish();
    detail::check_digest(path, "/gradient", "gradient_sha256", run.gradient_sha256, g.hex_digest());
    if (!run.counts_sha256.empty()) detail::check_digest(path, "/counts", "counts_sha256", run.counts_sha256, c.hex_digest());
    report.verified.push_back("gradient: gradient_sha256 matches");
    counts_line(run, report);
    check_summary(path, summary, report);
  });
}

void check_sparse_run(std::string const& path, RunFile const& run, CheckReport& report) {
  detail::reading(path, [&] {
    auto file = detail::open_for_reading(path);
    auto const u = run.listed_count;
    auto const listed = detail::read_listed_rows(file, path, u, run.rows);  // 8 bytes a listed row
    auto gradient = detail::open_float_matrix(file, path, "/gradient", false);
    std::int64_t n = 0;
    auto counts = detail::open_int_vector(file, path, "/counts", &n);
    if (gradient.rows != u || gradient.cols != run.cols || n != u)
      throw FileError(path, "/gradient", "and /counts do not hold listed_rows entries of the gradient's width");
    std::int64_t const piece = std::max<std::int64_t>(1, piece_bytes / (4 * run.cols));
    std::vector<float> values(static_cast<std::size_t>(std::min(piece, std::max<std::int64_t>(u, 1)) * run.cols));
    std::vector<std::int64_t> tally(static_cast<std::size_t>(std::min(piece, std::max<std::int64_t>(u, 1))));
    Sha256 g, c;
    detail::CountsCheck check(path, "/counts", run.positions, 0);
    SummaryBuilder summary(run.rows, run.cols);
    for (std::int64_t at = 0; at < u; at += piece) {
      std::int64_t const k = std::min(piece, u - at);
      detail::read_rows(gradient, path, "/gradient", at, k, values.data(), false);
      detail::read_ints(counts, path, "/counts", at, k, tally.data());
      for (std::int64_t i = 0; i < k; ++i) {
        g.update(&listed[std::size_t(at + i)], sizeof(std::int64_t));
        g.update(values.data() + i * run.cols, std::size_t(run.cols) * sizeof(float));
        summary.add(listed[std::size_t(at + i)], 1, values.data() + i * run.cols, tally.data() + i);
      }
      c.update(tally.data(), std::size_t(k) * sizeof(std::int64_t));
      check.add(at, tally.data(), k);
    }
    check.finish();
    detail::add_unlisted_zeros(summary, listed.data(), u, 0, run.rows);
    detail::check_digest(path, "/gradient", "gradient_sha256", run.gradient_sha256, g.hex_digest());
    if (!run.counts_sha256.empty()) detail::check_digest(path, "/counts", "counts_sha256", run.counts_sha256, c.hex_digest());
    report.verified.push_back("rows: " + std::to_string(u) + " listed, ascending within [0, num_embeddings)");
    report.verified.push_back("gradient: gradient_sha256 matches (the listed rows' records)");
    counts_line(run, report);
    check_summary(path, summary, report);
  });
}

void check_checkpoint(std::string const& path, CheckReport& report) {
  auto const c = read_checkpoint(path, true);  // every row: the data digests are checked there
  report.verified.push_back("attributes: checkpoint_sha256 matches");
  report.verified.push_back(std::string("gradient: gradient_sha256 matches") + (c.sparse ? " (the listed rows' records)" : ""));
  report.verified.push_back("counts: counts_sha256 matches");
}

// A bag batch's offsets (each piece's values checked by read_bags), dy per bag and
// weights, in pieces.
void check_bags(BatchReader const& batch, CheckReport& report) {
  auto const& info = batch.info();
  std::int64_t const piece = std::max<std::int64_t>(1, piece_bytes / (4 * info.dim + 8));
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(std::min(piece, info.bags) + 1));
  std::vector<float> values(static_cast<std::size_t>(std::min(piece, std::max(info.bags, info.positions)) *
                                                     std::max<std::int64_t>(info.dim, 1)));
  for (std::int64_t at = 0; at < info.bags; at += piece)
    batch.read_bags(at, std::min(piece, info.bags - at), offsets.data(), values.data());
  for (std::int64_t at = 0; info.weighted && at < info.positions; at += piece)
    batch.read_weights(at, std::min(piece, info.positions - at), values.data());
  report.verified.push_back("offsets: from 0, non-decreasing, to T = " + std::to_string(info.positions));
  report.verified.push_back("dy: every value finite (one row per bag)");
  if (info.weighted) report.verified.push_back("per_sample_weights: every value finite");
}

void check_batch(std::string const& path, CheckReport& report) {
  BatchReader batch(path, true);
  auto const& info = batch.info();
  bool const bags = info.bags > 0;  // dy is then per bag (check_bags)
  std::int64_t const piece = std::max<std::int64_t>(1, piece_bytes / (4 * info.dim + 8));
  std::vector<std::int64_t> ids(static_cast<std::size_t>(std::min(piece, info.positions)));
  std::vector<float> dy(bags ? 0 : static_cast<std::size_t>(std::min(piece, info.positions) * info.dim));
  auto const v = info.meta.num_embeddings;
  for (std::int64_t at = 0; at < info.positions; at += piece) {
    std::int64_t const k = std::min(piece, info.positions - at);
    batch.read(at, k, ids.data(), bags ? nullptr : dy.data());  // refuses dy that is not finite
    for (std::int64_t i = 0; i < k; ++i)
      if (ids[std::size_t(i)] < 0 || (v > 0 && ids[std::size_t(i)] >= v))
        throw FileError(path, "/ids", "holds " + std::to_string(ids[std::size_t(i)]) + " at position " +
                                          std::to_string(at + i) + ", outside [0, " +
                                          (v > 0 ? std::to_string(v) + ") (its num_embeddings)" : "inf)"));
  }
  if (bags)
    check_bags(batch, report);
  else
    report.verified.push_back("dy: every value finite");
  report.verified.push_back(v > 0 ? "ids: within [0, num_embeddings = " + std::to_string(v) + ")" : "ids: none negative");
  report.unverified.push_back("a batch carries no digest: the runs that read it record its SHA-256");
}

}  // namespace

bool check_run_summary(std::string const& path, RunFile const& run) {
  auto const stored = read_summary(path);  // its digest and block counts
  if (stored.empty()) return false;
  SummaryBuilder rebuilt(run.rows, run.cols);
  rebuilt.add(0, run.rows, run.gradient.data(), run.counts.data());
  if (!same_bits(stored, rebuilt.finish()))
    throw FileError(path, "/summary", "is not the summary of this gradient (recomputed from its rows, the bits differ)");
  return true;
}

void check_memory(std::string const& path, std::string const& what, double bytes) {
  detail::check_memory(path, "", bytes, what);
}

CheckReport check_file(std::string const& path) {
  CheckReport report;
  report.format = file_format(path);
  if (is_run_format(report.format)) {
    auto const run = read_run_header(path);
    if (run.sparse)
      check_sparse_run(path, run, report);
    else
      check_dense_run(path, run, report);
  } else if (report.format == checkpoint_format) {
    check_checkpoint(path, report);
  } else if (report.format == table_format) {
    auto const t = load_rows(path, 0, 0);
    check_table_finite(path, 0, t.config.num_embeddings);
    report.verified.push_back("weight: every value finite");
    report.unverified.push_back("a table carries no digest: the runs that read it record its SHA-256");
  } else if (report.format == batch_format) {
    check_batch(path, report);
  } else if (report.format == optim_state_format) {
    auto const f = load_optim_state(path);  // refuses what is not finite, or not its SHA-256
    report.verified.push_back("settings: settings_sha256 matches (settings, step, digests), and they are valid for " +
                              std::string(to_string(f.settings.optimizer)));
    report.verified.push_back("state: state_sha256 matches, and every value is finite");
  } else {
    throw FileError(path, "",
                    "is a '" + report.format +
                        "' file; kembed info --check verifies tables, batches, runs, "
                        "checkpoints and optimizer states");
  }
  report.verified.insert(report.verified.begin(), "every chunk read: its Fletcher-32 checksum matches");
  return report;
}

}  // namespace kembed::io
