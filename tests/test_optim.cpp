// TableOptimizer on this binary's backend (at each thread count the suite runs at):
// every optimizer, dense and row-sparse, step after step, against the contract's
// oracle (core's reference::optim_step) by memcmp of the table and the state; the
// fused backward and step (Embedding::backward_step) against the oracle's sparse
// backward then step, in the host and the device shape; the refusals with nothing
// changed; the kernels' labels.
#include "support/test_support.hpp"

#include <kembed/core/optim_reference.hpp>
#include <kembed/core/reference.hpp>
#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>
#include <kembed/optim.hpp>

#include <random>
#include <set>

namespace kembed {
namespace {

using Space = TEST_EXECSPACE;
using Opt = TableOptimizer<Space>;
using Matrix = Opt::matrix_type;

// (memcmp is not given an empty vector's null data: UBSan says so.)
bool same_bits(std::vector<float> const& a, std::vector<float> const& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::vector<float> out(n);
  for (auto& x : out) x = float(std::int64_t(rng() % 200001) - 100000) * 1e-5f * scale;
  return out;
}

Matrix upload(std::vector<float> const& host, std::int64_t rows, std::int64_t d) {
  Matrix m("w", rows, d);
  Kokkos::deep_copy(m, Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                           host.data(), rows, d));
  return m;
}
std::vector<float> download(Matrix const& m) {
  std::vector<float> out(m.size());
  Kokkos::deep_copy(Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                        out.data(), m.extent(0), m.extent(1)),
                    m);
  return out;
}

std::vector<OptimSettings> every_optimizer() {
  std::vector<OptimSettings> all;
  auto sgd = optim_defaults(Optimizer::sgd);
  sgd.lr = 0.1;
  all.push_back(sgd);
  sgd.momentum = 0.9, sgd.dampening = 0.1, sgd.weight_decay = 0.01;
  all.push_back(sgd);
  sgd.dampening = 0.0, sgd.nesterov = true, sgd.maximize = true;
  all.push_back(sgd);
  auto adagrad = optim_defaults(Optimizer::adagrad);
  adagrad.lr_decay = 0.01, adagrad.initial_accumulator_value = 0.1, adagrad.weight_decay = 0.01;
  all.push_back(adagrad);
  auto rowwise = optim_defaults(Optimizer::rowwise_adagrad);
  rowwise.initial_accumulator_value = 0.1, rowwise.weight_decay = 0.001;
  all.push_back(rowwise);
  auto adam = optim_defaults(Optimizer::adam);
  adam.weight_decay = 0.01;
  all.push_back(adam);
  adam.decoupled_weight_decay = true, adam.beta1 = 0.3;  // AdamW, and the lerp's second form
  all.push_back(adam);
  return all;
}

// Five steps of each optimizer with dense gradients, and five with row-sparse ones
// listing some rows (a different set each step): the oracle's table and state.
TEST(TableOptimizer, EveryOptimizerIsTheOracleDenseAndSparse) {
  std::int64_t const v = 37, d = 19;
  for (auto const& s : every_optimizer())
    for (bool sparse : {false, true}) {
      SCOPED_TRACE(std::string(to_string(s.optimizer)) + (sparse ? " sparse" : " dense"));
      auto want = random_floats(v * d, 1, 1.0f);
      auto want_state = initial_state(s, v, d);
      Opt opt(s, v, d);
      auto const weight = upload(want, v, d);
      for (std::uint64_t step = 0; step < 5; ++step) {
        auto const g = random_floats(v * d, 100 + step, 0.1f);
        if (!sparse) {
          reference::optim_step(s, want.data(), v, d, g.data(), want_state);
          opt.step(Space(), weight, upload(g, v, d));
          continue;
        }
        SparseGradient host;
        host.num_embeddings = v, host.embedding_dim = d;
        for (std::int64_t r = std::int64_t(step % 3); r < v; r += 2 + std::int64_t(step % 2)) {
          host.rows.push_back(r), host.counts.push_back(1);
          host.values.insert(host.values.end(), g.begin() + r * d, g.begin() + (r + 1) * d);
        }
        reference::optim_step(s, want.data(), v, d, host, want_state);
        Opt::sparse_type dev;
        dev.rows = Kokkos::View<std::int64_t*, Opt::memory_space>("rows", host.size());
        Kokkos::deep_copy(dev.rows, Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                        host.rows.data(), host.size()));
        dev.values = upload(host.values, host.size(), d);
        opt.step(Space(), weight, dev);
      }
      EXPECT_TRUE(same_bits(download(weight), want));
      auto const got = opt.state();
      EXPECT_TRUE(same_bits(got.first, want_state.first));
      EXPECT_TRUE(same_bits(got.second, want_state.second));
      EXPECT_EQ(got.step, 5);
      EXPECT_EQ(opt.steps(), 5);
    }
}

