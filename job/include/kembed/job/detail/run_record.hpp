#pragma once
// One record of a backward job, from which its checkpoints, its run file's header and
// its report are all made, so that the three cannot disagree (job/src/run_record.cpp).
#include <kembed/core/bags.hpp>
#include <kembed/core/options.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/job/settings.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kembed::job::detail {

struct RunRecord {
  std::string job_id;  // the job a checkpoint belongs to (a resume keeps its checkpoint's)
  std::string run_id;  // this run's, set when it publishes
  Config config;       // the whole table's settings as run (config.sparse: a row-sparse run)
  std::string backend;
  int threads = 0, ranks = 1;
  std::int64_t positions = 0, microbatch_size = 0;                         // T and the settings' microbatch
  std::int64_t position = 0, microbatches = 0;                             // folded so far
  std::int64_t resumed_from = 0;                                           // where this process began
  // A bag job's: its pooling, the batch's bags and the bags folded so far (position
  // then counts their positions; resumed_from, microbatch_size and progress count bags).
  std::optional<Pooling> pooling;
  std::int64_t bags = 0, bag = 0;
  double elapsed_before = 0;                                               // seconds the job ran before this resume
  io::InputIdentity table{"table", "", "", 0}, batch{"batch", "", "", 0};  // digests once hashed
  std::string plan_used;  // the first rank's, by the paths its calls took
  std::string gradient_sha256;
  std::int64_t bytes_exchanged = 0;
  std::vector<io::RankWork> rank_work;  // every rank's share, in rank order (many ranks only)
  struct Seconds {
    double read_table = 0, hash = 0, read = 0, backward = 0, checkpoint = 0, write = 0, hash_wait = 0, exchange = 0;
  } seconds;
};

// A checkpoint's attributes at the record's position (`elapsed`: the job's seconds so far).
io::Checkpoint checkpoint_of(RunRecord const& r, double elapsed);
// A run file's header (inputs and timings are added once known: timings_of).
io::RunFile run_header_of(RunRecord const& r, BackwardSettings const& s);
// A run file's /timings, in the order of io::timing_phases (`elapsed` as above).
std::vector<std::pair<std::string, double>> timings_of(RunRecord const& r, double elapsed);
// What the job reports (`total`: this process's seconds).
BackwardReport report_of(RunRecord const& r, BackwardSettings const& s, double total);

}  // namespace kembed::job::detail
