#pragma once
// The batch job's one code path (kembed/job/backward.hpp), for any team: a team
// gives each rank its rows (the gradient it holds) and its part of every block of
// positions (contiguous, in rank order), reads and writes files collectively, and
// makes every rank throw the first rank's error. Every step that can fail on one
// rank alone runs inside together(), so no rank waits for one that has stopped.
// run() reads as the job's phases; the state they share is the members below.
#include <kembed/detail/kernel_common.hpp>
#include <kembed/embedding.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/table_file.hpp>
#include <kembed/job/detail/block_pipeline.hpp>
#include <kembed/job/detail/row_moves.hpp>
#include <kembed/job/detail/run_record.hpp>
#include <kembed/job/detail/support.hpp>
#include <kembed/job/settings.hpp>
#include <kembed/job/team.hpp>

#include <signal.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace kembed::job::detail {

template <class ExecutionSpace, class Team>
class BackwardJob {
  using clock = std::chrono::steady_clock;
  using Layer = typename Team::template Layer<ExecutionSpace>;
  using matrix_type = typename Layer::matrix_type;
  using Block = BlockPipeline::Block;

 public:
  BackwardJob(ExecutionSpace const& space, Team const& team, BackwardSettings const& s, Observer const& observer)
      : space_(space), team_(team), s_(s), observer_(observer) {}

  // The job's phases in order, each in a profiling region of its own.
  BackwardReport run() {
    start_ = clock::now();
    phase("kembed::job::resolve", [&] { resolve(); });
    phase("kembed::job::open_inputs", [&] { open_inputs(); });
    phase("kembed::job::resume", [&] { resume(); });
    phase("kembed::job::fold", [&] { fold(); });
    phase("kembed::job::publish", [&] { publish(); });
    record_.bytes_exchanged = team_.sum(layer_->bytes_sent());
    return report_of(record_, s_, seconds(start_));
  }

 private:
  template <class F>
  static void phase(char const* name, F&& step) {
    kembed::detail::ScopedRegion region(name);
    step();
  }

  // The settings as run (the command line's over the table file's, whose values do
  // not change the gradient and are not read), the paths checked before anything is
  // read or written, and the job's id.
  void resolve() {
    if (s_.microbatch < 1)
      throw InvalidArgument(
          "microbatch", observer_.name_of("microbatch") + " must be at least 1, got " + std::to_string(s_.microbatch));
    if (s_.checkpoint_every < 0)
      throw InvalidArgument("checkpoint_every", observer_.name_of("checkpoint_every") + " must be >= 0, got " +
                                                    std::to_string(s_.checkpoint_every));
    checkpoint_path_ = s_.checkpoint.empty() ? s_.out + ".checkpoint" : s_.checkpoint;
    together([&] {
      if (team_.rank() == 0) found_ = check_job_paths(s_, checkpoint_path_, observer_);
    });
    resuming_ = !team_.broadcast(found_ ? "resume" : "").empty();
    record_.job_id = team_.broadcast(team_.rank() == 0 ? make_run_id() : "");
    auto const t0 = clock::now();
    io::TableFile table;
    together([&] { table = io::load_rows(s_.table, 0, 0); });
    auto const v = table.config.num_embeddings, d = table.config.embedding_dim;
    together([&] {
      options_ = options_as_run(table.config);
      record_.config = make_config(v, d, options_);  // the whole table's, on every rank
    });
    record_.seconds.read_table = seconds(t0);
    files_ = Ownership::ranges(v, team_.size());
    record_.config.sparse = s_.sparse || table.config.sparse;  // a row-sparse run (docs/FORMAT.md)
    record_.backend = ExecutionSpace::name();
    record_.threads = static_cast<int>(space_.concurrency());
    record_.ranks = team_.size();
    record_.microbatch_size = s_.microbatch;
  }
  Options options_as_run(Config const& file) const {
    Options options;
    if (file.has_padding()) options.padding_idx = file.padding_idx;
    options.plan = s_.plan.value_or(file.plan);
    options.mode = s_.mode.value_or(file.mode);
    if (s_.no_padding) options.padding_idx.reset();
    if (s_.padding_idx) options.padding_idx = s_.padding_idx;
    options.scale_grad_by_freq = s_.scale_grad_by_freq.value_or(file.scale_grad_by_freq);
    return options;
  }