// A refused step names what it refuses and changes neither the table nor the state.
TEST(TableOptimizer, RefusesBadGradientsWithNothingChanged) {
  std::int64_t const v = 6, d = 3;
  auto const s = optim_defaults(Optimizer::adam);
  Opt opt(s, v, d);
  auto const w0 = random_floats(v * d, 2, 1.0f);
  auto const weight = upload(w0, v, d);
  opt.step(Space(), weight, upload(random_floats(v * d, 3, 0.1f), v, d));
  auto const w1 = download(weight);
  auto const st1 = opt.state();
  auto expect_refused = [&](char const* name, auto&& call) {
    try {
      call();
      ADD_FAILURE() << name << " was not refused";
    } catch (InvalidArgument const& e) {
      EXPECT_EQ(e.argument(), name) << e.what();
    }
    EXPECT_TRUE(same_bits(download(weight), w1)) << name;
    auto const st = opt.state();
    EXPECT_TRUE(same_bits(st.first, st1.first) && same_bits(st.second, st1.second) && st.step == 1) << name;
  };
  auto bad = random_floats(v * d, 4, 0.1f);
  bad[7] = std::nanf("");
  expect_refused("grad", [&] { opt.step(Space(), weight, upload(bad, v, d)); });
  expect_refused("grad", [&] { opt.step(Space(), weight, upload(random_floats(v * 4, 4, 0.1f), v, 4)); });
  expect_refused("weight",
                 [&] { opt.step(Space(), upload(w0, v - 1, d), upload(random_floats(v * d, 4, 0.1f), v, d)); });
  Opt::sparse_type unsorted;
  unsorted.rows = Kokkos::View<std::int64_t*, Opt::memory_space>("rows", 2);
  auto rows_h = Kokkos::create_mirror_view(unsorted.rows);
  rows_h(0) = 4, rows_h(1) = 2;
  Kokkos::deep_copy(unsorted.rows, rows_h);
  unsorted.values = upload(random_floats(2 * d, 5, 0.1f), 2, d);
  expect_refused("grad", [&] { opt.step(Space(), weight, unsorted); });
  auto st = opt.state();
  st.first.pop_back();
  expect_refused("state", [&] { opt.set_state(st); });
  auto settings = s;
  settings.eps = -1.0;
  EXPECT_THROW(Opt(settings, v, d), InvalidArgument);
}

