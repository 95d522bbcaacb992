// kembed step's backend-free parts: its three inputs read and checked against each
// other, its two outputs written with their provenance (kembed/job/step.hpp).
#include <kembed/core/validate.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/row_reader.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/job/detail/step_files.hpp>
#include <kembed/job/paths.hpp>

#include <cstring>
#include <exception>
#include <utility>

namespace kembed::job::detail {
namespace {

std::string shape(std::int64_t rows, std::int64_t cols) {
  return "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
}

// An input's identity, its bytes hashed once (by the first rank) for every rank.
io::InputIdentity identify(char const* role, std::string const& path, StepTeam const& team,
                           io::Fingerprint kind = io::Fingerprint::file) {
  io::InputIdentity id;
  id.role = role, id.path = path, id.fingerprint = kind;
  std::string text;
  if (team.rank == 0) {
    id.sha256 = io::fingerprint_file(path, kind, &id.bytes);
    text = id.sha256 + " " + std::to_string(id.bytes);
  }
  text = team.broadcast(text);
  id.sha256 = text.substr(0, text.find(' '));
  id.bytes = std::stoll(text.substr(text.find(' ') + 1));
  return id;
}

// Runs `f` on every rank; every rank throws the first rank's error, if any had one.
template <class F>
void together(StepTeam const& team, F&& f) {
  std::exception_ptr error;
  try {
    f();
  } catch (...) {
    error = std::current_exception();
  }
  team.agree(error);
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

io::InputIdentity recorded_table(io::RunFile const& run) {
  for (auto const& input : run.inputs)
    if (input.role == "table") return input;
  return {};
}

// The run's gradient must be the table's shape and computed on this table (its header).
void check_run(StepSettings const& s, io::RunFile const& run, io::InputIdentity const& table, std::int64_t v,
               std::int64_t d, Observer const& o) {
  std::string const name = o.name_of("run") + " " + s.run;
  if (run.rows != v || run.cols != d)
    throw InvalidArgument("run", name + " holds a " + shape(run.rows, run.cols) + " gradient; " + o.name_of("table") +
                                     " " + s.table + " is " + shape(v, d));
  auto const recorded = recorded_table(run);
  if (recorded.sha256.empty())
    throw InvalidArgument("run", name +
                                     " does not record the table it was computed on; a step applies a gradient to "
                                     "that table only");
  std::string const kind = recorded.fingerprint == io::Fingerprint::chunks ? "SHA-256 of 16 MiB chunks " : "SHA-256 ";
  if (recorded.sha256 != table.sha256)
    throw InvalidArgument("run", name + " was computed on a table with " + kind + recorded.sha256 + ", and " +
                                     o.name_of("table") + " " + s.table + " has " + kind + table.sha256 +
                                     ": a step applies a gradient to the table it was computed on");
}

// This process's rows of the run's gradient (a sparse run's as dense rows, and its
// listed rows among them), checked against the run's digest across the team and for
// values that are not finite.
void read_gradient(StepSettings const& s, StepInputs& in, StepTeam const& team, std::int64_t d, Observer const& o) {
  io::RowReader reader(s.run);
  in.grad.resize(std::size_t(team.count * d));
  together(team, [&] {
    if (team.count > 0) reader.read(team.first, team.count, in.grad.data());
  });
  std::vector<char> records;
  if (in.run.sparse) {
    for (auto r : reader.listed_rows())
      if (r >= team.first && r < team.first + team.count) in.listed.push_back(r);
    records.resize(in.listed.size() * std::size_t(8 + 4 * d));  // as sparse_gradient_sha256 hashes them
    char* at = records.data();
    for (auto r : in.listed) {
      std::memcpy(at, &r, 8);
      std::memcpy(at + 8, in.grad.data() + (r - team.first) * d, std::size_t(4 * d));
      at += 8 + 4 * d;
    }
  }
  auto const digest = in.run.sparse ? team.sha256(records.data(), records.size())
                                    : team.sha256(in.grad.data(), in.grad.size() * sizeof(float));
  if (digest != in.run.gradient_sha256)
    throw io::FileError(s.run, "/gradient",
                        "does not match its SHA-256 (attribute gradient_sha256 = " + in.run.gradient_sha256 +
                            "): the run file is damaged or was edited");
  together(team, [&] {
    auto const n = std::int64_t(in.grad.size());
    if (auto const i = first_non_finite(in.grad.data(), n); i < n)
      throw InvalidArgument("run", o.name_of("run") + " " + s.run + "'s gradient holds " +
                                       std::to_string(in.grad[std::size_t(i)]) + " at row " +
                                       std::to_string(team.first + i / d) + ", column " + std::to_string(i % d) +
                                       "; a step needs a finite gradient");
  });
}

// The state's settings, or torch's defaults for the optimizer asked for, with the
// settings given applied; this process's rows of the state, checked against them,
// the table and the state's digest.
void resolve_state(StepSettings const& s, StepInputs& in, StepTeam const& team, Observer const& o) {
  auto const v = in.table.config.num_embeddings, d = in.table.config.embedding_dim;
  if (s.state.empty()) {
    if (!s.optimizer)
      throw InvalidArgument("optimizer", o.name_of("optimizer") + " is needed for a first step (without " +
                                             o.name_of("state") + "): sgd, adagrad, rowwise_adagrad or adam");
    in.settings = optim_defaults(*s.optimizer);
    if (s.adjust) s.adjust(in.settings);
    check_settings(in.settings);
    in.state = initial_state(in.settings, team.count, d);
    return;
  }
  io::OptimStateFile f;
  together(team, [&] { f = io::load_optim_rows(s.state, team.first, team.count); });
  in.state_id = identify("state", s.state, team);
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
  auto const records = io::state_records(f.state, team.count);
  if (team.sha256(records.data(), records.size() * sizeof(float)) != f.state_sha256)
    throw io::FileError(s.state, "",
                        "its arrays do not match their SHA-256 (attribute state_sha256 = " + f.state_sha256 +
                            "): the file is damaged or was edited");
  in.settings = f.settings;
  if (s.adjust) s.adjust(in.settings);
  check_settings(in.settings);
  f.state.num_embeddings = team.count;
  together(team, [&] {  // settings that keep another state (momentum given or taken away)
    check_state(f.state, in.settings, team.count, d);
  });
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

StepInputs read_step_inputs(StepSettings const& s, StepTeam const& team, Observer const& o) {
  together(team, [&] { check_step_paths(s, state_out_path(s), o); });
  StepInputs in;
  together(team, [&] { in.table = io::load_rows(s.table, team.first, team.count); });
  in.table_id = identify("table", s.table, team);
  together(team, [&] { in.run = io::read_run_header(s.run); });
  in.run_id = identify("run", s.run, team);
  auto const d = in.table.config.embedding_dim;
  // The table as the run identified it (its fingerprint's kind), to check the two go together.
  auto const kind = recorded_table(in.run).fingerprint;
  auto const as_run = kind == in.table_id.fingerprint ? in.table_id : identify("table", s.table, team, kind);
  check_run(s, in.run, as_run, in.table.config.num_embeddings, d, o);  // the same on every rank
  read_gradient(s, in, team, d, o);
  resolve_state(s, in, team, o);
  return in;
}

void write_step_outputs(StepSettings const& s, StepInputs const& in, std::vector<float> const& weight,
                        OptimState const& state, StepTeam const& team, StepReport& report) {
  io::SaveOptions so;
  so.deflate = s.deflate;
  so.provenance = provenance(in, state.step);
  io::save_table(s.out, weight.data(), team.first, team.count, in.table.config, so, team.collective);
  io::OptimStateFile f;
  f.settings = in.settings;
  f.state = state;
  f.state.num_embeddings = in.table.config.num_embeddings;
  f.first_row = team.first;
  std::string digest = team.rank == 0 ? io::sha256_file(s.out) : std::string();
  f.table_sha256 = team.broadcast(digest);
  auto const records = io::state_records(state, team.count);
  f.state_sha256 = team.sha256(records.data(), records.size() * sizeof(float));
  io::save_optim_state(state_out_path(s), f, team.count, so, team.collective);
  report.out = s.out, report.state_out = state_out_path(s);
  report.table_sha256 = f.table_sha256;
  report.state_sha256 = f.state_sha256;
}

}  // namespace kembed::job::detail
