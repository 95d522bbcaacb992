// TableOptimizer on this binary's backend (at each thread count the suite runs at):
// every optimizer, dense and row-sparse, step after step, against the contract's
// oracle (core's reference::optim_step) by memcmp of the table and the state; the
// refusals with nothing changed; the kernels' labels.
#include "support/test_support.hpp"

#include <kembed/core/optim_reference.hpp>
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