// New settings between steps (a schedule's lr) keep the state: the oracle with the
// new settings from the state the old ones left. Another optimizer, or SGD's momentum
// switched on (another state shape), is refused with nothing changed.
TEST(TableOptimizer, NewSettingsKeepTheState) {
  std::int64_t const v = 11, d = 5;
  for (auto s : every_optimizer()) {
    SCOPED_TRACE(std::string(to_string(s.optimizer)));
    auto want = random_floats(v * d, 1, 1.0f);
    auto want_state = initial_state(s, v, d);
    Opt opt(s, v, d);
    auto const weight = upload(want, v, d);
    for (std::uint64_t step = 0; step < 4; ++step) {
      if (step == 2) {
        s.lr *= 0.5;
        opt.set_settings(s);
      }
      auto const g = random_floats(v * d, 40 + step, 0.1f);
      reference::optim_step(s, want.data(), v, d, g.data(), want_state);
      opt.step(Space(), weight, upload(g, v, d));
    }
    EXPECT_TRUE(same_bits(download(weight), want));
    EXPECT_TRUE(same_bits(opt.state().first, want_state.first) && same_bits(opt.state().second, want_state.second));
    auto other = optim_defaults(s.optimizer == Optimizer::adam ? Optimizer::sgd : Optimizer::adam);
    EXPECT_THROW(opt.set_settings(other), InvalidArgument);
    EXPECT_EQ(opt.settings().lr, s.lr);
  }
  auto plain = optim_defaults(Optimizer::sgd), with_momentum = plain;
  with_momentum.momentum = 0.9;
  Opt sgd(plain, v, d);
  try {
    sgd.set_settings(with_momentum);
    ADD_FAILURE() << "momentum switched on was not refused";
  } catch (InvalidArgument const& e) {
    EXPECT_EQ(e.argument(), "settings") << e.what();
  }
  EXPECT_EQ(sgd.settings().momentum, 0.0);
}

// Each optimizer, mode and option (padding row, scale_grad_by_freq), d on both sides
// of a host tile, four steps of Zipf ids: backward_step's table and state are the
// oracle's sparse backward then step, bit for bit.
TEST(BackwardStep, IsTheSparseBackwardThenTheStep) {
  std::int64_t const v = 90, t = 400;
  for (std::int64_t d : {19, 300})
    for (Mode mode : {Mode::identical, Mode::deterministic})
      for (int variant = 0; variant < 3; ++variant)
        for (auto const& s : every_optimizer()) {
          Options o;
          o.mode = mode;
          if (variant == 1) o.padding_idx = 2;
          if (variant == 2) o.scale_grad_by_freq = FreqScale::call;
          SCOPED_TRACE(std::string(to_string(s.optimizer)) + " d=" + std::to_string(d) + " " +
                       std::string(to_string(mode)) + " variant " + std::to_string(variant));
          Config const config = make_config(v, d, o);
          auto want = random_floats(v * d, 11, 1.0f);
          auto want_state = initial_state(s, v, d);
          Embedding<Space> layer(v, d, FloatsRef(want.data(), Shape{v, d}), o);
          Opt opt(s, v, d);
          for (std::uint64_t step = 0; step < 4; ++step) {
            auto const ids = synthetic::zipf_ids(v, t, 1.1, 20 + step);
            auto const dy = random_floats(t * d, 30 + step, 0.5f);
            auto const g = reference::backward_sparse(config, IdsRef(ids), dy.data(), nullptr);
            reference::optim_step(s, want.data(), v, d, g, want_state);
            layer.backward_step(IdsRef(ids), FloatsRef(dy.data(), Shape{t, d}), opt);
          }
          EXPECT_TRUE(same_bits(layer.weight_host(), want));
          auto const got = opt.state();
          EXPECT_TRUE(same_bits(got.first, want_state.first) && same_bits(got.second, want_state.second));
          EXPECT_EQ(got.step, 4);
          if (::testing::Test::HasFailure()) return;
        }
}

// The device shape (each column folded alone, as a GPU lane does) run on the host:
// the host tiles' bits.
TEST(BackwardStep, TheDeviceShapeGivesTheHostsBits) {
  std::int64_t const v = 50, t = 300, d = 40;
  auto const ids = synthetic::zipf_ids(v, t, 1.1, 3);
  auto const dy = random_floats(t * d, 4, 0.5f);
  auto const ids_d = Kokkos::create_mirror_view_and_copy(
      Opt::memory_space(),
      Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(ids.data(), t));
  auto const dy_d = upload(dy, t, d);
  for (Mode mode : {Mode::identical, Mode::deterministic})
    for (auto const& s : every_optimizer()) {
      std::vector<float> tables[2];
      for (bool columns : {false, true}) {
        auto const weight = upload(random_floats(v * d, 5, 1.0f), v, d);
        Opt opt(s, v, d);
        bool const ran = opt.step_by(weight, [&](auto const& rule, auto const& first, auto const& second) {
          return detail::fused_step(Space(), ids_d, Opt::const_matrix_type(dy_d),
                                    Kokkos::View<std::int64_t const*, Opt::memory_space>(), v, 2, mode, FreqScale::call,
                                    detail::host_isa(), columns, rule, weight, first, second);
        });
        EXPECT_TRUE(ran);
        tables[columns] = download(weight);
      }
      EXPECT_TRUE(same_bits(tables[0], tables[1])) << to_string(s.optimizer) << " " << to_string(mode);
    }
}

