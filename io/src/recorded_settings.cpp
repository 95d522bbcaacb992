// The settings a run file or a checkpoint recorded, as a Config, so that runs,
// checkpoints and tables are compared by one kembed::differences (core/options.hpp).
#include <kembed/io/job_files.hpp>
#include <kembed/io/run_file.hpp>

namespace kembed::io {

namespace {
Config recorded(std::int64_t rows, std::int64_t cols, std::int64_t padding_idx, Plan plan, Mode mode, FreqScale scale,
                bool sparse) {
  Config c;
  c.num_embeddings = rows;
  c.embedding_dim = cols;
  c.padding_idx = padding_idx < 0 ? -1 : padding_idx;
  c.plan = plan;
  c.mode = mode;
  c.scale_grad_by_freq = scale;
  c.sparse = sparse;
  return c;
}
}  // namespace

Config settings_of(RunFile const& run) {
  return recorded(run.rows, run.cols, run.padding_idx, run.plan, run.numeric_mode, run.scale_grad_by_freq, run.sparse);
}

Config settings_of(Checkpoint const& c) {
  return recorded(c.rows, c.cols, c.padding_idx, c.plan, c.numeric_mode, c.scale_grad_by_freq, c.sparse);
}

}  // namespace kembed::io
