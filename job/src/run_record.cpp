// The backward job's record, as a checkpoint, a run file's header and a report.
#include <kembed/job/detail/run_record.hpp>
#include <kembed/job/detail/support.hpp>

namespace kembed::job::detail {

io::Checkpoint checkpoint_of(RunRecord const& r, double elapsed) {
  io::Checkpoint c;
  c.job_id = r.job_id;
  c.position = r.position;
  c.microbatches = r.microbatches;
  c.microbatch_size = r.microbatch_size;
  c.table_sha256 = r.table.sha256;
  c.batch_sha256 = r.batch.sha256;
  c.fingerprint = r.table.fingerprint;
  c.plan = r.config.plan;
  c.numeric_mode = r.config.mode;
  c.scale_grad_by_freq = r.config.scale_grad_by_freq;
  c.padding_idx = r.config.padding_idx;
  c.pooling = r.pooling;
  c.bags = r.bag;
  c.elapsed_seconds = elapsed;
  c.rows = r.config.num_embeddings;
  c.cols = r.config.embedding_dim;
  return c;
}

io::RunFile run_header_of(RunRecord const& r, BackwardSettings const& s) {
  io::RunFile run;
  run.run_id = r.run_id;
  run.backend = r.backend;
  run.threads = r.threads;
  run.ranks = r.ranks;
  run.plan = r.config.plan;
  run.plan_used = r.plan_used;
  run.numeric_mode = r.config.mode;
  run.scale_grad_by_freq = r.config.scale_grad_by_freq;
  run.padding_idx = r.config.padding_idx;
  run.positions = r.positions;
  run.microbatches = r.microbatches;
  run.microbatch_size = r.microbatch_size;
  run.pooling = r.pooling;
  run.bags = r.bags;
  run.rows = r.config.num_embeddings;
  run.cols = r.config.embedding_dim;
  run.rank_work = r.rank_work;
  run.command_line_json = io::json_array(s.command_line);
  run.configuration_json =
      settings_json(s, r.config, r.backend, r.threads, r.ranks, r.resumed_from, r.pooling, r.table.fingerprint);
  return run;
}

std::vector<std::pair<std::string, double>> timings_of(RunRecord const& r, double elapsed) {
  std::vector<std::pair<std::string, double>> timings{
      {"read_table_seconds", r.seconds.read_table}, {"hash_inputs_seconds", r.seconds.hash},
      {"read_batch_seconds", r.seconds.read},       {"backward_seconds", r.seconds.backward},
      {"checkpoint_seconds", r.seconds.checkpoint}, {"total_seconds", elapsed}};
  if (r.ranks > 1) timings.emplace_back("exchange_seconds", r.seconds.exchange);
  timings.emplace_back("hash_wait_seconds", r.seconds.hash_wait);
  return timings;
}

BackwardReport report_of(RunRecord const& r, BackwardSettings const& s, double total) {
  BackwardReport report;
  report.out = s.out;
  report.gradient_sha256 = r.gradient_sha256;
  report.plan_used = r.plan_used;
  report.mode = to_string(r.config.mode);
  report.backend = r.backend;
  report.rows = r.config.num_embeddings;
  report.cols = r.config.embedding_dim;
  report.positions = r.positions;
  report.microbatches = r.microbatches;
  report.microbatch_size = r.microbatch_size;
  report.resumed_from = r.resumed_from;
  report.pooling = r.pooling ? std::string(to_string(*r.pooling)) : std::string();
  report.bags = r.bags;
  report.threads = r.threads;
  report.ranks = r.ranks;
  report.bytes_exchanged = r.bytes_exchanged;
  report.exchange_seconds = r.seconds.exchange;
  report.read_table_seconds = r.seconds.read_table;
  report.hash_seconds = r.seconds.hash;
  report.read_seconds = r.seconds.read;
  report.backward_seconds = r.seconds.backward;
  report.checkpoint_seconds = r.seconds.checkpoint;
  report.write_seconds = r.seconds.write;
  report.hash_wait_seconds = r.seconds.hash_wait;
  report.total_seconds = total;
  return report;
}

}  // namespace kembed::job::detail
