// The settings a run file or a checkpoint recorded, read back from their text into a
// Config, so that runs, checkpoints and tables are compared by one
// kembed::differences (core/options.hpp).
#include <kembed/core/error.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/run_file.hpp>

namespace kembed::io {

namespace {

// A value kembed never writes is damage (or an edit), named with the file.
template <class Parse>
auto parsed(std::string const& path, char const* attribute, std::string const& text, Parse parse) {
  try {
    return parse(text);
  } catch (InvalidArgument const&) {
    throw FileError(path, "",
                    "attribute '" + std::string(attribute) + "' holds '" + text +
                        "', which kembed never writes: the file is damaged or was edited");
  }
}

Config recorded(std::string const& path, std::int64_t rows, std::int64_t cols, std::int64_t padding_idx,
                std::string const& plan, std::string const& mode, std::string const& scale, bool sparse) {
  Config c;
  c.num_embeddings = rows;
  c.embedding_dim = cols;
  c.padding_idx = padding_idx < 0 ? -1 : padding_idx;
  c.plan = parsed(path, "plan", plan, parse_plan);
  c.mode = parsed(path, "numeric_mode", mode, parse_mode);
  c.scale_grad_by_freq = parsed(path, "scale_grad_by_freq", scale, parse_freq_scale);
  c.sparse = sparse;
  return c;
}

}  // namespace

Config settings_of(RunFile const& run, std::string const& path) {
  return recorded(path, run.rows, run.cols, run.padding_idx, run.plan, run.numeric_mode, run.scale_grad_by_freq,
                  run.sparse);
}

Config settings_of(Checkpoint const& c, std::string const& path) {
  return recorded(path, c.rows, c.cols, c.padding_idx, c.plan, c.numeric_mode, c.scale_grad_by_freq, c.sparse);
}

}  // namespace kembed::io
