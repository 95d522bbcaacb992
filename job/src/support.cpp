#include <kembed/job/backward.hpp>
#include <kembed/job/detail/forward_job.hpp>
#include <kembed/job/detail/support.hpp>
#include <kembed/job/paths.hpp>

#include <kembed/io/describe.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/run_file.hpp>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#if defined(_OPENMP)
#include <omp.h>
#endif
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <new>
#include <random>
#include <vector>

namespace kembed::job::detail {

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

namespace {
// Whether `path` is tagged as a kembed checkpoint (whatever else is wrong with it).
bool is_checkpoint(std::string const& path) {
  try {
    return io::file_format(path) == io::checkpoint_format;
  } catch (Error const&) {
    return false;
  }
}
}  // namespace

void refuse_checkpoint(io::FileError const& e) {
  throw io::FileError(e.path(), e.dataset(),
                      e.problem() + "; it is not resumed and was left as it is: remove it to start the job again");
}

std::optional<io::Checkpoint> check_job_paths(BackwardSettings const& s, std::string const& checkpoint_path,
                                              Observer const& o) {
  std::string const out = o.name_of("out"), checkpoint = o.name_of("checkpoint");
  for (auto const& [setting, input] : {std::pair{"table", s.table}, std::pair{"batch", s.batch}}) {
    if (same_file(s.out, input))
      throw InvalidArgument("out", out + " " + s.out + " is the same file as " + o.name_of(setting) + " " + input +
                                       "; the run file would replace it. Give " + out + " a path of its own");
    if (same_file(checkpoint_path, input))
      throw InvalidArgument("checkpoint", checkpoint + " " + checkpoint_path + " is the same file as " +
                                              o.name_of(setting) + " " + input +
                                              "; a checkpoint needs a path of its own");
  }
  if (same_file(checkpoint_path, s.out))
    throw InvalidArgument("checkpoint", checkpoint + " " + checkpoint_path + " is the same file as " + out + " " +
                                            s.out + "; a checkpoint needs a path of its own");
  check_output_path(out, s.out);
  bool const uses_checkpoint = s.checkpoint_every > 0 || s.resume;
  if (!uses_checkpoint || !path_exists(checkpoint_path)) {
    if (s.checkpoint_every > 0) check_output_path(checkpoint, checkpoint_path);
    return std::nullopt;
  }
  // This job would overwrite, resume from and remove what is there: it must be a checkpoint.
  io::Checkpoint found;
  try {
    found = io::read_checkpoint(checkpoint_path, false);
  } catch (io::FileError const& e) {
    if (is_checkpoint(checkpoint_path)) refuse_checkpoint(e);  // a kembed checkpoint, damaged
    std::string const why = std::string(e.what()).substr(std::string("kembed: ").size());
    throw InvalidArgument("checkpoint", why + ". kembed writes, resumes and removes its checkpoint at " +
                                            checkpoint_path +
                                            ", so that path must be free or hold a kembed checkpoint; it was "
                                            "left as it is");
  }
  if (!s.resume) {
    throw InvalidArgument("checkpoint", checkpoint_path + " holds the checkpoint of an unfinished job (at position " +
                                            with_commas(found.position) + "); continue it with " + o.name_of("resume") +
                                            ", or remove it to start again");
  }
  return found;
}

std::string remove_own_checkpoint(std::string const& path, std::string const& job_id,
                                  io::Checkpoint const* resumed_legacy) {
  if (!path_exists(path)) return {};
  io::Checkpoint there;
  try {
    there = io::read_checkpoint(path, false);
  } catch (Error const&) {
    return "left " + path + " alone: it is no longer a kembed checkpoint";
  }
  bool const ours = there.job_id.empty() ? resumed_legacy && resumed_legacy->job_id.empty() &&
                                               there.table_sha256 == resumed_legacy->table_sha256 &&
                                               there.batch_sha256 == resumed_legacy->batch_sha256
                                         : there.job_id == job_id;
  if (!ours) return "left " + path + " alone: it is another job's checkpoint";
  ::unlink(path.c_str());
  return {};
}

std::string most_positions(std::map<std::string_view, std::int64_t> const& positions_by_plan) {
  std::string best;
  std::int64_t most = 0;
  for (auto const& [plan, n] : positions_by_plan)
    if (n > most) best = std::string(plan), most = n;
  return best;
}

void check_resumable(io::Checkpoint const& c, std::string const& path, io::InputIdentity const& table,
                     io::InputIdentity const& batch, Config const& job, std::int64_t microbatch, std::int64_t positions,
                     Observer const& o, std::optional<Pooling> pooling) {
  auto mismatch = [&](std::string const& what) {
    throw io::FileError(path, "",
                        "belongs to another job (" + what + "); remove it, or give this job another " +
                            o.name_of("checkpoint") + " path");
  };
  if (c.table_sha256 != table.sha256) mismatch("its table's SHA-256 differs from " + table.path + "'s");
  if (c.batch_sha256 != batch.sha256) mismatch("its batch's SHA-256 differs from " + batch.path + "'s");
  if (c.rows != job.num_embeddings || c.cols != job.embedding_dim) mismatch("its gradient has another shape");
  auto const pooled = [](std::optional<Pooling> p) {
    return p ? "pooling " + std::string(to_string(*p)) : "no pooling";
  };
  if (c.pooling != pooling) mismatch("it ran with " + pooled(c.pooling) + ", this job with " + pooled(pooling));
  // Every setting the carried bits depend on (the plan may change: a speed choice),
  // and the carry's form.
  auto const settings = io::settings_of(c);
  std::string differ;
  for (auto const& d : differences(settings, job, Settings::gradient))
    differ += (differ.empty() ? "" : "; ") + ("it ran with " + d.name + " " + d.a + ", this job with " + d.b);
  if (!differ.empty()) mismatch(differ);
  if (settings.sparse != job.sparse)
    mismatch(std::string("it holds a ") + (c.sparse ? "row-sparse" : "dense") + " gradient, this job a " +
             (job.sparse ? "row-sparse" : "dense") + " one");
  // The identical fold does not depend on the split; the deterministic tree does.
  if (job.mode != Mode::identical && c.microbatch_size != microbatch)
    mismatch("mode " + std::string(to_string(job.mode)) + " needs the same " + o.name_of("microbatch") + " (" +
             std::to_string(c.microbatch_size) + ")");
  if (job.scale_grad_by_freq == FreqScale::call && c.microbatch_size != microbatch)
    mismatch("scale_grad_by_freq call needs the same " + o.name_of("microbatch") + " (" +
             std::to_string(c.microbatch_size) + ")");
  if (c.position < 0 || c.position > positions) mismatch("its position is beyond the batch");
}

std::int64_t check_carried(io::Checkpoint const& c, std::string const& path, std::int64_t first_row,
                           std::int64_t padding_idx, bool deterministic) {
  auto refuse = [&](std::string const& object, std::string const& what) {
    throw io::FileError(path, object, what + ", which no job carries: the checkpoint is damaged or was edited");
  };
  std::int64_t const n = std::int64_t(c.counts.size()), d = c.cols;
  std::int64_t const least = c.sparse ? 1 : 0;
  std::int64_t sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t const row = c.sparse ? c.listed_rows[std::size_t(i)] : first_row + i;
    std::int64_t const count = c.counts[std::size_t(i)];
    if (count < least) refuse("/counts", "row " + std::to_string(row) + " has the count " + std::to_string(count));
    if (count > c.position - sum)  // sum <= position throughout: no overflow
      refuse("/counts", "sums to more than the checkpoint's position " + std::to_string(c.position) + " by row " +
                            std::to_string(row));
    sum += count;
    float const* values = c.gradient.data() + i * d;
    bool const zero = count == 0 || row == padding_idx;
    for (std::int64_t k = 0; k < d; ++k) {
      std::uint32_t bits;
      std::memcpy(&bits, values + k, 4);
      if (zero && bits != 0)
        refuse("/gradient", "row " + std::to_string(row) + (row == padding_idx ? ", the padding row," : "") +
                                " holds a value other than +0.0 at column " + std::to_string(k) + " with " +
                                std::to_string(count) + " occurrences");
      if (!deterministic && std::isnan(values[k]))
        refuse("/gradient", "row " + std::to_string(row) + " holds NaN at column " + std::to_string(k) + " in mode " +
                                std::string(to_string(c.numeric_mode)));
    }
  }
  return sum;
}

