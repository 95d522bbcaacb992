#include "common.hpp"
#include "sharded_file.hpp"

#include <kembed/core/validate.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/optim_file.hpp>
#include <kembed/io/sha256.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

namespace kembed::io {
namespace {

// The settings each optimizer reads, by torch's argument names (betas as beta1 and
// beta2); only these are written, and a reader takes the rest from optim_defaults.
struct NumberSetting {
  char const* name;
  double OptimSettings::*member;
};
struct FlagSetting {
  char const* name;
  bool OptimSettings::*member;
};

std::vector<NumberSetting> numbers_of(Optimizer o) {
  std::vector<NumberSetting> n{{"lr", &OptimSettings::lr}, {"weight_decay", &OptimSettings::weight_decay}};
  switch (o) {
    case Optimizer::sgd:
      n.insert(n.end(), {{"momentum", &OptimSettings::momentum}, {"dampening", &OptimSettings::dampening}});
      break;
    case Optimizer::adagrad:
      n.push_back({"lr_decay", &OptimSettings::lr_decay});
      [[fallthrough]];
    case Optimizer::rowwise_adagrad:
      n.insert(n.end(), {{"initial_accumulator_value", &OptimSettings::initial_accumulator_value},
                         {"eps", &OptimSettings::eps}});
      break;
    case Optimizer::adam:
      n.insert(n.end(),
               {{"eps", &OptimSettings::eps}, {"beta1", &OptimSettings::beta1}, {"beta2", &OptimSettings::beta2}});
      break;
  }
  return n;
}
std::vector<FlagSetting> flags_of(Optimizer o) {
  std::vector<FlagSetting> f{{"maximize", &OptimSettings::maximize}};
  if (o == Optimizer::sgd) f.push_back({"nesterov", &OptimSettings::nesterov});
  if (o == Optimizer::adam) f.push_back({"decoupled_weight_decay", &OptimSettings::decoupled_weight_decay});
  return f;
}

// SHA-256 of what a step builds on besides the arrays: one name=value line per
// attribute below (numbers as %.17g, flags 0 or 1), after the format tag.
std::string settings_sha256(OptimStateFile const& f) {
  auto const& s = f.settings;
  std::string text = std::string(optim_state_format) + "\n";
  auto line = [&](std::string const& name, std::string const& value) { text += name + "=" + value + "\n"; };
  line("optimizer", std::string(to_string(s.optimizer)));
  line("num_embeddings", std::to_string(f.state.num_embeddings));
  line("embedding_dim", std::to_string(f.state.embedding_dim));
  line("step", std::to_string(f.state.step));
  char number[40];
  for (auto const& n : numbers_of(s.optimizer)) {
    std::snprintf(number, sizeof number, "%.17g", s.*n.member);
    line(n.name, number);
  }
  for (auto const& b : flags_of(s.optimizer)) line(b.name, s.*b.member ? "1" : "0");
  line("table_sha256", f.table_sha256);
  line("state_sha256", f.state_sha256);
  return sha256_hex(text.data(), text.size());
}

void write_header(hid_t root, OptimStateFile const& f, SaveOptions const& options) {
  detail::write_identity(root, optim_state_format, &options);
  auto const& s = f.settings;
  h5::write_string(root, "optimizer", std::string(to_string(s.optimizer)));
  h5::write_int64(root, "num_embeddings", f.state.num_embeddings);
  h5::write_int64(root, "embedding_dim", f.state.embedding_dim);
  h5::write_int64(root, "step", f.state.step);
  for (auto const& n : numbers_of(s.optimizer)) h5::write_double(root, n.name, s.*n.member);
  for (auto const& b : flags_of(s.optimizer)) h5::write_int64(root, b.name, s.*b.member ? 1 : 0);
  h5::write_string(root, "table_sha256", f.table_sha256);
  h5::write_string(root, "state_sha256", f.state_sha256);
  h5::write_string(root, "settings_sha256", settings_sha256(f));
}

// A slab's objection to itself (empty: none): settings torch would refuse, a state
// that is not what they keep for its rows (core's checks).
std::string slab_problem(OptimStateFile const& f, std::int64_t rows) {
  try {
    check_settings(f.settings);
    check_state_rows(f.state, f.settings, rows, f.first_row);
  } catch (Error const& e) {
    return e.message();
  }
  return {};
}

}  // namespace

std::vector<char const*> state_dataset_names(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::sgd:
      return {"momentum_buffer"};
    case Optimizer::adam:
      return {"exp_avg", "exp_avg_sq"};
    default:
      return {"sum"};
  }
}

std::vector<std::string> setting_names(Optimizer optimizer) {
  std::vector<std::string> names;
  for (auto const& n : numbers_of(optimizer)) names.emplace_back(n.name);
  for (auto const& b : flags_of(optimizer)) names.emplace_back(b.name);
  return names;
}

