#pragma once
// Optimizer state files: what an optimizer keeps between steps (kembed/core/optim.hpp)
// with its settings and step count, in HDF5 (docs/FORMAT.md, format tag
// "kembed-optim-state-1"). The arrays carry torch's state names, so h5py readers
// find `exp_avg` where torch's state_dict has it.
#include <kembed/core/optim.hpp>
#include <kembed/io/table_file.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kembed::io {

struct Collective;  // an MPI communicator, in <kembed/io/collective.hpp>

inline constexpr char const* optim_state_format = "kembed-optim-state-1";

// The state arrays' dataset names for `optimizer`, in OptimState's order (first,
// second): SGD's momentum_buffer; Adagrad's and row-wise Adagrad's sum; Adam's
// exp_avg and exp_avg_sq. Empty where the optimizer keeps no such array.
std::vector<char const*> state_dataset_names(Optimizer optimizer);

// What a state file holds. After load_optim_rows, `state`'s arrays hold rows
// [first_row, first_row + rows) (num_embeddings stays the whole table's).
struct OptimStateFile {
  OptimSettings settings;
  OptimState state;
  std::int64_t first_row = 0;
  std::string table_sha256;  // the table these moments go with: the step's output table
  std::string state_sha256;  // of the arrays, row by row (state_records)
  std::string kembed_version, created_by;
  std::string provenance;  // "" where the file has none (see SaveOptions)
};

// The settings `settings.optimizer` reads as a JSON object, by torch's argument names
// (betas as beta1 and beta2; each number the shortest text that reads back as its
// double): what a state file's attributes hold, for provenance.
std::string settings_json(OptimSettings const& settings);
// The names of the settings `optimizer` reads, as settings_json writes them.
std::vector<std::string> setting_names(Optimizer optimizer);
// Sets the setting `name` (as setting_names) of `settings` (a flag: value != 0);
// InvalidArgument naming `name` where settings.optimizer does not read it.
void set_setting(OptimSettings& settings, std::string const& name, double value);

// What state_sha256 hashes: row by row, each row's `first` values then its `second`
// values (float32, little-endian), for a state whose arrays hold `rows` rows (MPI
// ranks hash their rows' records in rank order, and get the one process's digest).
std::vector<float> state_records(OptimState const& state, std::int64_t rows);
// SHA-256 of a whole state's records.
std::string state_sha256(OptimState const& state);

// Saves crash-safely (as save_table), after check_settings and check_state: a refused
// state leaves `path` as it was. `file.state_sha256` is computed here.
void save_optim_state(std::string const& path, OptimStateFile const& file, SaveOptions const& options = {});
// The same by row slabs: `file.state` holds rows [first_row, first_row + row_count)
// (its num_embeddings the whole table's) and `file.state_sha256` must be that of every
// rank's rows in rank order. With `collective`, every rank calls it with its own rows,
// the slabs covering the table in rank order; the file is byte for byte the one
// process's.
void save_optim_state(std::string const& path, OptimStateFile const& file, std::int64_t row_count,
                      SaveOptions const& options, Collective const* collective);

// Reads everything and checks it: settings valid, arrays of the optimizer's shapes,
// finite, and matching state_sha256 (an edited or damaged file is a FileError).
OptimStateFile load_optim_state(std::string const& path);
// Rows [first, first + count) of a state file's arrays, checked as above except the
// digest, which covers every row (a sharded reader checks it across ranks).
OptimStateFile load_optim_rows(std::string const& path, std::int64_t first, std::int64_t count);

}  // namespace kembed::io