std::vector<unsigned char> sparse_records(std::int64_t const* rows, float const* values, std::int64_t n,
                                          std::int64_t d) {
  std::vector<unsigned char> records(static_cast<std::size_t>(n * (8 + 4 * d)));
  for (std::int64_t i = 0; i < n; ++i) {
    unsigned char* at = records.data() + i * (8 + 4 * d);
    std::memcpy(at, rows + i, 8);
    std::memcpy(at + 8, values + i * d, static_cast<std::size_t>(4 * d));
  }
  return records;
}

std::string settings_json(BackwardSettings const& s, Config const& c, std::string const& backend, int threads,
                          int ranks, std::int64_t resumed_from, std::optional<Pooling> pooling,
                          io::Fingerprint fingerprint) {
  auto q = io::json_quote;
  return "{\"table\": " + q(s.table) + ", \"batch\": " + q(s.batch) + ", \"ids_dataset\": " + q(s.ids_dataset) +
         ", \"dy_dataset\": " + q(s.dy_dataset) + ", \"out\": " + q(s.out) +
         ", \"microbatch\": " + std::to_string(s.microbatch) + ", \"plan\": " + q(std::string(to_string(c.plan))) +
         ", \"numeric_mode\": " + q(std::string(to_string(c.mode))) +
         ", \"scale_grad_by_freq\": " + q(std::string(to_string(c.scale_grad_by_freq))) +
         ", \"padding_idx\": " + std::to_string(c.padding_idx) + ", \"backend\": " + q(backend) +
         ", \"threads\": " + std::to_string(threads) + ", \"ranks\": " + std::to_string(ranks) +
         ", \"checkpoint_every\": " + std::to_string(s.checkpoint_every) +
         ", \"fingerprint\": " + q(std::string(io::to_string(fingerprint))) +
         (ranks > 1 ? ", \"owners\": " + q(std::string(to_string(s.owners))) : std::string()) +
         ", \"resumed_from\": " + std::to_string(resumed_from) +
         (pooling ? ", \"pooling\": " + q(std::string(to_string(*pooling))) : std::string()) + "}";
}