  // The batch, its shape checked against the table's, and the inputs' fingerprints,
  // hashed on a thread of its own while the job reads and folds (the batch's pages,
  // read once from storage, serve both): each rank its own run of 16 MiB chunks, or
  // the first rank whole files (Fingerprint::file); only resuming, checkpointing and
  // publishing need them (hashed() waits). A resume keeps its checkpoint's kind.
  void open_inputs() {
    auto const d = record_.config.embedding_dim;
    together([&] {
      batch_.emplace(s_.batch, true, s_.ids_dataset, s_.dy_dataset, team_.collective());
      if (batch_->info().dim != d)
        throw io::FileError(s_.batch, "/" + s_.dy_dataset,
                            "has " + std::to_string(batch_->info().dim) + " columns but the table " + s_.table +
                                " has embedding_dim = " + std::to_string(d) + "; dy must be (T, embedding_dim)");
    });
    record_.positions = batch_->info().positions;
    own_rows();
    if (batch_->info().bags > 0 || s_.pooling) open_bags();
    record_.table.path = s_.table;
    record_.batch.path = s_.batch;
    auto const kind = io::parse_fingerprint(
        team_.broadcast(std::string(io::to_string(found_ ? found_->fingerprint : s_.fingerprint))));
    record_.table.fingerprint = record_.batch.fingerprint = kind;
    if (kind == io::Fingerprint::chunks || team_.rank() == 0) hasher_ = JoiningThread([this] { hash_inputs(); });
  }
  // This rank's part of the inputs' fingerprints: whole digests (file), or its chunks'.
  void hash_inputs() {
    auto const h0 = clock::now();
    try {
      for (auto* id : {&record_.table, &record_.batch}) {
        if (id->fingerprint == io::Fingerprint::file) {
          id->sha256 = io::sha256_file(id->path, &id->bytes);
          continue;
        }
        id->bytes = io::file_bytes(id->path);
        auto const [first, end] = io::chunks_of(id->bytes, team_.size(), team_.rank());
        id->sha256 = io::sha256_of_chunks(id->path, first, end);  // combined in hashed()
      }
    } catch (...) {
      hash_error_ = std::current_exception();
    }
    record_.seconds.hash = seconds(h0);
  }
  // The layer of this rank's rows. Many ranks own them spread (row mod P, the hot rows
  // placed by count: kembed/core/ownership.hpp) unless asked for the files' ranges,
  // which needs a pass over the batch's ids first (kept for scale_grad_by_freq=batch).
  void own_rows() {
    Ownership owners = files_;
    if (team_.size() > 1 && s_.owners == RowOwners::spread) {
      ids_counted_ = count_ids();
      together([&] { owners = team_.own_rows_for(ids_counted_); });
    }
    together([&] { layer_.emplace(team_, space_, owners, record_.config.embedding_dim, options_); });
    moves_ = !(layer_->ownership() == files_);
  }

  // A bag batch: its pooling (sum unless asked), and the layer's bags, over the
  // whole table for max (its argmax reads the rows as stored); the job then counts
  // bags (microbatch, checkpoint_every, progress).
  void open_bags() {
    auto const& info = batch_->info();
    together([&] {
      if (info.bags == 0)
        throw InvalidArgument("pooling", observer_.name_of("pooling") + " pools bags, but " + s_.batch +
                                             " is a batch of positions (it has no /offsets)");
      if constexpr (!has_bag_layer_v<Layer>) {
        throw InvalidArgument("batch", s_.batch + " is a bag batch, and this team's layer folds no bags");
      } else {
        auto const pooling = s_.pooling.value_or(Pooling::sum);
        if (info.weighted && pooling != Pooling::sum)
          throw InvalidArgument("pooling", s_.batch + " has per_sample_weights, which pool with " +
                                               observer_.name_of("pooling") + " sum only (as torch's)");
        std::optional<io::TableFile> table;
        if (pooling == Pooling::max) table = io::load_table(s_.table);
        auto const v = record_.config.num_embeddings, d = record_.config.embedding_dim;
        FloatsRef const rows = table ? FloatsRef(table->weight.data(), Shape{v, d}) : FloatsRef{};
        layer_->use_bags(space_, pooling, table ? &rows : nullptr);
        record_.pooling = pooling;
        record_.bags = info.bags;
      }
    });
  }

  // The inputs' digests, on every rank (and the table's check, if queued, passed).
  void hashed() {
    if (table_checked_.valid()) together([&] { table_checked_.get(); });
    if (inputs_known_) return;
    together([&] {
      hasher_.join();
      if (hash_error_) std::rethrow_exception(hash_error_);
    });
    for (auto* id : {&record_.table, &record_.batch}) {
      if (id->fingerprint == io::Fingerprint::chunks) {
        auto const digests = team_.gather_bytes(id->sha256);  // every chunk's, in file order
        id->sha256 = io::sha256_hex(digests.data(), digests.size());
      }
      id->sha256 = team_.broadcast(id->sha256);
      id->bytes = std::stoll(team_.broadcast(std::to_string(id->bytes)));
    }
    inputs_known_ = true;
  }

