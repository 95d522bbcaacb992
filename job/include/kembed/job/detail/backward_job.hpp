#pragma once
// The batch job's one code path (kembed/job/backward.hpp), for any team: a team
// gives each rank its rows (the gradient it holds) and its part of every block of
// positions (contiguous, in rank order), reads and writes files collectively, and
// makes every rank throw the first rank's error. Every step that can fail on one
// rank alone runs inside together(), so no rank waits for one that has stopped.
#include <kembed/embedding.hpp>
#include <kembed/job/settings.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/table_file.hpp>
#include <kembed/job/detail/io_worker.hpp>
#include <kembed/job/detail/support.hpp>

#include <signal.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <future>
#include <memory>
#include <thread>
#include <optional>
#include <string>
#include <vector>

namespace kembed::job::detail {

template <class ExecutionSpace, class Team>
class BackwardJob {
  using clock = std::chrono::steady_clock;
  using Layer = typename Team::template Layer<ExecutionSpace>;
  using matrix_type = typename Layer::matrix_type;

 public:
  BackwardJob(ExecutionSpace const& space, Team const& team, BackwardSettings const& s, Observer const& observer)
      : space_(space), team_(team), s_(s), observer_(observer) {}

  BackwardReport run() {
    auto const t_start = clock::now();
    BackwardReport report;
    if (s_.microbatch < 1)
      throw InvalidArgument("microbatch", "--microbatch must be at least 1, got " + std::to_string(s_.microbatch));
    if (s_.checkpoint_every < 0) throw InvalidArgument("checkpoint-every", "--checkpoint-every must be >= 0");
    std::string const checkpoint_path = s_.checkpoint.empty() ? s_.out + ".checkpoint" : s_.checkpoint;
    std::optional<io::Checkpoint> found;  // the first rank's look at the checkpoint path
    together([&] {
      if (team_.rank() == 0) found = check_job_paths(s_, checkpoint_path);
    });
    bool const resuming = !team_.broadcast(found ? "resume" : "").empty();
    std::string job_id = team_.broadcast(team_.rank() == 0 ? make_run_id() : "");

    // The table's settings (its values do not change the gradient, and are not read);
    // command-line settings override the file's.
    auto t0 = clock::now();
    io::TableFile table;
    together([&] { table = io::load_rows(s_.table, 0, 0); });
    Options options;
    if (table.config.has_padding()) options.padding_idx = table.config.padding_idx;
    options.plan = table.config.plan;
    options.mode = table.config.mode;
    if (s_.no_padding) options.padding_idx.reset();
    if (s_.padding_idx) options.padding_idx = s_.padding_idx;
    if (s_.plan) options.plan = *s_.plan;
    if (s_.mode) options.mode = *s_.mode;
    options.scale_grad_by_freq = s_.scale_grad_by_freq.value_or(table.config.scale_grad_by_freq);
    // A row-sparse run (docs/FORMAT.md) carries only the rows it has seen.
    bool const sparse = s_.sparse || table.config.sparse;
    auto const v = table.config.num_embeddings, d = table.config.embedding_dim;
    std::optional<Layer> layer;
    together([&] { layer.emplace(team_, space_, v, d, options); });
    double const read_table_s = seconds(t0);

    std::optional<io::BatchReader> batch;
    together([&] {
      batch.emplace(s_.batch, true, s_.ids_dataset, s_.dy_dataset, team_.collective());
      if (batch->info().dim != d)
        throw io::FileError(s_.batch, "/" + s_.dy_dataset,
                            "has " + std::to_string(batch->info().dim) + " columns but the table " + s_.table +
                                " has embedding_dim = " + std::to_string(d) + "; dy must be (T, embedding_dim)");
    });
    auto const t = batch->info().positions;

    // The first rank hashes the inputs on a thread of its own while the job reads and
    // folds (the batch's pages, read once from storage, serve both); the digests are
    // needed only to resume, checkpoint and write the run file (hashed() waits).
    io::InputIdentity table_id{"table", s_.table, "", 0}, batch_id{"batch", s_.batch, "", 0};
    double hash_s = 0;
    std::exception_ptr hash_error;
    JoiningThread hasher;  // joined on every way out
    if (team_.rank() == 0)
      hasher = JoiningThread([&] {
        auto const h0 = clock::now();
        try {
          table_id.sha256 = io::sha256_file(s_.table, &table_id.bytes);
          batch_id.sha256 = io::sha256_file(s_.batch, &batch_id.bytes);
        } catch (...) {
          hash_error = std::current_exception();
        }
        hash_s = seconds(h0);
      });
    bool inputs_known = false;
    // The table's values do not change the gradient, but the run names the table as
    // its input: each rank checks that its rows are finite (an I/O task queued after
    // the first block's read, while the first rank hashes the same pages).
    std::future<void> table_checked;
    auto hashed = [&] {
      if (table_checked.valid()) together([&] { table_checked.get(); });
      if (inputs_known) return;
      together([&] {
        hasher.join();
        if (hash_error) std::rethrow_exception(hash_error);
      });
      for (auto* id : {&table_id, &batch_id}) {
        id->sha256 = team_.broadcast(id->sha256);
        id->bytes = std::stoll(team_.broadcast(std::to_string(id->bytes)));
      }
      inputs_known = true;
    };

    std::string const backend = ExecutionSpace::name();
    int const threads = static_cast<int>(space_.concurrency());
    std::string const mode = std::string(to_string(layer->config().mode));
    std::string const plan = std::string(to_string(layer->config().plan));
    std::int64_t const padding = layer->config().padding_idx;
    std::int64_t const first_row = layer->first_row(), rows = layer->row_count();
    FreqScale const scale = layer->config().scale_grad_by_freq;
    std::string const scale_name(to_string(scale));

    // The gradient (this rank's rows) starts at +0.0 and every call continues it in place.
    // A sparse run holds only the rows it has seen: no (rows, d) gradient at all.
    matrix_type grad;
    if (!sparse) grad = matrix_type("kembed::job::gradient", rows, d);
    typename Layer::sparse_carry_type carry;
    if (sparse) carry = layer->sparse_carry(space_);
    std::vector<std::int64_t> counts(static_cast<std::size_t>(rows), 0);
    std::int64_t position = 0, microbatches = 0;
    double resumed_elapsed = 0;
    if (resuming) {
      hashed();
      io::Checkpoint ckpt;
      std::int64_t carried = 0;  // this rank's counts, summed
      together([&] {
        try {
          ckpt = io::read_checkpoint(checkpoint_path, true, first_row, rows);
          carried = check_carried(ckpt, checkpoint_path, first_row, padding,
                                  layer->config().mode == Mode::deterministic);
        } catch (io::FileError const& e) {
          refuse_checkpoint(e);
        }
        Config job = layer->config();  // the whole table's, on every rank
        job.sparse = sparse;
        check_resumable(ckpt, checkpoint_path, table_id, batch_id, job, s_.microbatch, t);
      });
      verify_parts(ckpt, checkpoint_path, carried);
      together([&] {
        if (sparse) {
          carry = layer->sparse_carry(space_, device_listed(ckpt.listed_rows, ckpt.gradient, first_row, d));
          for (std::size_t i = 0; i < ckpt.listed_rows.size(); ++i)
            counts[std::size_t(ckpt.listed_rows[i] - first_row)] = ckpt.counts[i];
        } else {
          Kokkos::deep_copy(grad, host_matrix(ckpt.gradient.data(), rows, d));
          counts = std::move(ckpt.counts);
        }
        if (!ckpt.job_id.empty()) job_id = ckpt.job_id;  // the same job, continued
        position = ckpt.position;
        microbatches = ckpt.microbatches;
        resumed_elapsed = ckpt.elapsed_seconds;
      });
      log("kembed backward: resuming from " + checkpoint_path + " at position " + with_commas(position) + " of " +
          with_commas(t));
    } else if (s_.resume) {
      log("kembed backward: no checkpoint at " + checkpoint_path + "; starting from the beginning");
    }
    std::int64_t const resumed_from = position;
    // scale_grad_by_freq=batch: each row's count in the whole batch, from a first
    // pass over the ids alone (each rank its part, summed to the rows' owners).
    typename Layer::batch_counts_type batch_counts;
    if (scale == FreqScale::batch) batch_counts = count_batch(*batch, t, v, first_row, rows);

    // Blocks of at least 64 Ki positions are read at once (each rank its part), and
    // cut into calls on microbatch boundaries.
    std::int64_t const block = std::max<std::int64_t>(s_.microbatch, 65536);
    std::int64_t const part_max = std::min(block, t) / team_.size() + 1;
    struct Block {
      std::vector<std::int64_t> ids;
      std::vector<float> dy;
      std::int64_t position = 0, n = 0, a = 0, b = 0;  // global [position, +n); this rank's [a, b)
      double read_seconds = 0;
    };
    Block blocks[2];
    for (auto& blk : blocks) {
      blk.ids.resize(static_cast<std::size_t>(part_max));
      blk.dy.resize(static_cast<std::size_t>(part_max * d));
    }
    // The next block is read while this one folds; a checkpoint is written from a
    // copy of the gradient while the next blocks fold (tasks run in order, so a read
    // queued after a checkpoint waits for it).
    std::vector<float> checkpoint_gradient;  // the copy a checkpoint is written from
    std::vector<std::int64_t> checkpoint_counts;
    Listed checkpoint_listed;  // a sparse job's
    IoWorker io(team_.reads_ahead());  // after what its tasks use: joined before they go
    auto read_block = [&](Block& blk, std::int64_t first) {
      blk.position = first;
      blk.n = std::min(t - first, block_end(first, block) - first);
      auto const range = part(first, blk.n);
      blk.a = range.first, blk.b = range.second;
      return io.submit([&blk, this, &batch, v] {
        auto const r0 = clock::now();
        read_part(*batch, blk.a, blk.b - blk.a, v, blk.ids, blk.dy);
        blk.read_seconds = seconds(r0);
      });
    };
    std::future<void> checkpoint_written;
    std::map<std::string_view, std::int64_t> folded_by_plan;  // this rank's positions by the plan that folded them
    double read_s = 0, backward_s = 0, checkpoint_s = 0;
    std::int64_t last_checkpoint = position;
    auto const crash_at = fault_position();
    log("kembed backward: " + with_commas(t) + " positions, V = " + with_commas(v) + ", d = " + std::to_string(d) +
        ", microbatch " + with_commas(s_.microbatch) + ", plan " + plan + ", mode " + mode + ", " + backend +
        " with " + std::to_string(threads) + " thread(s)" +
        (team_.size() > 1 ? " on each of " + std::to_string(team_.size()) + " ranks" : ""));
    progress(position, t, resumed_from);
    int current = 0;
    std::future<void> pending = position < t ? read_block(blocks[0], position) : std::future<void>();
    table_checked = io.submit([this, first_row, rows] { io::check_table_finite(s_.table, first_row, rows); });
    while (position < t) {
      Block& blk = blocks[current];
      t0 = clock::now();
      together([&] { pending.get(); });
      read_s += blk.read_seconds;
      std::int64_t const n_block = blk.n, a = blk.a, b = blk.b;
      if (position + n_block < t) pending = read_block(blocks[1 - current], position + n_block);
      t0 = clock::now();
      // In mode deterministic each row's tree depends on the split, so --microbatch
      // (a range of global positions) is the size of each call; otherwise the bits do
      // not depend on it and the block is one call (docs/PERFORMANCE.md).
      // scale_grad_by_freq=call counts each call's ids, so there too the call is the microbatch.
      std::int64_t const call =
          layer->config().mode == Mode::deterministic || scale == FreqScale::call ? s_.microbatch : n_block;
      together([&] {
        for (std::int64_t k = position; k < position + n_block; k += call) {
          std::int64_t const n = std::min(call, position + n_block - k);
          std::int64_t const lo = std::clamp(k, a, b), hi = std::clamp(k + n, a, b);  // this rank's part
          if (sparse)
            layer->backward_sparse(space_, blk.ids.data() + (lo - a), blk.dy.data() + (lo - a) * d, hi - lo, carry,
                                   counts.data(), batch_counts);
          else {
            layer->backward(space_, blk.ids.data() + (lo - a), blk.dy.data() + (lo - a) * d, hi - lo, grad,
                            counts.data(), batch_counts);
            folded_by_plan[layer->last_path().plan_name()] += layer->last_positions();
          }
          microbatches += (n + s_.microbatch - 1) / s_.microbatch;  // as the split would have had
        }
        space_.fence();
      });
      backward_s += seconds(t0);
      current = 1 - current;
      position += n_block;
      progress(position, t, resumed_from);
      if (crash_at && position >= *crash_at) ::raise(SIGKILL);  // a test's simulated crash (fault_position)
      // After the first call that reaches each multiple of N (blocks end there).
      if (s_.checkpoint_every > 0 && position < t &&
          position / s_.checkpoint_every > last_checkpoint / s_.checkpoint_every) {
        t0 = clock::now();
        hashed();
        if (checkpoint_written.valid()) together([&] { checkpoint_written.get(); });  // one at a time
        auto ckpt = std::make_shared<io::Checkpoint>();
        ckpt->job_id = job_id;
        ckpt->position = position;
        ckpt->microbatches = microbatches;
        ckpt->microbatch_size = s_.microbatch;
        ckpt->table_sha256 = table_id.sha256;
        ckpt->batch_sha256 = batch_id.sha256;
        ckpt->plan = plan;
        ckpt->numeric_mode = mode;
        ckpt->scale_grad_by_freq = scale_name;
        ckpt->padding_idx = padding;
        ckpt->elapsed_seconds = resumed_elapsed + seconds(t_start);
        ckpt->rows = v;
        ckpt->cols = d;
        if (sparse) {  // this rank's listed rows, at their place among every rank's
          together([&] { checkpoint_listed = host_listed(layer->listed(space_, carry), counts, first_row); });
          std::int64_t const n = std::int64_t(checkpoint_listed.rows.size());
          std::int64_t const total = team_.sum(n), first = team_.sum_before(n);
          checkpoint_written = io.submit([ckpt, &checkpoint_listed, &checkpoint_path, this, first_row, rows, n,
                                          total, first, d] {
            auto const& l = checkpoint_listed;
            auto const records = sparse_records(l.rows.data(), l.values.data(), n, d);
            ckpt->gradient_sha256 = team_.sha256_in_rank_order(records.data(), records.size());
            ckpt->counts_sha256 = team_.sha256_in_rank_order(l.counts.data(), l.counts.size() * 8);
            io::write_checkpoint(checkpoint_path, *ckpt,
                                 io::SparseSlab{first, n, total, first_row, first_row + rows,
                                                checkpoint_listed.rows.data(), checkpoint_listed.values.data(),
                                                checkpoint_listed.counts.data()},
                                 team_.collective());
          });
        } else {
          together([&] {
            checkpoint_gradient.resize(std::size_t(rows * d));
            Kokkos::deep_copy(host_matrix_out(checkpoint_gradient.data(), rows, d), grad);
            checkpoint_counts = counts;
          });
          checkpoint_written = io.submit([ckpt, &checkpoint_gradient, &checkpoint_counts, &checkpoint_path, this,
                                          first_row, rows] {
            // Digests of every rank's rows in row order (one process: on this thread, beside the fold).
            ckpt->gradient_sha256 =
                team_.sha256_in_rank_order(checkpoint_gradient.data(), checkpoint_gradient.size() * sizeof(float));
            ckpt->counts_sha256 = team_.sha256_in_rank_order(checkpoint_counts.data(), checkpoint_counts.size() * 8);
            io::write_checkpoint(checkpoint_path, *ckpt,
                                 io::RowSlab{first_row, rows, checkpoint_gradient.data(), checkpoint_counts.data()},
                                 team_.collective());
          });
        }
        last_checkpoint = position;
        checkpoint_s += seconds(t0);
      }
    }
    if (checkpoint_written.valid()) together([&] { checkpoint_written.get(); });
    // The table's check is the I/O thread's last HDF5 work: done before this thread's
    // (HDF5 is not thread-safe), and a table it refuses leaves no run file.
    if (table_checked.valid()) together([&] { table_checked.get(); });
    // One process writes (and deflates) the gradient while its inputs may still be
    // hashed, and the header with their digests last; ranks agree on them first.
    bool const late_header = team_.size() == 1;
    if (!late_header) hashed();

    t0 = clock::now();
    io::RunFile run;
    run.run_id = s_.run_id.empty() ? team_.broadcast(team_.rank() == 0 ? make_run_id() : "") : s_.run_id;
    run.backend = backend;
    run.threads = threads;
    run.ranks = team_.size();
    run.plan = plan;
    // What the first rank's calls ran, by the paths the layer took (where it folded
    // nothing, which only a rank with no referenced row does: the plan it would use).
    run.plan_used = sparse ? "sparse" : most_positions(folded_by_plan);
    if (run.plan_used.empty()) run.plan_used = to_string(layer->plan_for(std::min(s_.microbatch, t)));
    run.plan_used = team_.broadcast(run.plan_used);  // the first rank's, on every rank
    run.numeric_mode = mode;
    run.scale_grad_by_freq = scale_name;
    run.padding_idx = padding;
    run.positions = t;
    run.microbatches = microbatches;
    run.microbatch_size = s_.microbatch;
    run.rows = v;
    run.cols = d;
    run.command_line_json = io::json_array(s_.command_line);
    run.configuration_json = settings_json(s_, layer->config(), backend, threads, team_.size(), resumed_from);
    log("kembed backward: hashing the gradient and writing " + s_.out);
    auto const g = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad);
    if (!sparse) run.gradient_sha256 = team_.sha256_in_rank_order(g.data(), g.size() * sizeof(float));
    if (!sparse) run.counts_sha256 = team_.sha256_in_rank_order(counts.data(), counts.size() * 8);
    // The inputs and the timings, once the inputs are hashed.
    double hash_wait_s = 0;
    auto complete = [&](io::RunFile& r) {
      auto const w0 = clock::now();
      hashed();
      hash_wait_s = seconds(w0);
      r.inputs = {table_id, batch_id};
      r.timings = {{"read_table_seconds", read_table_s}, {"hash_inputs_seconds", hash_s},
                   {"read_batch_seconds", read_s},       {"backward_seconds", backward_s},
                   {"checkpoint_seconds", checkpoint_s}, {"total_seconds", resumed_elapsed + seconds(t_start)}};
      if (team_.size() > 1) r.timings.emplace_back("exchange_seconds", layer->exchange_seconds());
      r.timings = timings_of_first_rank(r.timings);
    };
    io::SaveOptions save;
    save.deflate = s_.deflate;
    io::RowSlab const slab{first_row, rows, g.data(), counts.data()};
    if (sparse) {
      write_sparse(run, layer->listed(space_, carry), counts, first_row, rows, save, complete);
    } else if (late_header) {
      io::write_run(s_.out, run, slab, save, complete);
    } else {
      complete(run);
      together([&] { io::write_run(s_.out, run, slab, save, team_.collective()); });
    }
    if (team_.rank() == 0 && (s_.checkpoint_every > 0 || found)) {  // the job is done: its checkpoint goes
      auto const note = remove_own_checkpoint(checkpoint_path, job_id, found ? &*found : nullptr);
      if (!note.empty()) log("kembed backward: " + note);
    }

