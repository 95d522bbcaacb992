// kembed backward: streams a batch file through the layer's backward in
// microbatches, carrying the gradient in place, and writes a run file. Batches are
// read in blocks, so memory holds the table, the gradient and one block.
#include "commands.hpp"
#include "console.hpp"
#include "paths.hpp"

#include <kembed/backends.hpp>
#include <kembed/embedding.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/table_file.hpp>

#include <sys/stat.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <utility>

namespace kembed::cli {
namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}
std::string make_run_id() {
  std::time_t const now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  std::random_device device;
  char id[64];
  std::snprintf(id, sizeof id, "%s-%d-%04x", stamp, int(::getpid()), unsigned(device() & 0xffff));
  return id;
}

// Refuses, before anything is read or written, a job that would replace or remove a
// file it was not given for that: the output over an input, a checkpoint path that
// is an input or the output, or a checkpoint path holding anything but a kembed
// checkpoint. Returns the checkpoint found there (attributes only), if any.
std::optional<io::Checkpoint> check_job_paths(BackwardArgs const& args, std::string const& checkpoint_path) {
  for (auto const& [option, input] : {std::pair{"--table", args.table}, std::pair{"--batch", args.batch}}) {
    if (same_file(args.out, input))
      throw InvalidArgument("out", "--out " + args.out + " is the same file as " + option + " " + input +
                                       "; the run file would replace it. Give --out a path of its own");
    if (same_file(checkpoint_path, input))
      throw InvalidArgument("checkpoint", "--checkpoint " + checkpoint_path + " is the same file as " + option + " " +
                                              input + "; a checkpoint needs a path of its own");
  }
  if (same_file(checkpoint_path, args.out))
    throw InvalidArgument("checkpoint", "--checkpoint " + checkpoint_path + " is the same file as --out " + args.out +
                                            "; a checkpoint needs a path of its own");
  check_output_path("--out", args.out);
  bool const uses_checkpoint = args.checkpoint_every > 0 || args.resume;
  if (!uses_checkpoint || !path_exists(checkpoint_path)) {
    if (args.checkpoint_every > 0) check_output_path("--checkpoint", checkpoint_path);
    return std::nullopt;
  }
  // This job would overwrite, resume from and remove what is there: it must be a checkpoint.
  io::Checkpoint found;
  try {
    found = io::read_checkpoint(checkpoint_path, false);
  } catch (io::FileError const& e) {
    std::string const why = std::string(e.what()).substr(std::string("kembed: ").size());
    throw InvalidArgument("checkpoint", why + ". kembed writes, resumes and removes its checkpoint at " +
                                            checkpoint_path +
                                            ", so that path must be free or hold a kembed checkpoint; it was "
                                            "left as it is");
  }
  if (!args.resume) {
    throw InvalidArgument("checkpoint", checkpoint_path + " holds the checkpoint of an unfinished job (at position " +
                                            with_commas(found.position) +
                                            "); continue it with --resume, or remove it to start again");
  }
  return found;
}

// Removes the checkpoint only if it is still this job's: a kembed checkpoint with this
// job's id (or, for one written before checkpoints carried ids, the one this job
// resumed from, with the same inputs).
void remove_own_checkpoint(std::string const& path, std::string const& job_id, io::Checkpoint const* resumed_legacy) {
  if (!path_exists(path)) return;
  io::Checkpoint there;
  try {
    there = io::read_checkpoint(path, false);
  } catch (Error const&) {
    Console::get().log("kembed backward: left " + path + " alone: it is no longer a kembed checkpoint");
    return;
  }
  bool const ours = there.job_id.empty() ? resumed_legacy && resumed_legacy->job_id.empty() &&
                                               there.table_sha256 == resumed_legacy->table_sha256 &&
                                               there.batch_sha256 == resumed_legacy->batch_sha256
                                         : there.job_id == job_id;
  if (!ours) {
    Console::get().log("kembed backward: left " + path + " alone: it is another job's checkpoint");
    return;
  }
  ::unlink(path.c_str());
}