  // The carry (this rank's rows) at +0.0, or as the checkpoint left it; every call
  // continues it in place. A sparse run holds only the rows it has seen: no (rows, d)
  // gradient at all. scale_grad_by_freq=batch counts the whole batch's ids first.
  void resume() {
    auto const rows = layer_->row_count();
    if (sparse())
      carry_ = layer_->sparse_carry(space_);
    else
      grad_ = matrix_type("kembed::job::gradient", rows, record_.config.embedding_dim);
    counts_.assign(static_cast<std::size_t>(rows), 0);
    if (resuming_)
      resume_from_checkpoint();
    else if (s_.resume)
      log("kembed backward: no checkpoint at " + checkpoint_path_ + "; starting from the beginning");
    record_.resumed_from = done();
    if (record_.config.scale_grad_by_freq == FreqScale::batch) batch_counts_ = count_batch();
  }
  void resume_from_checkpoint() {
    hashed();
    io::Checkpoint ckpt;
    std::int64_t carried = 0;  // this rank's counts, summed
    auto const first_row = files_.first_row(team_.rank()), d = record_.config.embedding_dim;
    together([&] {
      try {
        ckpt = io::read_checkpoint(checkpoint_path_, true, first_row, files_.slots(team_.rank()));
        carried = check_carried(ckpt, checkpoint_path_, first_row, record_.config.padding_idx,
                                record_.config.mode == Mode::deterministic);
      } catch (io::FileError const& e) {
        refuse_checkpoint(e);
      }
      check_resumable(ckpt, checkpoint_path_, record_.table, record_.batch, record_.config, s_.microbatch,
                      record_.positions, observer_, record_.pooling);
      if (bagged()) check_bag_position(ckpt);
    });
    verify_parts(ckpt, checkpoint_path_, carried);
    auto carried_rows = from_files(ckpt, d);  // this rank's slots of what the files' ranks read
    together([&] {
      if (sparse()) {
        carry_ = layer_->sparse_carry(space_, device_listed(carried_rows, d));
      } else {
        std::vector<float> g(std::size_t(layer_->row_count() * d), 0.0f);
        for (std::size_t i = 0; i < carried_rows.rows.size(); ++i)
          std::copy_n(carried_rows.values.data() + i * std::size_t(d), d, g.data() + carried_rows.rows[i] * d);
        Kokkos::deep_copy(grad_, host_matrix(g.data(), layer_->row_count(), d));
      }
      for (std::size_t i = 0; i < carried_rows.rows.size(); ++i)
        counts_[std::size_t(carried_rows.rows[i])] = carried_rows.counts[i];
      if (!ckpt.job_id.empty()) record_.job_id = ckpt.job_id;  // the same job, continued
      record_.position = ckpt.position;
      record_.bag = ckpt.bags;
      record_.microbatches = ckpt.microbatches;
      record_.elapsed_before = ckpt.elapsed_seconds;
    });
    log("kembed backward: resuming from " + checkpoint_path_ + " at " + unit() + " " + with_commas(done()) + " of " +
        with_commas(units()));
  }
  // A bag checkpoint stops between bags: at bag k, position offsets[k].
  void check_bag_position(io::Checkpoint const& c) const {
    std::int64_t at = -1;
    if (c.bags >= 0 && c.bags <= record_.bags) batch_->read_bags(c.bags, 0, &at, nullptr);
    if (at != c.position)
      refuse_checkpoint(io::FileError(checkpoint_path_, "",
                                      "stops at bag " + std::to_string(c.bags) + " and position " +
                                          std::to_string(c.position) + ", which is not where that bag starts in " +
                                          s_.batch + ": the checkpoint is damaged or was edited"));
  }

