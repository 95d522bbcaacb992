// Optimizer state files: every optimizer's state round trips bit for bit with its
// settings and step, by rows too; bad states are refused before any file appears, and
// edited or damaged files are refused by name.
#include "io_fixture.hpp"

#include <kembed/io/optim_file.hpp>

namespace kembed {
namespace {

// A state of every optimizer's shape with awkward values (signed zeros, subnormals,
// the largest float) and a step of its own.
io::OptimStateFile sample_state(Optimizer o, std::int64_t v, std::int64_t d) {
  io::OptimStateFile f;
  f.settings = optim_defaults(o);
  f.settings.lr = 0.1 + 0.2;  // not a short decimal: every bit must come back
  if (o == Optimizer::sgd) f.settings.momentum = 0.9, f.settings.nesterov = true;
  if (o == Optimizer::adagrad) f.settings.lr_decay = 1e-3, f.settings.initial_accumulator_value = 0.5;
  if (o == Optimizer::adam) f.settings.decoupled_weight_decay = true, f.settings.weight_decay = 1e-2;
  f.state = initial_state(f.settings, v, d);
  auto const values = special_table(v, d);
  for (std::size_t i = 0; i < f.state.first.size(); ++i) f.state.first[i] = std::abs(values[i]);
  for (std::size_t i = 0; i < f.state.second.size(); ++i) f.state.second[i] = values[values.size() - 1 - i];
  f.state.step = 41;
  f.table_sha256 = std::string(64, 'c');
  return f;
}

TEST_F(Io, OptimStateRoundTripsEveryOptimizerBitForBit) {
  std::int64_t const v = 37, d = 5;
  int k = 0;
  for (auto o : {Optimizer::sgd, Optimizer::adagrad, Optimizer::rowwise_adagrad, Optimizer::adam})
    for (bool deflate : {false, true}) {
      SCOPED_TRACE(std::string(to_string(o)) + (deflate ? ", deflate" : ""));
      auto const f = sample_state(o, v, d);
      io::SaveOptions so;
      so.deflate = deflate;
      so.rows_per_chunk = deflate ? 8 : 0;
      auto const p = path("s" + std::to_string(k++) + ".h5");
      io::save_optim_state(p, f, so);
      auto const g = io::load_optim_state(p);
      EXPECT_EQ(g.settings.optimizer, o);
      for (auto member : {&OptimSettings::lr, &OptimSettings::weight_decay, &OptimSettings::eps,
                          &OptimSettings::lr_decay, &OptimSettings::momentum, &OptimSettings::beta2})
        EXPECT_EQ(std::memcmp(&(g.settings.*member), &(f.settings.*member), sizeof(double)), 0);
      EXPECT_EQ(g.settings.nesterov, f.settings.nesterov);
      EXPECT_EQ(g.settings.decoupled_weight_decay, f.settings.decoupled_weight_decay);
      EXPECT_EQ(g.state.step, 41);
      EXPECT_TRUE(same_bits(g.state.first, f.state.first));
      EXPECT_TRUE(same_bits(g.state.second, f.state.second));
      EXPECT_EQ(g.table_sha256, f.table_sha256);
      EXPECT_EQ(g.state_sha256, io::state_sha256(f.state));
      std::vector<float> records;  // FORMAT.md's recipe: row r of the first array, then of the second
      auto const wr = state_widths(f.settings, d);
      for (std::int64_t r = 0; r < v; ++r) {
        records.insert(records.end(), f.state.first.begin() + r * wr.first, f.state.first.begin() + (r + 1) * wr.first);
        records.insert(records.end(), f.state.second.begin() + r * wr.second,
                       f.state.second.begin() + (r + 1) * wr.second);
      }
      EXPECT_EQ(g.state_sha256, io::sha256_hex(records.data(), records.size() * sizeof(float)));
      auto const rows = io::load_optim_rows(p, 10, 7);  // rows 10..16
      auto const w = state_widths(f.settings, d);
      EXPECT_TRUE(same_bits(rows.state.first, std::vector<float>(f.state.first.begin() + 10 * w.first,
                                                                 f.state.first.begin() + 17 * w.first)));
      EXPECT_TRUE(same_bits(rows.state.second, std::vector<float>(f.state.second.begin() + 10 * w.second,
                                                                  f.state.second.begin() + 17 * w.second)));
    }
  // SGD without momentum keeps nothing: a file of settings and a step alone.
  io::OptimStateFile plain;
  plain.state = initial_state(plain.settings, v, d);
  plain.state.step = 3;
  io::save_optim_state(path("plain.h5"), plain);
  auto const g = io::load_optim_state(path("plain.h5"));
  EXPECT_TRUE(g.state.first.empty() && g.state.second.empty());
  EXPECT_EQ(g.state.step, 3);
  EXPECT_EQ(files().size(), std::size_t(k + 1)) << "no temporary files left behind";
}

// torch's names, so h5py finds exp_avg where torch's state_dict has it.
TEST_F(Io, OptimStateDatasetsCarryTorchsNames) {
  auto const f = sample_state(Optimizer::adam, 6, 4);
  io::save_optim_state(path("adam.h5"), f);
  hid_t file = H5Fopen(path("adam.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GT(H5Lexists(file, "exp_avg", H5P_DEFAULT), 0);
  EXPECT_GT(H5Lexists(file, "exp_avg_sq", H5P_DEFAULT), 0);
  H5Fclose(file);
  auto const r = sample_state(Optimizer::rowwise_adagrad, 6, 4);
  io::save_optim_state(path("rowwise.h5"), r);
  EXPECT_EQ(io::load_optim_state(path("rowwise.h5")).state.first.size(), 6u);  // one per row
}

// A state that is not what its settings keep is refused by name, and nothing appears.
TEST_F(Io, OptimStateSavesRefuseBadStatesAndWriteNothing) {
  auto const good = sample_state(Optimizer::adam, 9, 3);
  std::vector<std::pair<std::string, std::function<void(io::OptimStateFile&)>>> const cases = {
      {"state holds", [](io::OptimStateFile& f) { f.state.second.pop_back(); }},
      {"must be finite", [](io::OptimStateFile& f) { f.state.first[4] = std::numeric_limits<float>::quiet_NaN(); }},
      {"state is", [](io::OptimStateFile& f) { f.state.optimizer = Optimizer::sgd; }},
      {"lr", [](io::OptimStateFile& f) { f.settings.lr = -1.0; }},
      {"step", [](io::OptimStateFile& f) { f.state.step = -1; }},
  };
  for (auto const& [message, edit] : cases) {
    SCOPED_TRACE(message);
    auto f = good;
    edit(f);
    try {
      io::save_optim_state(path("bad.h5"), f);
      ADD_FAILURE() << "saved";
    } catch (InvalidArgument const& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
    EXPECT_TRUE(files().empty());
  }
}

// An edited array (valid HDF5, checksums agree) fails its SHA-256, an edited setting
// or step the settings' digest; a file edited to another optimizer, settings kembed
// would refuse, or without an array are FileErrors naming the problem.
TEST_F(Io, OptimStateFilesEditedOrDamagedAreRefused) {
  auto const f = sample_state(Optimizer::adam, 9, 3);
  auto const p = path("s.h5");
  auto fresh = [&] { io::save_optim_state(p, f); };
  fresh();
  auto values = f.state.second;
  values[5] = 1.0f;
  overwrite(p, "exp_avg_sq", H5T_NATIVE_FLOAT, values);
  EXPECT_NE(refusal([&] { io::load_optim_state(p); }).find("do not match their SHA-256"), std::string::npos);
  struct Case {
    std::string message;
    std::function<void(hid_t)> edit;
  };
  std::vector<Case> const cases = {
      {"'optimizer'", [](hid_t h) { set_string_attr(h, "optimizer", "lamb"); }},
      {"'/exp_avg_sq': does not exist", [](hid_t h) { H5Ldelete(h, "exp_avg_sq", H5P_DEFAULT); }},
      {"has no attribute 'beta2'", [](hid_t h) { H5Adelete(h, "beta2"); }},
      {"settings are invalid", [](hid_t h) { set_int_attr(h, "lr", -1); }},
      {"want 0 or 1", [](hid_t h) { set_int_attr(h, "decoupled_weight_decay", 2); }},
      {"do not match settings_sha256", [](hid_t h) { set_int_attr(h, "num_embeddings", 8); }},
      {"do not match settings_sha256", [](hid_t h) { set_int_attr(h, "lr", 1); }},
      {"do not match settings_sha256", [](hid_t h) { set_int_attr(h, "step", 40); }},
      {"at step -1", [](hid_t h) { set_int_attr(h, "step", -1); }},
  };
  for (auto const& c : cases) {
    SCOPED_TRACE(c.message);
    fresh();
    hid_t h = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    c.edit(h);
    H5Fclose(h);
    auto const why = refusal([&] { io::load_optim_state(p); });
    EXPECT_NE(why.find(c.message), std::string::npos) << why;
  }
  // A table file is not a state file.
  auto const w = special_table(4, 2);
  io::save_table(path("t.h5"), w.data(), config(4, 2));
  EXPECT_NE(refusal([&] { io::load_optim_state(path("t.h5")); }).find("optimizer state"), std::string::npos);
}

}  // namespace
}  // namespace kembed
