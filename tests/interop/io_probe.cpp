// kembed_io_probe: a test helper that lets other tools (h5py, h5dump) check
// kembed's files from the outside. Not installed.
//   io_probe save-table OUT V D SEED [deflate]     a synthetic table, padding_idx = 1
//   io_probe load-foreign IN DATASET OUT [convert] read a plain dataset, save it as a kembed table
//   io_probe load-table IN                          print V D padding plan mode sha256-of-weight
//   io_probe write-run OUT V D SEED                 a synthetic run file
//   io_probe save-state OUT V D                     an Adam state after 3 steps (synthetic moments)
#include <kembed/core/error.hpp>
#include <kembed/core/synthetic.hpp>
#include <kembed/io/batch_process.hpp>
#include <kembed/io/optim_file.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/table_file.hpp>

#include <cstdio>
#include <limits>
#include <string>

using namespace kembed;

int main(int argc, char** argv) {
  kembed::io::set_up_batch_process();  // as the kembed program: no HDF5 clean-up at exit
  try {
    std::string const cmd = argc > 1 ? argv[1] : "";
    if (cmd == "save-table" && argc >= 6) {
      auto const v = std::stoll(argv[3]), d = std::stoll(argv[4]);
      auto w = synthetic::uniform_floats(v * d, std::stoull(argv[5]));
      if (v * d > 3) w[0] = -0.0f, w[1] = 1e-45f, w[2] = std::numeric_limits<float>::max();
      Options o;
      o.padding_idx = 1;
      o.plan = Plan::sort;
      o.mode = Mode::deterministic;
      io::SaveOptions so;
      so.deflate = argc > 6 && std::string(argv[6]) == "deflate";
      so.created_by = "kembed_io_probe save-table";
      io::save_table(argv[2], w.data(), make_config(v, d, o), so);
      return 0;
    }
    if (cmd == "load-foreign" && argc >= 5) {
      bool const convert = argc > 5 && std::string(argv[5]) == "convert";
      auto t = io::read_table_dataset(argv[2], argv[3], convert);
      io::SaveOptions so;
      so.created_by = "kembed_io_probe load-foreign";
      io::save_table(argv[4], t.weight.data(), t.config, so);
      return 0;
    }
    if (cmd == "load-table" && argc >= 3) {
      auto t = io::load_table(argv[2]);
      std::printf("%lld %lld %lld %s %s %s\n", static_cast<long long>(t.config.num_embeddings),
                  static_cast<long long>(t.config.embedding_dim), static_cast<long long>(t.config.padding_idx),
                  std::string(to_string(t.config.plan)).c_str(), std::string(to_string(t.config.mode)).c_str(),
                  io::sha256_hex(t.weight.data(), t.weight.size() * 4).c_str());
      return 0;
    }
    if (cmd == "write-run" && argc >= 6) {
      io::RunFile run;
      run.rows = std::stoll(argv[3]);
      run.cols = std::stoll(argv[4]);
      run.gradient = synthetic::uniform_floats(run.rows * run.cols, std::stoull(argv[5]));
      run.gradient[0] = std::numeric_limits<float>::infinity();  // a sum may overflow
      run.counts.assign(static_cast<std::size_t>(run.rows), 3);
      run.run_id = "probe-run";
      run.backend = "Serial";
      run.threads = 1;
      run.plan = kembed::Plan::automatic;
      run.plan_used = "scan";
      run.numeric_mode = kembed::Mode::identical;
      run.positions = 3 * run.rows;
      run.microbatches = 2;
      run.microbatch_size = run.positions / 2;
      run.inputs = {{"table", "table.h5", std::string(64, 'a'), 123}, {"batch", "batch.h5", std::string(64, 'b'), 456}};
      run.timings = {{"read_batch_seconds", 0.25}, {"backward_seconds", 1.5}};
      run.command_line_json = io::json_array({"kembed", "backward", "--plan", "auto", "with \"quotes\""});
      run.configuration_json = "{\"microbatch\": 100}";
      io::write_run(argv[2], run);
      return 0;
    }
    if (cmd == "save-state" && argc >= 5) {
      auto const v = std::stoll(argv[3]), d = std::stoll(argv[4]);
      io::OptimStateFile f;
      f.settings = optim_defaults(Optimizer::adam);
      f.settings.lr = 0.01, f.settings.weight_decay = 0.1, f.settings.decoupled_weight_decay = true;
      f.state = initial_state(f.settings, v, d);
      f.state.step = 3;
      f.state.first = synthetic::uniform_floats(v * d, 1);
      f.state.second = synthetic::uniform_floats(v * d, 2);
      for (auto& x : f.state.second) x = x * x;  // a second moment is never negative
      f.table_sha256 = std::string(64, 'c');
      f.state_sha256 = io::state_sha256(f.state);
      f.created_by = "kembed_io_probe save-state";
      io::save_optim_state(argv[2], f);
      return 0;
    }
    std::fprintf(stderr, "usage: see the comment at the top of tests/interop/io_probe.cpp\n");
    return 2;
  } catch (Error const& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 3;
  }
}