void set_setting(OptimSettings& s, std::string const& name, double value) {
  for (auto const& n : numbers_of(s.optimizer))
    if (name == n.name) return void(s.*n.member = value);
  for (auto const& b : flags_of(s.optimizer))
    if (name == b.name) return void(s.*b.member = value != 0.0);
  std::string known;
  for (auto const& k : setting_names(s.optimizer)) known += (known.empty() ? "" : ", ") + k;
  throw InvalidArgument(
      name, name + " is not a setting of " + std::string(to_string(s.optimizer)) + " (it reads " + known + ")");
}

std::string settings_json(OptimSettings const& s) {
  std::string out = "{\"optimizer\": \"" + std::string(to_string(s.optimizer)) + "\"";
  char number[40];
  for (auto const& n : numbers_of(s.optimizer)) {  // the shortest text that reads back as the same double
    auto const end = std::to_chars(number, number + sizeof number, s.*n.member).ptr;
    out += std::string(", \"") + n.name + "\": " + std::string(number, end);
  }
  for (auto const& b : flags_of(s.optimizer))
    out += std::string(", \"") + b.name + "\": " + (s.*b.member ? "true" : "false");
  return out + "}";
}

std::vector<float> state_records(OptimState const& state, std::int64_t rows) {
  std::vector<float> out(state.first.size() + state.second.size());
  if (rows <= 0 || out.empty()) return out;
  auto const a = std::int64_t(state.first.size()) / rows, b = std::int64_t(state.second.size()) / rows;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::copy_n(state.first.begin() + r * a, a, out.begin() + r * (a + b));
    std::copy_n(state.second.begin() + r * b, b, out.begin() + r * (a + b) + a);
  }
  return out;
}

std::string state_sha256(OptimState const& state) {
  auto const records = state_records(state, state.num_embeddings);
  return sha256_hex(records.data(), records.size() * sizeof(float));
}

namespace {

// Writes rows [first_row, first_row + row_count) of a checked state (this process's;
// `problem`: a rank's objection to its own rows, which stops every rank).
void write_state(std::string const& path, OptimStateFile const& file, std::int64_t row_count,
                 SaveOptions const& options, Collective const* collective, std::string const& problem) {
  auto const& st = file.state;
  auto const v = st.num_embeddings, d = st.embedding_dim;
  auto const w = state_widths(file.settings, d);
  auto const names = state_dataset_names(file.settings.optimizer);
  std::vector<detail::SlabDataset> datasets;
  if (w.first > 0) datasets.push_back(detail::float_rows(names[0], v, w.first == 1 ? 0 : d, st.first.data()));
  if (w.second > 0) datasets.push_back(detail::float_rows(names[1], v, d, st.second.data()));
  detail::write_slabs(
      path, "saving failed, the file is unchanged", [&](hid_t root) { write_header(root, file, options); }, datasets,
      RowSlab{file.first_row, row_count, nullptr, nullptr}, options, collective, problem);
}

}  // namespace

void save_optim_state(std::string const& path, OptimStateFile const& file, SaveOptions const& options) {
  check_settings(file.settings);
  check_state(file.state, file.settings, file.state.num_embeddings, file.state.embedding_dim);
  OptimStateFile f = file;
  f.first_row = 0;
  f.state_sha256 = state_sha256(file.state);
  write_state(path, f, file.state.num_embeddings, options, nullptr, {});
}

void save_optim_state(std::string const& path, OptimStateFile const& file, std::int64_t row_count,
                      SaveOptions const& options, Collective const* collective) {
  auto const v = file.state.num_embeddings, d = file.state.embedding_dim;
  if (v < 1 || d < 1 || file.first_row < 0 || row_count < 0 || file.first_row > v || row_count > v - file.first_row)
    throw InvalidArgument("rows", "rows [" + std::to_string(file.first_row) + ", +" + std::to_string(row_count) +
                                      ") are not rows of a (" + std::to_string(v) + ", " + std::to_string(d) +
                                      ") table's state");
  if (!collective && (file.first_row != 0 || row_count != v))
    throw InvalidArgument("rows", "one process saves the whole state: rows [0, " + std::to_string(v) + ")");
  auto const problem = slab_problem(file, row_count);
  if (!collective && !problem.empty()) throw InvalidArgument("state", problem);
  write_state(path, file, row_count, options, collective, problem);
}

