#pragma once
// The forward job's one code path (kembed/job/forward.hpp).
#include <kembed/embedding.hpp>
#include <kembed/embedding_bag.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/table_file.hpp>
#include <kembed/job/detail/io_worker.hpp>
#include <kembed/job/detail/support.hpp>
#include <kembed/job/paths.hpp>
#include <kembed/job/settings.hpp>
#include <kembed/job/team.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <future>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kembed::job::detail {

// Refuses, before anything is read or written, a microbatch below 1 and an output
// that would replace an input or cannot be written (messages name settings as `o` does).
void check_forward_settings(ForwardSettings const& s, Observer const& o);
// Reads ids [first, first + n) and refuses one outside [0, V) with its position.
void read_ids(io::BatchReader const& batch, ForwardSettings const& s, std::int64_t first, std::int64_t n,
              std::int64_t v, std::vector<std::int64_t>& ids);

// The pooling of a forward over `batch`: a bag batch's (sum unless asked); none for
// positions, where asking for one is refused.
std::optional<Pooling> forward_pooling(io::BatchReader const& batch, ForwardSettings const& s, Observer const& o);

// The table's max_norm applies (each microbatch is one forward call, which
// renormalises the rows it references, as torch's forward does), unless the settings
// override it; the other settings do not change a forward.
inline Options forward_options(Config const& table, ForwardSettings const& s) {
  Options options;
  if (table.renormalises()) {
    options.max_norm = table.max_norm;
    options.norm_type = table.norm_type;
  }
  if (s.max_norm) options.max_norm = s.max_norm;
  if (s.norm_type) options.norm_type = *s.norm_type;
  return options;
}

// This rank's part of a block of n units (the block's ranges, in rank order): first, count.
inline std::pair<std::int64_t, std::int64_t> part_of_block(std::int64_t n, int ranks, int rank) {
  auto const parts = Ownership::ranges(n, ranks);
  return {parts.first_row(rank), parts.slots(rank)};
}

// The inputs' whole-file SHA-256s (the format's), on a thread of their own; a team
// hashes on its first rank only.
struct InputsHasher {
  std::string table_sha, ids_sha;
  std::exception_ptr error;
  double seconds = 0;
  JoiningThread thread;
  InputsHasher(bool here, ForwardSettings const& s) {
    if (!here) return;
    thread = JoiningThread([this, &s] {
      auto const h0 = std::chrono::steady_clock::now();
      try {
        table_sha = io::sha256_file(s.table);
        ids_sha = io::sha256_file(s.ids);
      } catch (...) {
        error = std::current_exception();
      }
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count();
    });
  }
};

// The table's rows this rank owns, the ids' reader and the pooling.
struct ForwardInputs {
  io::TableFile table;
  io::BatchReader ids;
  std::optional<Pooling> pooling;
};

// This rank's inputs, or every rank's first error.
template <class Team>
ForwardInputs open_forward_inputs(Team const& team, ForwardSettings const& s, Observer const& observer) {
  std::exception_ptr error;
  std::optional<io::TableFile> table;
  std::optional<io::BatchReader> ids;
  std::optional<Pooling> pooling;
  try {
    if (team.size() == 1) {
      table = io::load_table(s.table);
    } else {  // the header first (no rows), then this rank's rows
      auto const rows = Ownership::ranges(io::load_rows(s.table, 0, 0).config.num_embeddings, team.size());
      table = io::load_rows(s.table, rows.first_row(team.rank()), rows.slots(team.rank()));
    }
    ids.emplace(s.ids, false, s.ids_dataset);
    pooling = forward_pooling(*ids, s, observer);
  } catch (...) {
    error = std::current_exception();
  }
  team.agree(error);
  return {std::move(*table), std::move(*ids), pooling};  // NOLINT: set where no rank failed
}

