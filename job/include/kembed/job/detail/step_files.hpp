#pragma once
// kembed step's backend-free parts (job/src/step.cpp): its inputs read and checked
// against each other, its outputs written, by this process's rows of the table (all
// of them, or an MPI rank's). No Kokkos here: kembed_job's own sources are plain C++
// on every backend.
#include <kembed/io/optim_file.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/table_file.hpp>
#include <kembed/job/settings.hpp>

#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace kembed::io {
struct Collective;
}

namespace kembed::job::detail {

// What the file parts need of the team (job/team.hpp), as the template run_step gives it.
struct StepTeam {
  int rank = 0;
  std::int64_t first = 0, count = 0;  // this process's rows
  io::Collective const* collective = nullptr;
  std::function<std::string(std::string const&)> broadcast;     // the first rank's text
  std::function<std::string(void const*, std::size_t)> sha256;  // of every rank's bytes, in rank order
  std::function<void(std::exception_ptr)> agree;                // every rank throws the first error
};

// The step's inputs, this process's rows, read and checked against each other.
struct StepInputs {
  io::TableFile table;                           // rows [first, first + count); config: the whole table's
  io::InputIdentity table_id, run_id, state_id;  // state_id.path "" on a first step
  io::RunFile run;                               // the run's header (inputs, digest, sparse)
  std::vector<float> grad;                       // this process's rows of the dense gradient (count x d)
  std::vector<std::int64_t> listed;              // a sparse run's listed rows among them (global numbers)
  OptimSettings settings;                        // the state's, or torch's defaults, with StepSettings::adjust
  OptimState state;                              // this process's rows (num_embeddings = count)
};

// Refuses, before writing anything: outputs over inputs or over each other, a run
// whose gradient is not (V, d), not finite, not its digest, or was computed on another
// table, a state of another shape, optimizer or table, settings torch would refuse.
// Names settings as `o` does. Collective over the team.
StepInputs read_step_inputs(StepSettings const& s, StepTeam const& team, Observer const& o);

// Writes the table, then the state (which records the new table's SHA-256), each
// crash-safely with the step's provenance, every rank its rows; fills the report's
// paths and digests.
void write_step_outputs(StepSettings const& s, StepInputs const& in, std::vector<float> const& weight,
                        OptimState const& state, StepTeam const& team, StepReport& report);

// Where the state goes: StepSettings::state_out, or <out>.state.
std::string state_out_path(StepSettings const& s);

}  // namespace kembed::job::detail