  // Folds the batch in blocks of at least 64 Ki positions (each rank reads its part),
  // reading each next block while this one folds, and checkpoints after the first
  // block that reaches each multiple of checkpoint_every (blocks end there). Past 16
  // ranks a block is 4 Ki positions a rank, so that each exchange's P - 1 latencies
  // stay per 4 Ki positions a rank; 64 Ki a rank, as the model first had it, was 1.4x
  // slower at P = 2 here (docs/SCALING.md, "The model").
  void fold() {
    std::int64_t const t = units(), d = record_.config.embedding_dim;
    std::int64_t const block = std::max({s_.microbatch, std::int64_t{65536}, std::int64_t{4096} * team_.size()});
    BlockPipeline pipe(team_.reads_ahead(), std::min(block, t) / team_.size() + 1, d, [this](Block& b) {
      if (bagged())
        read_bags(b);
      else
        read_part(b.a, b.b - b.a, b.ids, b.dy);
    });
    auto const read_from = [&](std::int64_t first) {
      std::int64_t const n = std::min(t - first, block_end(first, block) - first);
      auto const range = part(first, n);
      pipe.read_ahead(first, n, range.first, range.second);
    };
    log_start();
    if (team_.rank() == 0 && observer_.unit) observer_.unit(unit() + "s");
    progress(done(), t, record_.resumed_from);
    if (done() < t) read_from(done());
    // The table's values do not change the gradient, but the run names the table as
    // its input: each rank checks that its rows are finite, after the first read.
    table_checked_ = pipe.submit([this, first = files_.first_row(team_.rank()), rows = files_.slots(team_.rank())] {
      io::check_table_finite(s_.table, first, rows);
    });
    auto const crash_at = fault_position();
    std::int64_t last_checkpoint = done();
    while (done() < t) {
      Block* blk = nullptr;
      together([&] { blk = &pipe.take(); });
      record_.seconds.read += blk->read_seconds;
      if (done() + blk->n < t) read_from(done() + blk->n);
      if (bagged()) {
        fold_bags(*blk);
        record_.position += team_.sum(blk->offsets[std::size_t(blk->b - blk->a)] - blk->offsets[0]);  // every rank's
      } else {
        fold_block(*blk);
        record_.position += blk->n;
      }
      if (bagged()) record_.bag += blk->n;
      progress(done(), t, record_.resumed_from);
      if (crash_at && done() >= *crash_at) ::raise(SIGKILL);  // a test's simulated crash
      auto const every = s_.checkpoint_every;
      if (every > 0 && done() < t && done() / every > last_checkpoint / every) {
        checkpoint(pipe);
        last_checkpoint = done();
      }
    }
    if (checkpoint_written_.valid()) together([&] { checkpoint_written_.get(); });
    // The table's check is the I/O thread's last HDF5 work: done before this thread's
    // (HDF5 is not thread-safe), and a table it refuses leaves no run file.
    if (table_checked_.valid()) together([&] { table_checked_.get(); });
  }
  // One block into the carry. In mode deterministic each row's tree depends on the
  // split, so the microbatch (a range of global positions) is the size of each call,
  // and scale_grad_by_freq=call counts each call's ids; otherwise the bits do not
  // depend on it and the block is one call (docs/PERFORMANCE.md).
  void fold_block(Block const& blk) {
    auto const t0 = clock::now();
    auto const& c = record_.config;
    std::int64_t const d = c.embedding_dim, m = s_.microbatch;
    std::int64_t const call = c.mode == Mode::deterministic || c.scale_grad_by_freq == FreqScale::call ? m : blk.n;
    together([&] {
      for (std::int64_t k = blk.position; k < blk.position + blk.n; k += call) {
        std::int64_t const n = std::min(call, blk.position + blk.n - k);
        std::int64_t const lo = std::clamp(k, blk.a, blk.b), hi = std::clamp(k + n, blk.a, blk.b);  // this rank's
        auto const* ids = blk.ids.data() + (lo - blk.a);
        auto const* dy = blk.dy.data() + (lo - blk.a) * d;
        if (sparse()) {
          layer_->backward_sparse(space_, ids, dy, hi - lo, carry_, counts_.data(), batch_counts_);
        } else {
          layer_->backward(space_, ids, dy, hi - lo, grad_, counts_.data(), batch_counts_);
          folded_by_plan_[layer_->last_path().plan_name()] += layer_->last_positions();
        }
        record_.microbatches += (n + m - 1) / m;  // as the split would have had
      }
      space_.fence();
    });
    record_.seconds.backward += seconds(t0);
  }
  // One block of bags in calls of whole bags: `microbatch` bags each where the bits
  // depend on the split (as fold_block's positions), else the block in one call;
  // each rank passes its part of each call (its bags, contiguous, in rank order).
  void fold_bags(Block const& blk) {
    if constexpr (has_bag_layer_v<Layer>) {
      auto const t0 = clock::now();
      auto const& c = record_.config;
      std::int64_t const d = c.embedding_dim, m = s_.microbatch;
      std::int64_t const call = c.mode == Mode::deterministic || c.scale_grad_by_freq == FreqScale::call ? m : blk.n;
      bool const weighted = batch_->info().weighted;
      std::vector<std::int64_t> offsets;
      together([&] {
        for (std::int64_t k = blk.position; k < blk.position + blk.n; k += call) {
          std::int64_t const n = std::min(call, blk.position + blk.n - k);
          std::int64_t const lo = std::clamp(k, blk.a, blk.b) - blk.a, hi = std::clamp(k + n, blk.a, blk.b) - blk.a;
          std::int64_t const p = blk.offsets[std::size_t(lo)] - blk.offsets[0];
          offsets.assign(blk.offsets.begin() + lo, blk.offsets.begin() + hi + 1);
          for (auto& o : offsets) o -= blk.offsets[std::size_t(lo)];
          BagCall const in{blk.ids.data() + p,
                           offsets.data(),
                           blk.dy.data() + lo * d,
                           weighted ? blk.weights.data() + p : nullptr,
                           hi - lo,
                           offsets.back(),
                           weighted};
          if (sparse()) {
            layer_->backward_bags_sparse(space_, in, carry_, counts_.data(), batch_counts_);
          } else {
            layer_->backward_bags(space_, in, grad_, counts_.data(), batch_counts_);
            folded_by_plan_[layer_->last_path().plan_name()] += layer_->last_positions();
          }
          record_.microbatches += (n + m - 1) / m;
        }
        space_.fence();
      });
      record_.seconds.backward += seconds(t0);
    }
  }
  void log_start() const {
    auto const& c = record_.config;
    std::string const what = bagged() ? with_commas(record_.bags) + " bags (" + with_commas(record_.positions) +
                                            " positions, pooling " + std::string(to_string(*record_.pooling)) + ")"
                                      : with_commas(record_.positions) + " positions";
    log("kembed backward: " + what + ", V = " + with_commas(c.num_embeddings) +
        ", d = " + std::to_string(c.embedding_dim) + ", microbatch " + with_commas(s_.microbatch) + ", plan " +
        std::string(to_string(c.plan)) + ", mode " + std::string(to_string(c.mode)) + ", " + record_.backend +
        " with " + std::to_string(record_.threads) + " thread(s)" +
        (team_.size() > 1 ? " on each of " + std::to_string(team_.size()) + " ranks" +
                                (team_.reads_ahead() ? ", each reading its next block while it folds" : "")
                          : ""));
  }