template <class Space, class Team>
ForwardReport run_forward(Space const& space, Team const& team, ForwardSettings const& s, Observer const& observer) {
  static_assert(is_forward_team_v<Team, Space>, "run_forward: a Team with a forward Lookup (kembed/job/team.hpp)");
  using clock = std::chrono::steady_clock;
  auto const seconds = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };
  auto const t_start = clock::now();
  check_forward_settings(s, observer);
  ForwardReport report;
  auto t0 = clock::now();
  auto in = open_forward_inputs(team, s, observer);
  auto& table = in.table;
  auto const& ids = in.ids;
  auto const pooling = in.pooling;
  auto const v = table.config.num_embeddings, d = table.config.embedding_dim;
  auto const options = forward_options(table.config, s);
  typename Team::template Lookup<Space> const lookup(
      team, space, v, d, FloatsRef(table.weight.data(), Shape{std::int64_t(table.weight.size()) / d, d}), options,
      pooling);
  table.weight = {};
  report.read_table_seconds = seconds(t0);
  // The unit: positions, or a bag batch's bags (one output row each).
  auto const t = pooling ? ids.info().bags : ids.info().positions;
  // The inputs are hashed on a thread of their own; ids are read and y written on
  // another (one HDF5 call at a time, in order), while this thread looks up.
  InputsHasher hasher(team.rank() == 0, s);
  io::ForwardWriter out(s.out, t, d, "", "", {}, pooling, team.collective());
  std::int64_t const block = std::min(t, s.microbatch);
  // Two blocks of ids and of y: one being read or written while the other is looked
  // up. Each rank reads, looks up and writes its part of every block.
  std::int64_t const most = part_of_block(block, team.size(), 0).second;
  ForwardBlock blocks[2];
  std::vector<float> y[2];
  for (int k = 0; k < 2; ++k) {
    blocks[k].ids.resize(static_cast<std::size_t>(most));
    y[k].resize(static_cast<std::size_t>(most * d));
  }
  std::future<void> written[2];
  IoWorker io(team.reads_ahead());  // after what its tasks use: joined before they go
  auto read = [&](int k, std::int64_t p) {
    return io.submit([&, k, p] {
      auto const [first, n] = part_of_block(std::min(block, t - p), team.size(), team.rank());
      auto& b = blocks[k];
      if (pooling)
        read_bag_block(ids, s.ids, s.ids_dataset, p + first, n, v, b.offsets, nullptr, b.ids, b.weights);
      else
        read_ids(ids, s, p + first, n, v, b.ids);
    });
  };
  bool const reports = team.rank() == 0;  // one progress line, from the first rank
  if (reports && observer.log)
    observer.log("kembed forward: " + with_commas(t) +
                 (pooling ? " bags, pooling " + std::string(to_string(*pooling)) : " positions") +
                 ", V = " + with_commas(v) + ", d = " + std::to_string(d) + ", " + Space::name() + " with " +
                 std::to_string(space.concurrency()) + " thread(s)" +
                 (team.size() > 1 ? " on each of " + std::to_string(team.size()) + " ranks" : ""));
  if (reports && observer.unit) observer.unit(pooling ? "bags" : "positions");
  if (reports && observer.progress) observer.progress(0, t, 0);
  std::future<void> pending = t > 0 ? read(0, 0) : std::future<void>();
  for (std::int64_t p = 0, k = 0; p < t; p += block, k = 1 - k) {
    auto const [first, n] = part_of_block(std::min(block, t - p), team.size(), team.rank());
    std::exception_ptr bad_ids;  // a bad id on any rank stops every rank, the first's named
    try {
      pending.get();
    } catch (...) {
      bad_ids = std::current_exception();
    }
    team.agree(bad_ids);
    if (p + block < t) pending = read(int(1 - k), p + block);
    t0 = clock::now();
    if (written[k].valid()) written[k].get();  // y[k]'s last block is in the file
    report.write_seconds += seconds(t0);
    t0 = clock::now();
    lookup(space, blocks[k], n, y[k].data());
    report.forward_seconds += seconds(t0);
    written[k] = io.submit([&out, rows = y[k].data(), at = p + first, n = n] { out.write(at, n, rows); });
    if (reports && observer.progress) observer.progress(p + std::min(block, t - p), t, 0);
  }
  t0 = clock::now();
  // y goes to storage while the hash may still run; commit() then writes little.
  auto synced = io.submit([&] { out.sync_so_far(); });
  for (auto& w : written)
    if (w.valid()) w.get();
  synced.get();
  auto const w0 = clock::now();
  hasher.thread.join();
  report.hash_wait_seconds = seconds(w0);
  report.hash_seconds = hasher.seconds;
  std::exception_ptr hash_error = hasher.error;
  team.agree(hash_error);
  out.set_inputs(hasher.table_sha, hasher.ids_sha);
  out.commit();
  report.write_seconds += seconds(t0);
  report.out = s.out;
  report.backend = Space::name();
  report.positions = t;
  report.pooling = pooling ? std::string(to_string(*pooling)) : std::string();
  report.cols = d;
  report.threads = static_cast<int>(space.concurrency());
  report.ranks = team.size();
  report.total_seconds = seconds(t_start);
  return report;
}

}  // namespace kembed::job::detail