// Reads positions [first, first + n) of the batch into the host buffers and counts
// the ids, refusing one outside [0, V) with its position and the file's name.
void read_block(io::BatchReader const& batch, std::string const& path, std::int64_t first, std::int64_t n,
                std::int64_t v, std::vector<std::int64_t>& ids, std::vector<float>* dy,
                std::vector<std::int64_t>* counts) {
  batch.read(first, n, ids.data(), dy ? dy->data() : nullptr);
  for (std::int64_t i = 0; i < n; ++i) {
    auto const id = ids[i];
    if (id < 0 || id >= v) {
      throw io::FileError(path, "/ids",
                          "holds " + std::to_string(id) + " at position " + std::to_string(first + i) +
                              ", outside [0, " + std::to_string(v) + ") (the table's num_embeddings)");
    }
    if (counts) ++(*counts)[id];
  }
}

std::string json_settings(BackwardArgs const& a, Config const& c, std::string const& backend, int threads,
                          std::int64_t resumed_from) {
  auto q = io::json_quote;
  return "{\"table\": " + q(a.table) + ", \"batch\": " + q(a.batch) + ", \"ids_dataset\": " + q(a.ids_dataset) +
         ", \"dy_dataset\": " + q(a.dy_dataset) + ", \"out\": " + q(a.out) +
         ", \"microbatch\": " + std::to_string(a.microbatch) + ", \"plan\": " + q(std::string(to_string(c.plan))) +
         ", \"numeric_mode\": " + q(std::string(to_string(c.mode))) +
         ", \"padding_idx\": " + std::to_string(c.padding_idx) + ", \"backend\": " + q(backend) +
         ", \"threads\": " + std::to_string(threads) + ", \"checkpoint_every\": " + std::to_string(a.checkpoint_every) +
         ", \"resumed_from\": " + std::to_string(resumed_from) + "}";
}

}  // namespace

