// kembed step's backend-free parts: its three inputs read and checked against each
// other, its two outputs written with their provenance (kembed/job/step.hpp).
#include <kembed/core/validate.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/job/detail/step_files.hpp>
#include <kembed/job/paths.hpp>

#include <utility>

namespace kembed::job::detail {
namespace {

std::string shape(std::int64_t rows, std::int64_t cols) {
  return "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
}

io::InputIdentity identify(char const* role, std::string const& path) {
  io::InputIdentity id;
  id.role = role, id.path = path;
  id.sha256 = io::sha256_file(path, &id.bytes);
  return id;
}

// Outputs over inputs, or over each other, would lose a file the user did not hand
// the step for that.
void check_step_paths(StepSettings const& s, std::string const& state_out, Observer const& o) {
  std::vector<std::pair<std::string, std::string>> inputs{{"table", s.table}, {"run", s.run}};
  if (!s.state.empty()) inputs.emplace_back("state", s.state);
  for (auto const& [setting, path] :
       {std::pair{std::string("out"), s.out}, std::pair{std::string("state_out"), state_out}})
    for (auto const& [input, input_path] : inputs)
      if (same_file(path, input_path))
        throw InvalidArgument(setting, o.name_of(setting) + " " + path + " is the same file as " + o.name_of(input) +
                                           " " + input_path + "; the step would replace it. Give " +
                                           o.name_of(setting) + " a path of its own");
  if (same_file(s.out, state_out))
    throw InvalidArgument("state_out", o.name_of("state_out") + " " + state_out + " is the same file as " +
                                           o.name_of("out") + "; the state needs a path of its own");
  check_output_path(o.name_of("out"), s.out);
  check_output_path(o.name_of("state_out"), state_out);
}

// The run's gradient must be the table's shape, finite, and computed on this table.
void check_run(StepSettings const& s, io::RunFile const& run, io::InputIdentity const& table, std::int64_t v,
               std::int64_t d, Observer const& o) {
  std::string const name = o.name_of("run") + " " + s.run;
  if (run.rows != v || run.cols != d)
    throw InvalidArgument("run", name + " holds a " + shape(run.rows, run.cols) + " gradient; " + o.name_of("table") +
                                     " " + s.table + " is " + shape(v, d));
  std::string recorded;
  for (auto const& input : run.inputs)
    if (input.role == "table") recorded = input.sha256;
  if (recorded.empty())
    throw InvalidArgument("run", name +
                                     " does not record the table it was computed on; a step applies a gradient to "
                                     "that table only");
  if (recorded != table.sha256)
    throw InvalidArgument("run", name + " was computed on a table with SHA-256 " + recorded + ", and " +
                                     o.name_of("table") + " " + s.table + " has SHA-256 " + table.sha256 +
                                     ": a step applies a gradient to the table it was computed on");
  auto const n = std::int64_t(run.gradient.size());
  if (auto const i = first_non_finite(run.gradient.data(), n); i < n)
    throw InvalidArgument("run", name + "'s gradient holds " + std::to_string(run.gradient[std::size_t(i)]) +
                                     " at row " + std::to_string(i / d) + ", column " + std::to_string(i % d) +
                                     "; a step needs a finite gradient");
}

// The state's settings, or torch's defaults for the optimizer asked for, with the
// settings given applied; the state checked against them and the table.
void resolve_state(StepSettings const& s, StepInputs& in, Observer const& o) {
  auto const v = in.table.config.num_embeddings, d = in.table.config.embedding_dim;
  if (s.state.empty()) {
    if (!s.optimizer)
      throw InvalidArgument("optimizer", o.name_of("optimizer") + " is needed for a first step (without " +
                                             o.name_of("state") + "): sgd, adagrad, rowwise_adagrad or adam");
    in.settings = optim_defaults(*s.optimizer);
    if (s.adjust) s.adjust(in.settings);
    check_settings(in.settings);
    in.state = initial_state(in.settings, v, d);
    return;
  }
  auto f = io::load_optim_state(s.state);
  in.state_id = identify("state", s.state);
  std::string const name = o.name_of("state") + " " + s.state;
  if (s.optimizer && *s.optimizer != f.settings.optimizer)
    throw InvalidArgument("optimizer", name + " is " + std::string(to_string(f.settings.optimizer)) + "'s state; " +
                                           o.name_of("optimizer") + " " + std::string(to_string(*s.optimizer)) +
                                           " would need its own");
  if (f.state.num_embeddings != v || f.state.embedding_dim != d)
    throw InvalidArgument("state", name + " is the state of a " + shape(f.state.num_embeddings, f.state.embedding_dim) +
                                       " table; " + o.name_of("table") + " " + s.table + " is " + shape(v, d));
  if (f.table_sha256 != in.table_id.sha256)
    throw InvalidArgument("state", name + " goes with the table its step wrote (SHA-256 " + f.table_sha256 + "); " +
                                       o.name_of("table") + " " + s.table + " has SHA-256 " + in.table_id.sha256);
  in.settings = f.settings;
  if (s.adjust) s.adjust(in.settings);
  check_settings(in.settings);
  check_state(f.state, in.settings, v, d);  // settings that keep another state (momentum given or taken away)
  in.state = std::move(f.state);
}

std::string provenance(StepInputs const& in, std::int64_t step) {
  std::vector<std::string> inputs;
  for (auto const* id : {&in.table_id, &in.run_id, &in.state_id}) {
    if (id->path.empty()) continue;
    inputs.push_back("{\"role\": " + io::json_quote(id->role) + ", \"path\": " + io::json_quote(id->path) +
                     ", \"sha256\": " + io::json_quote(id->sha256) + ", \"bytes\": " + std::to_string(id->bytes) + "}");
  }
  std::string list;
  for (auto const& item : inputs) list += (list.empty() ? "" : ", ") + item;
  return "{\"step\": " + std::to_string(step) + ", \"settings\": " + io::settings_json(in.settings) +
         ", \"inputs\": [" + list + "]}";
}

}  // namespace

std::string state_out_path(StepSettings const& s) {
  return s.state_out.empty() ? s.out + ".state" : s.state_out;
}

StepInputs read_step_inputs(StepSettings const& s, Observer const& o) {
  check_step_paths(s, state_out_path(s), o);
  StepInputs in;
  in.table = io::load_table(s.table);
  in.table_id = identify("table", s.table);
  in.run = io::read_run(s.run);  // refuses a gradient that is not its SHA-256
  in.run_id = identify("run", s.run);
  check_run(s, in.run, in.table_id, in.table.config.num_embeddings, in.table.config.embedding_dim, o);
  resolve_state(s, in, o);
  return in;
}

void write_step_outputs(StepSettings const& s, StepInputs const& in, std::vector<float> const& weight,
                        OptimState const& state, StepReport& report) {
  io::SaveOptions so;
  so.deflate = s.deflate;
  so.provenance = provenance(in, state.step);
  io::save_table(s.out, weight.data(), in.table.config, so);
  io::OptimStateFile f;
  f.settings = in.settings;
  f.state = state;
  f.table_sha256 = io::sha256_file(s.out);
  io::save_optim_state(state_out_path(s), f, so);
  report.out = s.out, report.state_out = state_out_path(s);
  report.table_sha256 = f.table_sha256;
  report.state_sha256 = io::state_sha256(state);
}

}  // namespace kembed::job::detail