// A fold that would overflow, a NaN in dy and an id out of range are refused by name
// (the first two by the unfused path, which the bound hands them to); nothing changes.
TEST(BackwardStep, RefusesWithNothingChanged) {
  std::int64_t const v = 8, d = 3, t = 4;
  auto const w0 = random_floats(v * d, 2, 1.0f);
  Embedding<Space> layer(v, d, FloatsRef(w0.data(), Shape{v, d}));
  Opt opt(optim_defaults(Optimizer::adam), v, d);
  std::vector<std::int64_t> ids{1, 5, 1, 6};
  auto dy = random_floats(t * d, 3, 0.1f);
  layer.backward_step(IdsRef(ids), FloatsRef(dy.data(), Shape{t, d}), opt);
  auto const w1 = layer.weight_host();
  auto const st1 = opt.state();
  auto expect_refused = [&](char const* name, std::vector<std::int64_t> const& bad_ids, std::vector<float> const& bad) {
    try {
      layer.backward_step(IdsRef(bad_ids), FloatsRef(bad.data(), Shape{t, d}), opt);
      ADD_FAILURE() << name << " was not refused";
    } catch (InvalidArgument const& e) {
      EXPECT_EQ(e.argument(), name) << e.what();
    }
    EXPECT_TRUE(same_bits(layer.weight_host(), w1)) << name;
    auto const st = opt.state();
    EXPECT_TRUE(same_bits(st.first, st1.first) && same_bits(st.second, st1.second) && st.step == 1) << name;
  };
  auto huge = dy;
  huge[0] = huge[6] = 3e38f;  // row 1's first column: 3e38 + 3e38 overflows
  expect_refused("grad", ids, huge);
  auto nan = dy;
  nan[4] = std::nanf("");
  expect_refused("dy", ids, nan);
  expect_refused("ids", {1, 5, 8, 0}, dy);
}

std::set<std::string> optim_kernels;
void on_optim_kernel(char const* name, std::uint32_t, std::uint64_t*) {
  optim_kernels.insert(name);
}

// Every kernel a step launches is named kembed::..., each optimizer's after it.
TEST(TableOptimizer, KernelsAreNamedKembed) {
  std::int64_t const v = 5, d = 2;
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(on_optim_kernel);
  Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(on_optim_kernel);
  for (auto kind : {Optimizer::sgd, Optimizer::adagrad, Optimizer::rowwise_adagrad, Optimizer::adam}) {
    Opt opt(optim_defaults(kind), v, d);
    opt.step(Space(), upload(random_floats(v * d, 6, 1.0f), v, d), upload(random_floats(v * d, 7, 0.1f), v, d));
  }
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(nullptr);
  for (auto const& name : optim_kernels)
    if (name.rfind("Kokkos::", 0) != 0) EXPECT_EQ(name.rfind("kembed::", 0), 0u) << "unlabelled kernel: " << name;
  for (char const* want : {"kembed::optim_step[sgd]", "kembed::optim_step[adagrad]",
                           "kembed::optim_step[rowwise_adagrad]", "kembed::optim_step[adam]"})
    EXPECT_EQ(optim_kernels.count(want), 1u) << "kernel never seen: " << want;
}

}  // namespace
}  // namespace kembed