template <class Space>
int backward(BackwardArgs const& args) {
  auto& console = Console::get();
  auto const t_start = clock_type::now();
  if (args.microbatch < 1)
    throw InvalidArgument("microbatch", "--microbatch must be at least 1, got " + std::to_string(args.microbatch));
  if (args.checkpoint_every < 0) throw InvalidArgument("checkpoint-every", "--checkpoint-every must be >= 0");
  std::string const checkpoint_path = args.checkpoint.empty() ? args.out + ".checkpoint" : args.checkpoint;
  auto const found_checkpoint = check_job_paths(args, checkpoint_path);
  std::string job_id = make_run_id();

  // The table and its settings; command-line settings override the file's.
  auto t0 = clock_type::now();
  auto table = io::load_table(args.table);
  Options options;
  if (table.config.has_padding()) options.padding_idx = table.config.padding_idx;
  options.plan = table.config.plan;
  options.mode = table.config.mode;
  if (args.no_padding) options.padding_idx.reset();
  if (args.padding_idx) options.padding_idx = args.padding_idx;
  if (args.plan) options.plan = parse_plan(*args.plan);
  if (args.mode) options.mode = parse_mode(*args.mode);
  auto const v = table.config.num_embeddings, d = table.config.embedding_dim;
  Space space;
  Embedding<Space> layer(space, v, d, FloatsRef(table.weight.data(), Shape{v, d}), options);
  table.weight = {};
  table.weight.shrink_to_fit();  // the layer holds its own copy
  double const read_table_s = since(t0);

  io::BatchReader batch(args.batch, true, args.ids_dataset, args.dy_dataset);
  auto const t = batch.info().positions;
  if (batch.info().dim != d) {
    throw io::FileError(args.batch, "/" + args.dy_dataset,
                        "has " + std::to_string(batch.info().dim) + " columns but the table " + args.table +
                            " has embedding_dim = " + std::to_string(d) + "; dy must be (T, embedding_dim)");
  }

  t0 = clock_type::now();
  console.log("kembed backward: hashing the inputs");
  io::InputIdentity table_id{"table", args.table, "", 0}, batch_id{"batch", args.batch, "", 0};
  table_id.sha256 = io::sha256_file(args.table, &table_id.bytes);
  batch_id.sha256 = io::sha256_file(args.batch, &batch_id.bytes);
  double const hash_s = since(t0);

  std::string const backend = Space::name();
  int const threads = static_cast<int>(space.concurrency());
  std::string const plan = std::string(to_string(layer.plan()));
  std::string const mode = std::string(to_string(layer.mode()));

  // The gradient starts at +0.0 and every microbatch continues it in place.
  typename Embedding<Space>::matrix_type grad("kembed::cli::gradient", v, d);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(v), 0);
  std::int64_t position = 0, microbatches = 0;
  double resumed_elapsed = 0;
  if (found_checkpoint) {
    auto ckpt = io::read_checkpoint(checkpoint_path);
    auto mismatch = [&](std::string const& what) {
      throw io::FileError(
          checkpoint_path, "",
          "belongs to another job (" + what + "); remove it, or give this job another --checkpoint path");
    };
    if (ckpt.table_sha256 != table_id.sha256) mismatch("its table's SHA-256 differs from " + args.table + "'s");
    if (ckpt.batch_sha256 != batch_id.sha256) mismatch("its batch's SHA-256 differs from " + args.batch + "'s");
    if (ckpt.rows != v || ckpt.cols != d) mismatch("its gradient has another shape");
    if (ckpt.numeric_mode != mode) mismatch("it ran in mode " + ckpt.numeric_mode + ", this job in " + mode);
    if (ckpt.padding_idx != layer.padding_idx()) mismatch("its padding_idx differs");
    // The identical fold does not depend on the split; the deterministic tree does.
    if (layer.mode() != Mode::identical && ckpt.microbatch_size != args.microbatch)
      mismatch("mode " + mode + " needs the same --microbatch (" + std::to_string(ckpt.microbatch_size) + ")");
    if (ckpt.position < 0 || ckpt.position > t) mismatch("its position is beyond the batch");
    Kokkos::deep_copy(grad,
                      Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                          ckpt.gradient.data(), v, d));
    counts = std::move(ckpt.counts);
    if (!ckpt.job_id.empty()) job_id = ckpt.job_id;  // the same job, continued
    position = ckpt.position;
    microbatches = ckpt.microbatches;
    resumed_elapsed = ckpt.elapsed_seconds;
    console.log("kembed backward: resuming from " + checkpoint_path + " at position " + with_commas(position) + " of " +
                with_commas(t));
  } else if (args.resume) {
    console.log("kembed backward: no checkpoint at " + checkpoint_path + "; starting from the beginning");
  }
  std::int64_t const resumed_from = position;

  // Blocks of at least 64 Ki positions are read at once, and cut into microbatches.
  std::int64_t const block = std::max<std::int64_t>(args.microbatch, 65536);
  std::vector<std::int64_t> ids_h(static_cast<std::size_t>(std::min(block, t)));
  std::vector<float> dy_h(static_cast<std::size_t>(std::min(block, t) * d));
  double read_s = 0, backward_s = 0, checkpoint_s = 0;
  std::int64_t last_checkpoint = position;
  Progress progress("backward", t, position);
  console.log("kembed backward: " + with_commas(t) + " positions, V = " + with_commas(v) +
              ", d = " + std::to_string(d) + ", microbatch " + with_commas(args.microbatch) + ", plan " + plan +
              ", mode " + mode + ", " + backend + " with " + std::to_string(threads) + " thread(s)");
  while (position < t) {
    // A block ends on a microbatch boundary so that the split is --microbatch's.
    std::int64_t const n_block = std::min(t - position, block - block % args.microbatch);
    t0 = clock_type::now();
    read_block(batch, args.batch, position, n_block, v, ids_h, &dy_h, &counts);
    read_s += since(t0);
    t0 = clock_type::now();
    // In mode deterministic each row's tree depends on the split, so --microbatch is
    // the size of each call. Otherwise the bits do not depend on it and the block is
    // folded in one call: with thousands of small calls, OpenMP's idle threads spin
    // between kernels and on a busy machine cost more than the folds (docs/PERFORMANCE.md).
    std::int64_t const call = layer.mode() == Mode::deterministic ? args.microbatch : n_block;
    for (std::int64_t k = 0; k < n_block; k += call) {
      std::int64_t const n = std::min(call, n_block - k);
      Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> ids_v(ids_h.data() + k, n);
      Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> dy_v(
          dy_h.data() + k * d, n, d);
      layer.backward(space, Kokkos::create_mirror_view_and_copy(typename Space::memory_space(), ids_v),
                     Kokkos::create_mirror_view_and_copy(typename Space::memory_space(), dy_v), grad, grad);
      microbatches += (n + args.microbatch - 1) / args.microbatch;  // as the split would have had
    }
    space.fence();
    backward_s += since(t0);
    position += n_block;
    progress.update(position);
    if (args.checkpoint_every > 0 && position < t && position - last_checkpoint >= args.checkpoint_every) {
      t0 = clock_type::now();
      io::Checkpoint ckpt;
      ckpt.job_id = job_id;
      ckpt.position = position;
      ckpt.microbatches = microbatches;
      ckpt.microbatch_size = args.microbatch;
      ckpt.table_sha256 = table_id.sha256;
      ckpt.batch_sha256 = batch_id.sha256;
      ckpt.plan = plan;
      ckpt.numeric_mode = mode;
      ckpt.padding_idx = layer.padding_idx();
      ckpt.elapsed_seconds = resumed_elapsed + since(t_start);
      ckpt.rows = v;
      ckpt.cols = d;
      ckpt.gradient.resize(static_cast<std::size_t>(v * d));
      Kokkos::deep_copy(Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                            ckpt.gradient.data(), v, d),
                        grad);
      ckpt.counts = counts;
      io::write_checkpoint(checkpoint_path, ckpt);
      last_checkpoint = position;
      checkpoint_s += since(t0);
    }
  }
  progress.finish();

  io::RunFile run;
  run.run_id = args.run_id.empty() ? make_run_id() : args.run_id;
  run.backend = backend;
  run.threads = threads;
  run.plan = plan;
  run.plan_used = layer.mode() == Mode::identical ? std::string(to_string(layer.plan_for(std::min(args.microbatch, t))))
                  : layer.mode() == Mode::deterministic ? "sort"
                                                        : "atomic";
  run.numeric_mode = mode;
  run.padding_idx = layer.padding_idx();
  run.positions = t;
  run.microbatches = microbatches;
  run.microbatch_size = args.microbatch;
  run.inputs = {table_id, batch_id};
  run.rows = v;
  run.cols = d;
  run.gradient.resize(static_cast<std::size_t>(v * d));
  Kokkos::deep_copy(
      Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(run.gradient.data(), v, d),
      grad);
  run.counts = std::move(counts);
  run.command_line_json = io::json_array(args.command_line);
  run.configuration_json = json_settings(args, layer.config(), backend, threads, resumed_from);
  double const total_s = resumed_elapsed + since(t_start);
  run.timings = {{"read_table_seconds", read_table_s}, {"hash_inputs_seconds", hash_s},
                 {"read_batch_seconds", read_s},       {"backward_seconds", backward_s},
                 {"checkpoint_seconds", checkpoint_s}, {"total_seconds", total_s}};
  io::SaveOptions save;
  save.deflate = args.deflate;
  io::write_run(args.out, run, save);
  if (args.checkpoint_every > 0 || found_checkpoint)  // the job is done: its checkpoint goes
    remove_own_checkpoint(checkpoint_path, job_id, found_checkpoint ? &*found_checkpoint : nullptr);

  auto const sha = io::sha256_hex(run.gradient.data(), run.gradient.size() * sizeof(float));
  double const done = double(t - resumed_from);
  std::printf("run file:   %s\n", args.out.c_str());
  std::printf("gradient:   %s x %s, SHA-256 %s\n", with_commas(v).c_str(), with_commas(d).c_str(), sha.c_str());
  std::printf("positions:  %s in %s microbatches of %s (%s, plan %s, mode %s, %s with %d thread(s))\n",
              with_commas(t).c_str(), with_commas(microbatches).c_str(), with_commas(args.microbatch).c_str(),
              resumed_from ? ("resumed at " + with_commas(resumed_from)).c_str() : "one pass", run.plan_used.c_str(),
              mode.c_str(), backend.c_str(), threads);
  double const total_here = since(t_start);
  std::printf("time:       %s backward, %s reading, %s total (%.3g positions/s reading and folding, %.3g end to end)\n",
              seconds_text(backward_s).c_str(), seconds_text(read_s).c_str(), seconds_text(total_here).c_str(),
              backward_s + read_s > 0 ? done / (backward_s + read_s) : 0.0, total_here > 0 ? done / total_here : 0.0);
  std::printf("peak memory: %.1f MiB\n", double(peak_rss_bytes()) / (1 << 20));
  std::string const program = args.command_line.empty() ? "kembed" : args.command_line.front();
  std::printf("look at it: %s info %s; %s diff %s OTHER.h5\n", program.c_str(), args.out.c_str(), program.c_str(),
              args.out.c_str());
  return Exit::ok;
}

