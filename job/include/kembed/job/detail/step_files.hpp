#pragma once
// kembed step's backend-free parts (job/src/step.cpp): its inputs read and checked
// against each other, its outputs written. No Kokkos here: kembed_job's own sources
// are plain C++ on every backend.
#include <kembed/io/optim_file.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/table_file.hpp>
#include <kembed/job/settings.hpp>

#include <string>
#include <vector>

namespace kembed::job::detail {

// The step's inputs, read and checked against each other.
struct StepInputs {
  io::TableFile table;                           // the whole table
  io::InputIdentity table_id, run_id, state_id;  // state_id.path "" on a first step
  io::RunFile run;                               // its dense gradient (a sparse run's unlisted rows +0.0)
  OptimSettings settings;                        // the state's, or torch's defaults, with StepSettings::adjust applied
  OptimState state;                              // the state's, or initial_state() on a first step
};

// Refuses, before writing anything: outputs over inputs or over each other, a run
// whose gradient is not (V, d), not finite, or was computed on another table, a state
// of another shape, optimizer or table, settings torch would refuse. Names settings
// as `o` does.
StepInputs read_step_inputs(StepSettings const& s, Observer const& o);

// Writes the table, then the state (which records the new table's SHA-256), each
// crash-safely with the step's provenance; fills the report's paths and digests.
void write_step_outputs(StepSettings const& s, StepInputs const& in, std::vector<float> const& weight,
                        OptimState const& state, StepReport& report);

// Where the state goes: StepSettings::state_out, or <out>.state.
std::string state_out_path(StepSettings const& s);

}  // namespace kembed::job::detail