void unpin_helper_thread() {
#if defined(_OPENMP) && defined(__linux__)
  // The places are the CPUs the process started with (the runtime builds them from
  // its first affinity mask), so taskset and cgroup limits still hold.
  if (omp_get_proc_bind() == omp_proc_bind_false) return;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  int count = 0;
  for (int place = 0; place < omp_get_num_places(); ++place) {
    std::vector<int> ids(static_cast<std::size_t>(omp_get_place_num_procs(place)));
    omp_get_place_proc_ids(place, ids.data());
    for (int id : ids)
      if (id >= 0 && id < CPU_SETSIZE) CPU_SET(id, &cpus), ++count;
  }
  if (count > 0) pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);  // best effort: pinned still works
#endif
}

void check_ids(std::string const& path, std::string const& dataset, std::int64_t first, std::int64_t const* ids,
               std::int64_t n, std::int64_t v) {
  for (std::int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= v)
      throw io::FileError(path, "/" + dataset,
                          "holds " + std::to_string(ids[i]) + " at position " + std::to_string(first + i) +
                              ", outside [0, " + std::to_string(v) + ") (the table's num_embeddings)");
}

void check_forward_settings(ForwardSettings const& s, Observer const& o) {
  if (s.microbatch < 1)
    throw InvalidArgument("microbatch",
                          o.name_of("microbatch") + " must be at least 1, got " + std::to_string(s.microbatch));
  std::string const out = o.name_of("out");
  for (auto const& [setting, input] : {std::pair{"table", s.table}, std::pair{"ids", s.ids}})
    if (same_file(s.out, input))
      throw InvalidArgument("out", out + " " + s.out + " is the same file as " + o.name_of(setting) + " " + input +
                                       "; the output would replace it. Give " + out + " a path of its own");
  check_output_path(out, s.out);
}

void read_ids(io::BatchReader const& batch, ForwardSettings const& s, std::int64_t first, std::int64_t n,
              std::int64_t v, std::vector<std::int64_t>& ids) {
  batch.read(first, n, ids.data(), nullptr);
  check_ids(s.ids, s.ids_dataset, first, ids.data(), n, v);
}

std::optional<Pooling> forward_pooling(io::BatchReader const& batch, ForwardSettings const& s, Observer const& o) {
  if (batch.info().bags > 0) return s.pooling.value_or(Pooling::sum);
  if (s.pooling)
    throw InvalidArgument("pooling", o.name_of("pooling") + " pools bags, but " + s.ids +
                                         " is a batch of positions (it has no /offsets)");
  return std::nullopt;
}

void read_bag_block(io::BatchReader const& batch, std::string const& path, std::string const& ids_dataset,
                    std::int64_t first, std::int64_t n, std::int64_t v, std::vector<std::int64_t>& offsets, float* dy,
                    std::vector<std::int64_t>& ids, std::vector<float>& weights) {
  offsets.resize(std::size_t(n + 1));
  batch.read_bags(first, n, offsets.data(), dy);
  std::int64_t const p = offsets[0], count = offsets[std::size_t(n)] - p;
  ids.resize(std::size_t(count));
  batch.read(p, count, ids.data(), nullptr);
  check_ids(path, ids_dataset, p, ids.data(), count, v);
  weights.resize(batch.info().weighted ? std::size_t(count) : 0);
  if (batch.info().weighted) batch.read_weights(p, count, weights.data());
}

}  // namespace kembed::job::detail

namespace kembed::job {

RowOwners parse_row_owners(std::string const& text, std::string const& setting) {
  if (text == "spread") return RowOwners::spread;
  if (text == "ranges") return RowOwners::ranges;
  throw InvalidArgument(setting, setting + " must be spread or ranges, got '" + text + "'");
}

std::string with_commas(std::int64_t n) {
  return io::with_commas(n);
}

Failure describe(std::exception_ptr error) {
  if (!error) return {};
  try {
    std::rethrow_exception(error);
  } catch (io::IoFailure const& e) {
    std::string text = e.message();
    if (text.rfind(e.path() + ": ", 0) == 0) text = text.substr(e.path().size() + 2);
    return {1, e.path(), text};
  } catch (Error const& e) {
    return {0, "", e.message()};
  } catch (std::bad_alloc const&) {
    return {2, "", "out of memory"};
  } catch (std::exception const& e) {
    return {3, "", e.what()};
  } catch (...) {
    return {3, "", "unknown exception"};
  }
}

void rethrow(Failure const& f) {
  switch (f.kind) {
    case 0:
      throw InvalidArgument("job", f.message);
    case 1:
      throw io::IoFailure(f.path, f.message);
    case 2:
      throw std::bad_alloc();
    default:
      throw std::runtime_error(f.message);
  }
}

std::int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      std::int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    std::getline(status, key);
  }
  return 0;
}

}  // namespace kembed::job