template <class Space>
int forward(ForwardArgs const& args) {
  if (args.microbatch < 1)
    throw InvalidArgument("microbatch", "--microbatch must be at least 1, got " + std::to_string(args.microbatch));
  for (auto const& [option, input] : {std::pair{"--table", args.table}, std::pair{"--ids", args.ids}})
    if (same_file(args.out, input))
      throw InvalidArgument("out", "--out " + args.out + " is the same file as " + option + " " + input +
                                       "; the output would replace it. Give --out a path of its own");
  check_output_path("--out", args.out);
  auto const t_start = clock_type::now();
  auto table = io::load_table(args.table);
  auto const v = table.config.num_embeddings, d = table.config.embedding_dim;
  Space space;
  Embedding<Space> layer(space, v, d, FloatsRef(table.weight.data(), Shape{v, d}));
  table.weight = {};
  io::BatchReader ids(args.ids, false, args.ids_dataset);
  auto const t = ids.info().positions;
  auto const table_sha = io::sha256_file(args.table);
  auto const ids_sha = io::sha256_file(args.ids);
  io::ForwardWriter out(args.out, t, d, table_sha, ids_sha);
  std::int64_t const block = std::min(t, args.microbatch);
  std::vector<std::int64_t> ids_h(static_cast<std::size_t>(block));
  std::vector<float> y_h(static_cast<std::size_t>(block * d));
  typename Embedding<Space>::matrix_type y("kembed::cli::y", block, d);
  Progress progress("forward", t);
  for (std::int64_t p = 0; p < t; p += block) {
    std::int64_t const n = std::min(block, t - p);
    read_block(ids, args.ids, p, n, v, ids_h, nullptr, nullptr);
    Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> ids_v(ids_h.data(), n);
    auto y_n = Kokkos::subview(y, std::make_pair(std::int64_t{0}, n), Kokkos::ALL);
    layer.forward(space, Kokkos::create_mirror_view_and_copy(typename Space::memory_space(), ids_v), y_n);
    Kokkos::deep_copy(
        Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(y_h.data(), n, d), y_n);
    out.write(p, n, y_h.data());
    progress.update(p + n);
  }
  progress.finish();
  out.commit();
  std::printf("output:     %s (y: %s x %s float32)\n", args.out.c_str(), with_commas(t).c_str(),
              with_commas(d).c_str());
  std::printf("time:       %s\n", seconds_text(since(t_start)).c_str());
  return Exit::ok;
}

// One instantiation per backend the Kokkos found was built with (kembed/backends.hpp).
#if defined(KOKKOS_ENABLE_SERIAL)
template int backward<Kokkos::Serial>(BackwardArgs const&);
template int forward<Kokkos::Serial>(ForwardArgs const&);
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
template int backward<Kokkos::OpenMP>(BackwardArgs const&);
template int forward<Kokkos::OpenMP>(ForwardArgs const&);
#endif
#if defined(KOKKOS_ENABLE_CUDA)
template int backward<Kokkos::Cuda>(BackwardArgs const&);
template int forward<Kokkos::Cuda>(ForwardArgs const&);
#endif
#if defined(KOKKOS_ENABLE_HIP)
template int backward<HipSpace>(BackwardArgs const&);
template int forward<HipSpace>(ForwardArgs const&);
#endif

}  // namespace kembed::cli
