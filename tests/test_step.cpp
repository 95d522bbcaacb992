// `kembed step` as a library (job::run_step): a run file's gradient applied to its
// table, the state carried in a state file, every bit the contract's oracle's; and
// every mismatch between table, run and state refused with nothing written.
#include "support/test_support.hpp"

#include <kembed/core/optim_reference.hpp>
#include <kembed/core/synthetic.hpp>
#include <kembed/io/job_files.hpp>
#include <kembed/io/optim_file.hpp>
#include <kembed/io/run_file.hpp>
#include <kembed/io/sha256.hpp>
#include <kembed/io/table_file.hpp>
#include <kembed/job/backward.hpp>
#include <kembed/job/one_process.hpp>
#include <kembed/job/step.hpp>

#include <unistd.h>
#include <filesystem>
#include <functional>
#include <limits>
#include <vector>

namespace kembed {
namespace {

namespace fs = std::filesystem;
using test::same_bits;

class Step : public ::testing::Test {
 protected:
  static constexpr std::int64_t v = 300, d = 4, t = 500;
  void SetUp() override {
    auto const* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("kembed-step-" + std::to_string(::getpid()) + "-" + info->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(std::string const& name) const { return (dir_ / name).string(); }
  // The gradient of a Zipf batch on table `table` (a file), into run file `run`.
  void backward(std::string const& table, std::string const& run, bool sparse, std::uint64_t seed) const {
    auto const ids = synthetic::zipf_ids(v, t, 1.1, seed);
    auto const dy = synthetic::uniform_floats(t * d, seed + 1);
    auto const batch = path("b" + std::to_string(seed) + ".h5");
    io::BatchWriter out(batch, t, d, io::BatchMeta{v, "test", seed});
    out.write(0, t, ids.data(), dy.data());
    out.commit();
    job::BackwardSettings s;
    s.table = table, s.batch = batch, s.out = run, s.sparse = sparse;
    job::run_backward(TEST_EXECSPACE(), job::OneProcess(), s);
  }
  std::string make_table() const {
    auto const w = test::table_for(v, d);
    io::save_table(path("t0.h5"), w.data(), make_config(v, d, Options{}));
    return path("t0.h5");
  }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (auto const& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  fs::path dir_;
};

// The oracle's step with the run file's gradient, dense or as its listed rows.
void oracle_step(OptimSettings const& s, std::vector<float>& w, io::RunFile const& run, OptimState& st) {
  if (!run.sparse) return reference::optim_step(s, w.data(), run.rows, run.cols, run.gradient.data(), st);
  SparseGradient g;
  g.num_embeddings = run.rows, g.embedding_dim = run.cols, g.rows = run.listed_rows;
  for (auto r : run.listed_rows)
    g.values.insert(g.values.end(), run.gradient.begin() + r * run.cols, run.gradient.begin() + (r + 1) * run.cols);
  g.counts.assign(g.rows.size(), 1);
  reference::optim_step(s, w.data(), run.rows, run.cols, g, st);
}

// Three steps of every optimizer, dense and sparse, each from the last one's table and
// state files: every table and state bit the oracle's, and provenance recorded.
TEST_F(Step, ThreeStepsGiveTheOraclesBits) {
  for (auto o : {Optimizer::sgd, Optimizer::adagrad, Optimizer::rowwise_adagrad, Optimizer::adam})
    for (bool sparse : {false, true}) {
      std::string const what = std::string(to_string(o)) + (sparse ? " sparse" : " dense");
      SCOPED_TRACE(what);
      auto table = make_table();
      OptimSettings settings = optim_defaults(o);
      settings.lr = 0.05, settings.weight_decay = 0.01;
      if (o == Optimizer::sgd) settings.momentum = 0.9;
      auto weight = io::load_table(table).weight;
      auto state = initial_state(settings, v, d);
      std::string state_file;
      for (int k = 1; k <= 3; ++k) {
        auto const run = path("r" + std::to_string(k) + ".h5");
        backward(table, run, sparse, std::uint64_t(10 * k));
        job::StepSettings s;
        s.table = table, s.run = run, s.out = path("t" + std::to_string(k) + ".h5"), s.state = state_file;
        if (k == 1) {
          s.optimizer = o;
          s.adjust = [&](OptimSettings& x) {
            x.lr = settings.lr, x.weight_decay = settings.weight_decay, x.momentum = settings.momentum;
          };
        }
        auto const r = job::run_step(TEST_EXECSPACE(), s);
        oracle_step(settings, weight, io::read_run(run), state);
        auto const got = io::load_table(s.out);
        ASSERT_TRUE(same_bits(got.weight, weight)) << "step " << k;
        auto const f = io::load_optim_state(s.out + ".state");
        EXPECT_TRUE(same_bits(f.state.first, state.first)) << "step " << k;
        EXPECT_TRUE(same_bits(f.state.second, state.second)) << "step " << k;
        EXPECT_EQ(f.state.step, k);
        EXPECT_EQ(r.step, k);
        EXPECT_EQ(f.table_sha256, io::sha256_file(s.out));
        EXPECT_NE(got.provenance.find("\"step\": " + std::to_string(k)), std::string::npos) << got.provenance;
        EXPECT_NE(got.provenance.find(io::sha256_file(run)), std::string::npos);
        EXPECT_EQ(got.provenance, f.provenance);
        table = s.out, state_file = s.out + ".state";
      }
      fs::remove_all(dir_);
      fs::create_directories(dir_);
    }
}

// Every mismatch between the three inputs, and every output that would replace an
// input, is refused by name before anything is written.
TEST_F(Step, MismatchesAreRefusedAndNothingIsWritten) {
  auto const table = make_table();
  backward(table, path("r.h5"), false, 1);
  job::StepSettings first;
  first.table = table, first.run = path("r.h5"), first.out = path("t1.h5"), first.optimizer = Optimizer::adam;
  job::run_step(TEST_EXECSPACE(), first);  // t1.h5 and t1.h5.state: a state that goes with t1
  auto const w2 = test::table_for(v, d, 8);
  io::save_table(path("other.h5"), w2.data(), make_config(v, d, Options{}));
  auto const before = files();
  struct Case {
    std::string argument, message;
    std::function<void(job::StepSettings&)> edit;
  };
  std::vector<Case> const cases = {
      {"run", "was computed on a table with SHA-256", [&](job::StepSettings& s) { s.table = path("other.h5"); }},
      {"optimizer", "is needed for a first step", [](job::StepSettings& s) { s.optimizer.reset(); }},
      {"state", "goes with the table its step wrote",
       [&](job::StepSettings& s) { s.state = path("t1.h5.state"), s.optimizer.reset(); }},
      {"optimizer", "is adam's state",
       [&](job::StepSettings& s) { s.state = path("t1.h5.state"), s.optimizer = Optimizer::sgd; }},
      {"out", "is the same file as table", [&](job::StepSettings& s) { s.out = s.table; }},
      {"state_out", "is the same file as run", [&](job::StepSettings& s) { s.state_out = s.run; }},
      {"state_out", "the state needs a path of its own", [&](job::StepSettings& s) { s.state_out = s.out; }},
      {"lr", "lr", [](job::StepSettings& s) { s.adjust = [](OptimSettings& x) { x.lr = -1.0; }; }},
  };
  for (auto const& c : cases) {
    SCOPED_TRACE(c.message);
    auto s = first;
    s.out = path("new.h5");
    c.edit(s);
    try {
      job::run_step(TEST_EXECSPACE(), s);
      ADD_FAILURE() << "stepped";
    } catch (InvalidArgument const& e) {
      EXPECT_EQ(e.argument(), c.argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
    EXPECT_EQ(files(), before) << "nothing written, nothing replaced";
  }
}

// A run whose gradient overflowed cannot update a table: refused by name, naming the
// first value that is not finite, with nothing written.
TEST_F(Step, ANonFiniteGradientIsRefused) {
  auto const table = make_table();
  io::RunFile run;
  run.rows = v, run.cols = d, run.positions = 1, run.microbatches = 1, run.microbatch_size = 1;
  run.plan_used = "sort";
  run.gradient.assign(std::size_t(v * d), 0.5f);
  run.gradient[std::size_t(7 * d + 2)] = std::numeric_limits<float>::infinity();
  run.counts.assign(std::size_t(v), 0);
  run.counts[7] = 1;
  io::InputIdentity id;
  id.role = "table", id.path = table, id.sha256 = io::sha256_file(table, &id.bytes);
  run.inputs.push_back(id);
  io::write_run(path("r.h5"), run);
  auto const before = files();
  job::StepSettings s;
  s.table = table, s.run = path("r.h5"), s.out = path("t1.h5"), s.optimizer = Optimizer::sgd;
  try {
    job::run_step(TEST_EXECSPACE(), s);
    ADD_FAILURE() << "stepped";
  } catch (InvalidArgument const& e) {
    EXPECT_EQ(e.argument(), "run");
    EXPECT_NE(std::string(e.what()).find("inf at row 7, column 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(files(), before);
}

}  // namespace
}  // namespace kembed