    report.out = s_.out;
    report.gradient_sha256 = run.gradient_sha256;
    report.plan_used = run.plan_used;
    report.mode = mode;
    report.backend = backend;
    report.rows = v;
    report.cols = d;
    report.positions = t;
    report.microbatches = microbatches;
    report.microbatch_size = s_.microbatch;
    report.resumed_from = resumed_from;
    report.threads = threads;
    report.ranks = team_.size();
    report.bytes_exchanged = team_.sum(layer->bytes_sent());
    report.exchange_seconds = layer->exchange_seconds();
    report.read_table_seconds = read_table_s;
    report.hash_seconds = hash_s;
    report.read_seconds = read_s;
    report.backward_seconds = backward_s;
    report.checkpoint_seconds = checkpoint_s;
    report.write_seconds = seconds(t0);
    report.hash_wait_seconds = hash_wait_s;
    report.total_seconds = seconds(t_start);
    return report;
  }

 private:
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
  // each row's count so far.
  struct Listed {
    std::vector<std::int64_t> rows;
    std::vector<float> values;
    std::vector<std::int64_t> counts;
  };
  static Listed host_listed(typename Layer::sparse_type const& carry, std::vector<std::int64_t> const& counts,
                            std::int64_t first_row) {
    auto const local = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), carry.rows);
    auto const values = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), carry.values);
    Listed out;
    std::int64_t const n = local.extent(0);
    out.values.assign(values.data(), values.data() + values.size());
    for (std::int64_t i = 0; i < n; ++i) {
      out.rows.push_back(local(i) + first_row);
      out.counts.push_back(counts[std::size_t(local(i))]);
    }
    return out;
  }

  // The same rows back in the space's memory, as the job's carry (local row numbers).
  static typename Layer::sparse_type device_listed(std::vector<std::int64_t> const& rows,
                                                   std::vector<float> const& values, std::int64_t first_row,
                                                   std::int64_t d) {
    std::int64_t const n = std::int64_t(rows.size());
    typename Layer::sparse_type carry;
    carry.rows = decltype(carry.rows)("kembed::job::carry_rows", n);
    carry.values = decltype(carry.values)("kembed::job::carry_values", n, d);
    auto const rows_h = Kokkos::create_mirror_view(carry.rows);
    for (std::int64_t i = 0; i < n; ++i) rows_h(i) = rows[std::size_t(i)] - first_row;
    Kokkos::deep_copy(carry.rows, rows_h);
    Kokkos::deep_copy(carry.values, host_matrix(values.data(), n, d));
    return carry;
  }

  // Writes a sparse run: this rank's listed rows (global numbers) with their counts
  // over the whole job, at their place among every rank's, after the records' digest.
  template <class Complete>
  void write_sparse(io::RunFile& run, typename Layer::sparse_type const& carry,
                    std::vector<std::int64_t> const& counts, std::int64_t first_row, std::int64_t rows,
                    io::SaveOptions const& save, Complete&& complete) const {
    auto const d = run.cols;
    auto const listed = host_listed(carry, counts, first_row);
    std::int64_t const n = std::int64_t(listed.rows.size());
    auto const records = sparse_records(listed.rows.data(), listed.values.data(), n, d);
    run.gradient_sha256 = team_.sha256_in_rank_order(records.data(), records.size());
    run.counts_sha256 = team_.sha256_in_rank_order(listed.counts.data(), listed.counts.size() * 8);
    std::int64_t const total = team_.sum(n), first = team_.sum_before(n);
    complete(run);
    io::SparseSlab const slab{first, n, total, first_row, first_row + rows, listed.rows.data(), listed.values.data(),
                              listed.counts.data()};
    together([&] { io::write_sparse_run(s_.out, run, slab, save, team_.collective()); });
  }

  // Counts every row's occurrences in the batch: each rank reads its part of the ids
  // (blocks of 1 Mi positions, collective with many ranks), the counts are summed to
  // the rows' owners. Returns this rank's rows' counts, in the space's memory.
  typename Layer::batch_counts_type count_batch(io::BatchReader const& batch, std::int64_t t, std::int64_t v,
                                                std::int64_t first_row, std::int64_t rows) const {
    log("kembed backward: counting the batch's ids for scale_grad_by_freq=batch");
    std::vector<std::int64_t> all(static_cast<std::size_t>(v), 0);
    std::int64_t const block = std::int64_t{1} << 20;
    std::vector<std::int64_t> ids(static_cast<std::size_t>(std::min(block, t) / team_.size() + 1));
    for (std::int64_t first = 0; first < t; first += block) {
      auto const range = part(first, std::min(block, t - first));
      std::int64_t const a = range.first, b = range.second;  // not a structured binding: nvcc 11.8 cannot capture one
      together([&] {
        batch.read(a, b - a, ids.data(), nullptr);
        check_ids(s_.batch, s_.ids_dataset, a, ids.data(), b - a, v);
      });
      for (std::int64_t p = 0; p < b - a; ++p) ++all[std::size_t(ids[std::size_t(p)])];
    }
    std::vector<std::int64_t> mine;
    together([&] { mine = team_.sum_rows(all, first_row, rows); });
    Kokkos::View<std::int64_t*, typename ExecutionSpace::memory_space> out("kembed::job::batch_counts", rows);
    Kokkos::deep_copy(out, Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                               mine.data(), mine.size()));
    return out;
  }

  // Reads positions [first, first + n) (a collective read with many ranks) and refuses
  // an id outside [0, V) with its global position and the file's name.
  void read_part(io::BatchReader const& batch, std::int64_t first, std::int64_t n, std::int64_t v,
                 std::vector<std::int64_t>& ids, std::vector<float>& dy) const {
    batch.read(first, n, ids.data(), dy.data());
    check_ids(s_.batch, s_.ids_dataset, first, ids.data(), n, v);
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
};

}  // namespace kembed::job::detail