namespace {

OptimSettings read_settings(hid_t root, std::string const& path) {
  OptimSettings s;
  try {
    s = optim_defaults(parse_optimizer(detail::required_string(root, path, "optimizer")));
  } catch (FileError const&) {
    throw;
  } catch (Error const& e) {
    throw FileError(path, "", std::string("its attribute 'optimizer' is not one kembed writes: ") + e.message());
  }
  for (auto const& n : numbers_of(s.optimizer)) {
    auto const value = h5::read_double(root, n.name);
    if (!value) throw FileError(path, "", std::string("has no attribute '") + n.name + "'");
    s.*n.member = *value;
  }
  for (auto const& b : flags_of(s.optimizer)) {
    auto const value = detail::required_int64(root, path, b.name);
    if (value != 0 && value != 1)
      throw FileError(path, "",
                      std::string("its attribute '") + b.name + "' is " + std::to_string(value) + "; want 0 or 1");
    s.*b.member = value == 1;
  }
  try {
    check_settings(s);
  } catch (Error const& e) {
    throw FileError(path, "", std::string("its settings are invalid: ") + e.message());
  }
  return s;
}

// Reads rows [first, first + count) of the state arrays into `f.state`.
void read_arrays(hid_t root, std::string const& path, OptimStateFile& f, std::int64_t first, std::int64_t count) {
  auto const v = f.state.num_embeddings, d = f.state.embedding_dim;
  auto const w = state_widths(f.settings, d);
  auto const names = state_dataset_names(f.settings.optimizer);
  std::int64_t const widths[2] = {w.first, w.second};
  std::vector<float>* arrays[2] = {&f.state.first, &f.state.second};
  for (int k = 0; k < 2; ++k) {
    if (widths[k] == 0) continue;
    std::string const name = std::string("/") + names[std::size_t(k)];
    auto m = detail::open_float_matrix(root, path, name, false, widths[k] == 1);
    if (m.rows != v || m.cols != widths[k])
      throw FileError(path, name,
                      "has shape (" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + "), want (" +
                          std::to_string(v) + ", " + std::to_string(widths[k]) + ") for " +
                          std::string(to_string(f.settings.optimizer)) + " on a (" + std::to_string(v) + ", " +
                          std::to_string(d) + ") table");
    detail::check_size(path, name, count, widths[k], 4);
    arrays[k]->resize(std::size_t(count * widths[k]));
    detail::read_rows(m, path, name, first, count, arrays[k]->data());
  }
}

OptimStateFile read_state(std::string const& path, std::int64_t first, std::int64_t count, bool whole) {
  return detail::reading(path, [&] {
    auto file = detail::open_for_reading(path);
    detail::check_format(file, path, "kembed-optim-state", 1, "optimizer state");
    OptimStateFile f;
    f.settings = read_settings(file, path);
    f.state.optimizer = f.settings.optimizer;
    f.state.num_embeddings = detail::required_int64(file, path, "num_embeddings");
    f.state.embedding_dim = detail::required_int64(file, path, "embedding_dim");
    f.state.step = detail::required_int64(file, path, "step");
    if (f.state.num_embeddings < 1 || f.state.embedding_dim < 1 || f.state.step < 0)
      throw FileError(path, "",
                      "its attributes say a (" + std::to_string(f.state.num_embeddings) + ", " +
                          std::to_string(f.state.embedding_dim) + ") table at step " + std::to_string(f.state.step) +
                          ": want both at least 1 and a step >= 0");
    f.table_sha256 = detail::required_string(file, path, "table_sha256");
    f.state_sha256 = detail::required_string(file, path, "state_sha256");
    f.kembed_version = h5::read_string(file, "kembed_version").value_or("");
    f.created_by = h5::read_string(file, "created_by").value_or("");
    f.provenance = h5::read_string(file, "provenance").value_or("");
    if (whole) first = 0, count = f.state.num_embeddings;
    if (first < 0 || count < 0 || first > f.state.num_embeddings || count > f.state.num_embeddings - first)
      throw InvalidArgument("rows", "rows [" + std::to_string(first) + ", +" + std::to_string(count) +
                                        ") are not within the state's " + std::to_string(f.state.num_embeddings) +
                                        " rows (" + path + ")");
    f.first_row = first;
    auto const header = detail::required_string(file, path, "settings_sha256");
    if (settings_sha256(f) != header)
      throw FileError(path, "",
                      "its settings, step or digests do not match settings_sha256 (" + header +
                          "): the file is damaged or was edited");
    read_arrays(file, path, f, first, count);
    if (whole && state_sha256(f.state) != f.state_sha256)
      throw FileError(path, "",
                      "its arrays do not match their SHA-256 (attribute state_sha256 = " + f.state_sha256 +
                          "): the file is damaged or was edited");
    return f;
  });
}

}  // namespace

OptimStateFile load_optim_state(std::string const& path) {
  return read_state(path, 0, 0, true);
}

OptimStateFile load_optim_rows(std::string const& path, std::int64_t first, std::int64_t count) {
  return read_state(path, first, count, false);
}

}  // namespace kembed::io