  // Writes a checkpoint from a copy of the carry while the next blocks fold (one at
  // a time; a read queued after it waits for it).
  void checkpoint(BlockPipeline& pipe) {
    kembed::detail::ScopedRegion region("kembed::job::checkpoint");  // within fold
    auto const t0 = clock::now();
    hashed();
    if (checkpoint_written_.valid()) together([&] { checkpoint_written_.get(); });
    auto ckpt = std::make_shared<io::Checkpoint>(checkpoint_of(record_, elapsed()));
    checkpoint_written_ = sparse() ? checkpoint_sparse(pipe, ckpt) : checkpoint_dense(pipe, ckpt);
    record_.seconds.checkpoint += seconds(t0);
  }
  std::future<void> checkpoint_sparse(BlockPipeline& pipe, std::shared_ptr<io::Checkpoint> ckpt) {
    auto const first_row = files_.first_row(team_.rank());
    // This rank's listed rows of the files' ranges, at their place among every rank's.
    together([&] { staged_.listed = host_listed(layer_->listed(space_, carry_)); });
    staged_.listed = to_files(std::move(staged_.listed));
    std::int64_t const n = std::int64_t(staged_.listed.rows.size());
    std::int64_t const total = team_.sum(n), first = team_.sum_before(n);
    io::SparseSlab const slab{first,
                              n,
                              total,
                              first_row,
                              first_row + files_.slots(team_.rank()),
                              staged_.listed.rows.data(),
                              staged_.listed.values.data(),
                              staged_.listed.counts.data()};
    return pipe.submit([ckpt, slab, this] {
      // Digests of every rank's records and counts in row order (one process: on this thread).
      auto const& l = staged_.listed;
      auto const records = sparse_records(l.rows.data(), l.values.data(), slab.count, record_.config.embedding_dim);
      ckpt->gradient_sha256 = team_.sha256_in_rank_order(records.data(), records.size());
      ckpt->counts_sha256 = team_.sha256_in_rank_order(l.counts.data(), l.counts.size() * 8);
      io::write_checkpoint(checkpoint_path_, *ckpt, slab, team_.collective());
    });
  }
  std::future<void> checkpoint_dense(BlockPipeline& pipe, std::shared_ptr<io::Checkpoint> ckpt) {
    auto const rows = layer_->row_count();
    if (moves_) {  // straight from the carry to the files' ranges: no copy of the slots first
      auto const g = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad_);
      dense_to_files(g.data(), counts_, staged_.gradient, staged_.counts);
    } else {
      together([&] {
        staged_.gradient.resize(std::size_t(rows * record_.config.embedding_dim));
        Kokkos::deep_copy(host_matrix_out(staged_.gradient.data(), rows, record_.config.embedding_dim), grad_);
        staged_.counts = counts_;
      });
    }
    return pipe.submit([ckpt, this,
                        slab = io::RowSlab{files_.first_row(team_.rank()), files_.slots(team_.rank()),
                                           staged_.gradient.data(), staged_.counts.data()}] {
      // Digests of every rank's rows in row order (one process: on this thread, beside the fold).
      ckpt->gradient_sha256 =
          team_.sha256_in_rank_order(staged_.gradient.data(), staged_.gradient.size() * sizeof(float));
      ckpt->counts_sha256 = team_.sha256_in_rank_order(staged_.counts.data(), staged_.counts.size() * 8);
      io::write_checkpoint(checkpoint_path_, *ckpt, slab, team_.collective());
    });
  }

  // Writes the run file and removes the job's checkpoint. One process writes (and
  // deflates) the gradient while its inputs may still be hashed, and the header with
  // their digests last; many ranks agree on the digests first.
  void publish() {
    bool const late_header = team_.size() == 1;
    if (!late_header) {
      auto const w0 = clock::now();
      hashed();
      record_.seconds.hash_wait = seconds(w0);
    }
    auto const t0 = clock::now();
    record_.run_id = s_.run_id.empty() ? team_.broadcast(team_.rank() == 0 ? make_run_id() : "") : s_.run_id;
    record_.plan_used = team_.broadcast(plan_used());  // the first rank's, on every rank
    record_.seconds.exchange = layer_->exchange_seconds();
    if (team_.size() > 1) record_.rank_work = rank_work();
    io::RunFile run = run_header_of(record_, s_);
    log("kembed backward: hashing the gradient and writing " + s_.out);
    auto const slots = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad_);
    std::vector<float> ranged;  // the files' ranges, in rank order (row order), where the layer owns otherwise
    std::vector<std::int64_t> ranged_counts;
    if (!sparse() && moves_) dense_to_files(slots.data(), counts_, ranged, ranged_counts);
    float const* g = moves_ ? ranged.data() : slots.data();
    auto const& counts = moves_ ? ranged_counts : counts_;
    if (!sparse()) {
      run.gradient_sha256 = team_.sha256_in_rank_order(g, std::size_t(files_.slots(team_.rank()) * run.cols) * 4);
      run.counts_sha256 = team_.sha256_in_rank_order(counts.data(), counts.size() * 8);
    }
    auto complete = [&](io::RunFile& r) {  // the inputs and the timings, once the inputs are hashed
      auto const w0 = clock::now();
      hashed();
      if (late_header) record_.seconds.hash_wait = seconds(w0);
      r.inputs = {record_.table, record_.batch};
      r.timings = timings_of_first_rank(timings_of(record_, elapsed()));
    };
    io::SaveOptions save;
    save.deflate = s_.deflate;
    io::RowSlab const slab{files_.first_row(team_.rank()), files_.slots(team_.rank()), g, counts.data()};
    if (sparse()) {
      write_sparse(run, layer_->listed(space_, carry_), save, complete);
    } else if (late_header) {
      io::write_run(s_.out, run, slab, save, complete);
    } else {
      complete(run);
      together([&] { io::write_run(s_.out, run, slab, save, team_.collective()); });
    }
    if (team_.rank() == 0 && (s_.checkpoint_every > 0 || found_)) {  // the job is done: its checkpoint goes
      auto const note = remove_own_checkpoint(checkpoint_path_, record_.job_id, found_ ? &*found_ : nullptr);
      if (!note.empty()) log("kembed backward: " + note);
    }
    record_.gradient_sha256 = run.gradient_sha256;
    record_.seconds.write = seconds(t0);
  }
  // Every rank's share of the job, on every rank (the run file records them all): the
  // terms its rows received are its rows' counts, so a resume's are the whole job's.
  std::vector<io::RankWork> rank_work() const {
    std::int64_t terms = 0;
    for (auto const c : counts_) terms += c;
    double const folding = std::max(0.0, record_.seconds.backward - record_.seconds.exchange);
    auto const all_terms = team_.all_gather(terms), sent = team_.all_gather(layer_->bytes_sent()),
               micros = team_.all_gather(std::int64_t(std::llround(folding * 1e6)));
    std::vector<io::RankWork> work(all_terms.size());
    for (std::size_t r = 0; r < work.size(); ++r) work[r] = {all_terms[r], sent[r], micros[r]};
    return work;
  }
  // What this rank's calls ran, by the paths the layer took (where it folded nothing,
  // which only a rank with no referenced row does: the plan it would use).
  std::string plan_used() const {
    if (sparse()) return "sparse";
    auto const most = most_positions(folded_by_plan_);
    return most.empty() ? std::string(to_string(layer_->plan_for(std::min(s_.microbatch, record_.positions)))) : most;
  }

  bool sparse() const noexcept { return record_.config.sparse; }
  // A bag job counts bags (microbatch, checkpoints, progress), others positions.
  bool bagged() const noexcept { return record_.pooling.has_value(); }
  std::int64_t units() const noexcept { return bagged() ? record_.bags : record_.positions; }
  std::int64_t& done() noexcept { return bagged() ? record_.bag : record_.position; }
  std::int64_t done() const noexcept { return bagged() ? record_.bag : record_.position; }
  std::string unit() const { return bagged() ? "bag" : "position"; }
  double elapsed() const { return record_.elapsed_before + seconds(start_); }

  static double seconds(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }
  using host_matrix_type = Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  static Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> host_matrix_out(
      float* data, std::int64_t rows, std::int64_t cols) {
    return Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
        data, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
  }
  static host_matrix_type host_matrix(float const* data, std::int64_t rows, std::int64_t cols) {
    return host_matrix_type(data, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
  }

  // Runs a step on every rank; if it failed on any, every rank throws the first's error.
  template <class F>
  void together(F&& step) const {
    std::exception_ptr error;
    try {
      step();
    } catch (...) {
      error = std::current_exception();
    }
    team_.agree(error);
  }

  // This rank's part [a, b) of the global positions [first, first + n): contiguous,
  // in rank order, as even as integers allow (a rank's part may be empty).
  std::pair<std::int64_t, std::int64_t> part(std::int64_t first, std::int64_t n) const {
    auto const at = [&](int r) { return first + n / team_.size() * r + std::min<std::int64_t>(r, n % team_.size()); };
    return {at(team_.rank()), at(team_.rank() + 1)};
  }

  // The checkpoint as every rank read its part: the counts sum to its position, and
  // where ranks read parts, the parts hash in rank order to its stored digests (one
  // process read every row, and io checked those). Collective.
  void verify_parts(io::Checkpoint const& c, std::string const& path, std::int64_t carried) const {
    std::int64_t const total = team_.sum(carried);
    std::string gradient_sha, counts_sha;
    if (team_.size() > 1) {
      auto const d = c.cols;
      if (c.sparse) {
        auto const records = sparse_records(c.listed_rows.data(), c.gradient.data(), std::int64_t(c.listed_rows.size()), d);
        gradient_sha = team_.sha256_in_rank_order(records.data(), records.size());
      } else {
        gradient_sha = team_.sha256_in_rank_order(c.gradient.data(), c.gradient.size() * sizeof(float));
      }
      counts_sha = team_.sha256_in_rank_order(c.counts.data(), c.counts.size() * 8);
    }
    together([&] {
      try {
        check_parts(c, path, gradient_sha, counts_sha, total);
      } catch (io::FileError const& e) {
        refuse_checkpoint(e);
      }
    });
  }
  void check_parts(io::Checkpoint const& c, std::string const& path, std::string const& gradient_sha,
                   std::string const& counts_sha, std::int64_t total) const {
    if (team_.size() > 1 && gradient_sha != c.gradient_sha256)
      throw io::FileError(path, "/gradient", "does not match its SHA-256 (attribute gradient_sha256 = " +
                                                 c.gradient_sha256 + "): the checkpoint is damaged or was edited");
    if (team_.size() > 1 && counts_sha != c.counts_sha256)
      throw io::FileError(path, "/counts", "does not match its SHA-256 (attribute counts_sha256 = " +
                                               c.counts_sha256 + "): the checkpoint is damaged or was edited");
    if (total != c.position)
      throw io::FileError(path, "/counts", "sums to " + std::to_string(total) + " but the checkpoint's position is " +
                                               std::to_string(c.position) + ": the checkpoint is damaged or was edited");
  }

  // A sparse gradient's listed rows on the host: global row numbers, values, and
  // each row's count so far (the layer's slots in slot order).
  using Listed = RowRecords;
  Listed host_listed(typename Layer::sparse_type const& carry) const {
    auto const local = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), carry.rows);
    auto const values = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), carry.values);
    Listed out;
    std::int64_t const n = local.extent(0);
    out.values.assign(values.data(), values.data() + values.size());
    for (std::int64_t i = 0; i < n; ++i) {
      out.rows.push_back(layer_->ownership().row_at(team_.rank(), local(i)));
      out.counts.push_back(counts_[std::size_t(local(i))]);
    }
    return out;
  }

  // Rows (slots, ascending) back in the space's memory, as the job's carry.
  static typename Layer::sparse_type device_listed(RowRecords const& slots, std::int64_t d) {
    std::int64_t const n = std::int64_t(slots.rows.size());
    typename Layer::sparse_type carry;
    carry.rows = decltype(carry.rows)("kembed::job::carry_rows", n);
    carry.values = decltype(carry.values)("kembed::job::carry_values", n, d);
    auto const rows_h = Kokkos::create_mirror_view(carry.rows);
    for (std::int64_t i = 0; i < n; ++i) rows_h(i) = slots.rows[std::size_t(i)];
    Kokkos::deep_copy(carry.rows, rows_h);
    Kokkos::deep_copy(carry.values, host_matrix(slots.values.data(), n, d));
    return carry;
  }

  // Collective. Listed rows (global) from the fold's owners to the files' ranges, rows
  // ascending (where the two differ).
  RowRecords to_files(RowRecords rows) const {
    if (!moves_) return rows;
    RowRecords moved;
    together([&] { moved = move_records(team_, files_, rows, record_.config.embedding_dim); });
    return moved;
  }
  // Collective. A dense gradient's slots and counts (host) as the files' range.
  void dense_to_files(float const* g, std::vector<std::int64_t> const& counts, std::vector<float>& ranged,
                      std::vector<std::int64_t>& ranged_counts) const {
    auto const d = record_.config.embedding_dim;
    auto const first = files_.first_row(team_.rank()), n = files_.slots(team_.rank());
    auto const& owners = layer_->ownership();
    ranged.assign(std::size_t(n * d), 0.0f);
    ranged_counts.assign(std::size_t(n), 0);
    together([&] {
      move_rows(
          team_, files_, owners.slots(team_.rank()), d,
          [&](std::int64_t s, std::int64_t& row, std::int64_t& count, float const*& values) {
            row = owners.row_at(team_.rank(), s), count = counts[std::size_t(s)], values = g + s * d;
            return row >= 0;  // a hole: its row lives elsewhere
          },
          [&](std::int64_t row, std::int64_t count, float const* values) {
            ranged_counts[std::size_t(row - first)] = count;
            std::copy_n(values, d, ranged.data() + (row - first) * d);
          });
    });
  }
  // Collective. What this rank read of a checkpoint (its range of the files' rows:
  // every row, or the listed ones) as this rank's slots, slots ascending.
  RowRecords from_files(io::Checkpoint& c, std::int64_t d) const {
    RowRecords read;
    auto const first = files_.first_row(team_.rank());
    if (c.sparse) {
      read.rows = std::move(c.listed_rows);
    } else {
      read.rows.resize(c.counts.size());
      std::iota(read.rows.begin(), read.rows.end(), first);
    }
    read.counts = std::move(c.counts), read.values = std::move(c.gradient);
    RowRecords got;
    if (moves_)
      together([&] { got = move_records(team_, layer_->ownership(), read, d); });
    else
      got = std::move(read);
    auto const& owners = layer_->ownership();
    for (auto& row : got.rows) row = owners.slot_of(row);
    return sorted_by_row(std::move(got), d);
  }

  // Writes a sparse run: this rank's listed rows (global numbers) with their counts
  // over the whole job, at their place among every rank's, after the records' digest.
  template <class Complete>
  void write_sparse(io::RunFile& run, typename Layer::sparse_type const& carry, io::SaveOptions const& save,
                    Complete&& complete) const {
    auto const first_row = files_.first_row(team_.rank());
    auto const listed = to_files(host_listed(carry));
    std::int64_t const n = std::int64_t(listed.rows.size());
    auto const records = sparse_records(listed.rows.data(), listed.values.data(), n, run.cols);
    run.gradient_sha256 = team_.sha256_in_rank_order(records.data(), records.size());
    run.counts_sha256 = team_.sha256_in_rank_order(listed.counts.data(), listed.counts.size() * 8);
    std::int64_t const total = team_.sum(n), first = team_.sum_before(n);
    complete(run);
    io::SparseSlab const slab{first,
                              n,
                              total,
                              first_row,
                              first_row + files_.slots(team_.rank()),
                              listed.rows.data(),
                              listed.values.data(),
                              listed.counts.data()};
    together([&] { io::write_sparse_run(s_.out, run, slab, save, team_.collective()); });
  }

  // Counts every row's occurrences in the batch (the pass own_rows made, or one now),
  // summed to the rows' owners. Returns this rank's slots' counts, in the space's memory.
  typename Layer::batch_counts_type count_batch() {
    auto all = std::move(ids_counted_);
    if (all.empty()) {
      log("kembed backward: counting the batch's ids for scale_grad_by_freq=batch");
      all = count_ids();
    }
    auto const first = files_.first_row(team_.rank()), n = files_.slots(team_.rank());
    RowRecords ranged;
    together([&] { ranged.counts = team_.sum_rows(all, first, n); });
    all = {};
    ranged.rows.resize(std::size_t(n));
    std::iota(ranged.rows.begin(), ranged.rows.end(), first);
    std::vector<std::int64_t> mine(std::size_t(layer_->row_count()), 0);
    if (!moves_) {
      mine = std::move(ranged.counts);
    } else {
      together([&] { ranged = move_records(team_, layer_->ownership(), ranged, 0); });
      for (std::size_t i = 0; i < ranged.rows.size(); ++i)
        mine[std::size_t(layer_->ownership().slot_of(ranged.rows[i]))] = ranged.counts[i];
    }
    Kokkos::View<std::int64_t*, typename ExecutionSpace::memory_space> out("kembed::job::batch_counts",
                                                                           layer_->row_count());
    Kokkos::deep_copy(
        out, Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(mine.data(), mine.size()));
    return out;
  }
  // Each row's occurrences in this rank's part of the batch's ids (V entries), read in
  // blocks of 1 Mi positions (collective with many ranks).
  std::vector<std::int64_t> count_ids() const {
    std::int64_t const t = record_.positions, v = record_.config.num_embeddings;
    std::vector<std::int64_t> all(static_cast<std::size_t>(v), 0);
    std::int64_t const block = std::int64_t{1} << 20;
    std::vector<std::int64_t> ids(static_cast<std::size_t>(std::min(block, t) / team_.size() + 1));
    for (std::int64_t first = 0; first < t; first += block) {
      auto const range = part(first, std::min(block, t - first));
      std::int64_t const a = range.first, b = range.second;  // not a structured binding: nvcc 11.8 cannot capture one
      together([&] {
        batch_->read(a, b - a, ids.data(), nullptr);
        check_ids(s_.batch, s_.ids_dataset, a, ids.data(), b - a, v);
      });
      for (std::int64_t p = 0; p < b - a; ++p) ++all[std::size_t(ids[std::size_t(p)])];
    }
    return all;
  }

  // Reads positions [first, first + n) (a collective read with many ranks) and refuses
  // an id outside [0, V) with its global position and the file's name.
  void read_part(std::int64_t first, std::int64_t n, std::vector<std::int64_t>& ids, std::vector<float>& dy) const {
    batch_->read(first, n, ids.data(), dy.data());
    check_ids(s_.batch, s_.ids_dataset, first, ids.data(), n, record_.config.num_embeddings);
  }

  void read_bags(Block& b) const {
    read_bag_block(*batch_, s_.batch, s_.ids_dataset, b.a, b.b - b.a, record_.config.num_embeddings, b.offsets,
                   b.dy.data(), b.ids, b.weights);
  }

  // The first rank's timings, on every rank (the run file records one set).
  std::vector<std::pair<std::string, double>> timings_of_first_rank(
      std::vector<std::pair<std::string, double>> timings) const {
    for (auto& [name, value] : timings) value = std::stod(team_.broadcast(std::to_string(value)));
    return timings;
  }

  // A test's simulated crash: with KEMBED_TEST_KILL_AT=<rank>:<position>, that rank
  // kills itself (SIGKILL, no clean-up) once its job has folded past <position>.
  // Where a block read at `first` ends: after `block` positions rounded down to whole
  // microbatches, or sooner, at the first microbatch boundary at or past the next
  // multiple of --checkpoint-every, so a checkpoint lands there whatever the block.
  std::int64_t block_end(std::int64_t first, std::int64_t block) const {
    std::int64_t const m = s_.microbatch, n = s_.checkpoint_every;
    std::int64_t end = first + (block - block % m);
    if (n > 0) {
      std::int64_t const next = (first / n + 1) * n;
      end = std::min(end, (next + m - 1) / m * m);
    }
    return end;
  }

  std::optional<std::int64_t> fault_position() const {
    char const* spec = std::getenv("KEMBED_TEST_KILL_AT");
    if (!spec) return std::nullopt;
    std::string const text = spec;
    auto const colon = text.find(':');
    if (colon == std::string::npos || std::stoi(text.substr(0, colon)) != team_.rank()) return std::nullopt;
    return std::stoll(text.substr(colon + 1));
  }

  void log(std::string const& text) const {
    if (team_.rank() == 0 && observer_.log) observer_.log(text);
  }
  void progress(std::int64_t done, std::int64_t total, std::int64_t start) const {
    if (team_.rank() == 0 && observer_.progress) observer_.progress(done, total, start);
  }

  ExecutionSpace space_;
  Team const& team_;
  BackwardSettings const& s_;
  Observer const& observer_;
  clock::time_point start_;
  std::string checkpoint_path_;
  std::optional<io::Checkpoint> found_;  // the first rank's look at the checkpoint path
  bool resuming_ = false;
  RunRecord record_;
  Options options_;                        // the layer's, as run
  Ownership files_;                        // the files' row ranges (run file, checkpoints)
  bool moves_ = false;                     // whether the layer owns rows otherwise (spread)
  std::vector<std::int64_t> ids_counted_;  // this rank's part's counts, from own_rows (until count_batch)
  std::optional<Layer> layer_;
  std::optional<io::BatchReader> batch_;
  matrix_type grad_;                                         // this rank's rows (a dense run)
  typename Layer::sparse_carry_type carry_;                  // the rows seen so far (a sparse run)
  std::vector<std::int64_t> counts_;                         // this rank's rows' counts so far
  typename Layer::batch_counts_type batch_counts_;           // scale_grad_by_freq=batch: the whole batch's
  std::map<std::string_view, std::int64_t> folded_by_plan_;  // this rank's positions by the plan that folded them
  struct Staged {  // the copy a checkpoint is written from while the fold goes on
    std::vector<float> gradient;
    std::vector<std::int64_t> counts;
    Listed listed;  // a sparse job's
  } staged_;
  std::future<void> checkpoint_written_, table_checked_;
  std::exception_ptr hash_error_;
  bool inputs_known_ = false;
  JoiningThread hasher_;  // last: joined before what it writes goes, on every way out
};

}  // namespace kembed::job::detail
