// The update step's contract without Kokkos (docs/CONTRACT.md, "Updates"): cases
// worked by hand where one fused multiply-add and two roundings differ, the step's
// constants, dense against row-sparse, and the refusals with nothing changed.
#include <gtest/gtest.h>

#include <kembed/core/error.hpp>
#include <kembed/core/optim.hpp>
#include <kembed/core/optim_reference.hpp>

#include "support/test_support.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

namespace kembed {
namespace {

// (memcmp is not given an empty vector's null data: UBSan says so.)
bool same_bits(std::vector<float> const& a, std::vector<float> const& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}
bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}
float const u12 = std::ldexp(1.0f, -12), u11 = std::ldexp(1.0f, -11), u24 = std::ldexp(1.0f, -24);

// One element, one step: the table's new value.
float one_step(OptimSettings const& s, float w, float g, OptimState* state = nullptr) {
  OptimState own = initial_state(s, 1, 1);
  OptimState& st = state ? *state : own;
  reference::optim_step(s, &w, 1, 1, &g, st);
  return w;
}

// W = fma(g, -lr, W): (1 + 2^-11) - (1 + 2^-12)^2 is -2^-24 in one rounding; rounding
// the product first gives 1 + 2^-11 and so +0.0.
TEST(Optim, SgdUpdatesWithOneFusedMultiplyAdd) {
  auto s = optim_defaults(Optimizer::sgd);
  s.lr = 1.0 + u12;
  EXPECT_TRUE(same_bits(one_step(s, 1.0f + u11, 1.0f + u12), -u24));
}

// g = fma(W, weight_decay, g) = (1 + 2^-12)^2 - (1 + 2^-11) = 2^-24 exactly (0 when the
// product is rounded first); lr = 2^20 carries it to W: (1 + 2^-12) - 2^-4.
TEST(Optim, SgdWeightDecayIsFused) {
  auto s = optim_defaults(Optimizer::sgd);
  s.lr = std::ldexp(1.0, 20);
  s.weight_decay = 1.0 + u12;
  EXPECT_TRUE(same_bits(one_step(s, 1.0f + u12, -(1.0f + u11)), 1.0f + u12 - 0.0625f));
}

// Momentum: b = g at the first step, then b = fma(g, 1 - dampening, b * momentum);
// nesterov steps by fma(b, momentum, g). Exact values: every product here is exact.
TEST(Optim, SgdMomentumStartsFromTheFirstGradient) {
  auto s = optim_defaults(Optimizer::sgd);
  s.lr = 0.5, s.momentum = 0.5, s.dampening = 0.25;
  auto st = initial_state(s, 1, 1);
  float w = 4.0f, g = 2.0f;
  reference::optim_step(s, &w, 1, 1, &g, st);  // b = 2, W = 4 - 1
  EXPECT_TRUE(same_bits(st.first[0], 2.0f));
  EXPECT_TRUE(same_bits(w, 3.0f));
  reference::optim_step(s, &w, 1, 1, &g, st);  // b = 2 * 0.75 + 2 * 0.5 = 2.5, W = 3 - 1.25
  EXPECT_TRUE(same_bits(st.first[0], 2.5f));
  EXPECT_TRUE(same_bits(w, 1.75f));
  s.dampening = 0.0, s.nesterov = true;
  auto nt = initial_state(s, 1, 1);
  w = 4.0f;
  reference::optim_step(s, &w, 1, 1, &g, nt);  // b = 2, g = 2 + 2 * 0.5 = 3, W = 4 - 1.5
  EXPECT_TRUE(same_bits(w, 2.5f));
  EXPECT_EQ(nt.step, 1);
}

// Adagrad: s = fma(g, g, s); from s = -(1 + 2^-11) and g = 1 + 2^-12 that is 2^-24
// (two roundings give 0, and W / 0). std = 2^-12; W + (-lr * g) / std with lr = 2^-12.
TEST(Optim, AdagradSumsSquaresFused) {
  auto s = optim_defaults(Optimizer::adagrad);
  s.lr = u12, s.eps = 0.0;
  auto st = initial_state(s, 1, 1);
  st.first[0] = -(1.0f + u11);
  float const w = one_step(s, 1.0f + u12, 1.0f + u12, &st);
  EXPECT_TRUE(same_bits(st.first[0], u24));
  EXPECT_TRUE(same_bits(w, 0.0f));
}

// Adam's m is torch's lerp: fma(w, g - m, m) for w = f(1 - beta1) < 0.5, else
// fma(-(1 - w), g - m, g). Both on exact values, then the step on W.
TEST(Optim, AdamMovesItsMeanByEitherLerpForm) {
  for (double beta1 : {0.75, 0.25}) {
    auto s = optim_defaults(Optimizer::adam);
    s.beta1 = beta1, s.beta2 = 0.75, s.eps = 0.0, s.lr = 0.25;
    auto st = initial_state(s, 1, 1);
    float const w = one_step(s, 1.0f, 2.0f, &st);
    float const m = float(1.0 - beta1) * 2.0f;  // from m = 0: w * g either way, exact here
    EXPECT_TRUE(same_bits(st.first[0], m)) << beta1;
    EXPECT_TRUE(same_bits(st.second[0], 0.25f * 4.0f)) << beta1;  // v = (1 - beta2) g^2
    // W + (-lr / (1 - beta1)) m / (sqrt(v) / sqrt(1 - beta2)) = 1 - 0.25 * 2 / 2
    EXPECT_TRUE(same_bits(w, 0.75f)) << beta1;
  }
}

// With w >= 0.5 the lerp's other form gives other bits than the first would: from
// m = 0, grads 1/16 then 1/8, beta1 = 0.3 (w = f(0.7)); fma(w, g - m, m) ends at
// 0x1.9c28f4p-4 instead (found by search).
TEST(Optim, AdamsLerpTakesTorchsSecondFormFromAHalf) {
  auto s = optim_defaults(Optimizer::adam);
  s.beta1 = 0.3;
  auto st = initial_state(s, 1, 1);
  float w = 1.0f;
  for (float g : {0.0625f, 0.125f}) reference::optim_step(s, &w, 1, 1, &g, st);
  EXPECT_TRUE(same_bits(st.first[0], 0x1.9c28f6p-4f));
}

// maximize climbs: g is negated before anything else, so from W = 0 each step is
// the mirror image of the descent's.
TEST(Optim, MaximizeNegatesTheGradient) {
  for (auto kind : {Optimizer::sgd, Optimizer::adagrad, Optimizer::adam}) {
    auto s = optim_defaults(kind);
    s.lr = 0.3;
    float const down = one_step(s, 0.0f, 0.7f);
    s.maximize = true;
    float const up = one_step(s, 0.0f, 0.7f);
    EXPECT_LT(down, 0.0f) << to_string(kind);
    EXPECT_TRUE(same_bits(up, -down)) << to_string(kind);
  }
}

// Row-wise Adagrad: the row's mean square (columns folded in order) joins one sum per
// row; every column moves by the same rate.
TEST(Optim, RowwiseAdagradKeepsOneSumPerRow) {
  auto s = optim_defaults(Optimizer::rowwise_adagrad);
  s.lr = 1.0, s.eps = 0.0;
  auto st = initial_state(s, 2, 2);
  std::vector<float> w{1.0f, 1.0f, 5.0f, 5.0f}, g{3.0f, 5.0f, 0.0f, 4.0f};
  reference::optim_step(s, w.data(), 2, 2, g.data(), st);
  ASSERT_EQ(st.first.size(), 2u);
  EXPECT_TRUE(same_bits(st.first, std::vector<float>{17.0f, 8.0f}));  // (9 + 25) / 2, (0 + 16) / 2
  float const rate = 1.0f / std::sqrt(17.0f), rate2 = 1.0f / std::sqrt(8.0f);
  EXPECT_TRUE(same_bits(w[0], std::fmaf(3.0f, -rate, 1.0f)));
  EXPECT_TRUE(same_bits(w[1], std::fmaf(5.0f, -rate, 1.0f)));
  EXPECT_TRUE(same_bits(w[2], 5.0f));
  EXPECT_TRUE(same_bits(w[3], std::fmaf(4.0f, -rate2, 5.0f)));
}

// beta^t by square-and-multiply: exact for powers of two; the step's constants are
// the binary64 expressions rounded once.
TEST(Optim, StepConstantsAreTheSettingsRoundedOnce) {
  EXPECT_EQ(power(0.5, 10), std::ldexp(1.0, -10));
  EXPECT_EQ(power(0.9, 0), 1.0);
  EXPECT_EQ(power(0.9, 1), 0.9);
  EXPECT_EQ(power(0.9, 3), 0.9 * 0.9 * 0.9);
  auto s = optim_defaults(Optimizer::adam);
  s.lr = 0.1;
  auto const k = step_constants(s, 2);
  EXPECT_TRUE(same_bits(k.neg_step, float(-(0.1 / (1.0 - 0.9 * 0.9)))));
  EXPECT_TRUE(same_bits(k.correction2, float(std::sqrt(1.0 - 0.999 * 0.999))));
  EXPECT_TRUE(same_bits(k.lerp_weight, float(1.0 - 0.9)));
  auto a = optim_defaults(Optimizer::adagrad);
  a.lr_decay = 0.5;
  EXPECT_TRUE(same_bits(step_constants(a, 3).neg_clr, float(-(1e-2 / 2.0))));
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::vector<float> out(n);
  for (auto& x : out) x = std::ldexp(float(std::int64_t(rng() % 2001) - 1000), -10) * scale;
  return out;
}

std::vector<OptimSettings> every_optimizer() {
  std::vector<OptimSettings> all;
  auto sgd = optim_defaults(Optimizer::sgd);
  sgd.lr = 0.1, sgd.momentum = 0.9, sgd.dampening = 0.1, sgd.weight_decay = 0.01;
  all.push_back(sgd);
  sgd.dampening = 0.0, sgd.nesterov = true, sgd.maximize = true;
  all.push_back(sgd);
  auto adagrad = optim_defaults(Optimizer::adagrad);
  adagrad.lr_decay = 0.01, adagrad.initial_accumulator_value = 0.1, adagrad.weight_decay = 0.01;
  all.push_back(adagrad);
  auto rowwise = optim_defaults(Optimizer::rowwise_adagrad);
  rowwise.initial_accumulator_value = 0.1;
  all.push_back(rowwise);
  auto adam = optim_defaults(Optimizer::adam);
  adam.weight_decay = 0.01;
  all.push_back(adam);
  adam.decoupled_weight_decay = true;
  all.push_back(adam);
  return all;
}

// A row-sparse gradient listing every row is the dense one, step after step; one
// listing some rows leaves the others, and their state, as they were.
TEST(Optim, SparseGradientsUpdateOnlyTheirRowsAndAgreeWithDense) {
  std::int64_t const v = 9, d = 5;
  for (auto const& s : every_optimizer()) {
    SCOPED_TRACE(std::string(to_string(s.optimizer)));
    auto dense_w = random_floats(v * d, 1, 1.0f), sparse_w = dense_w, some_w = dense_w;
    auto dense_st = initial_state(s, v, d), sparse_st = dense_st, some_st = dense_st;
    for (std::uint64_t step = 0; step < 4; ++step) {
      auto const g = random_floats(v * d, 10 + step, 0.1f);
      reference::optim_step(s, dense_w.data(), v, d, g.data(), dense_st);
      SparseGradient all, some;
      all.num_embeddings = some.num_embeddings = v, all.embedding_dim = some.embedding_dim = d;
      for (std::int64_t r = 0; r < v; ++r) {
        all.rows.push_back(r), all.counts.push_back(1);
        all.values.insert(all.values.end(), g.begin() + r * d, g.begin() + (r + 1) * d);
        if (r % 3 == 1) {
          some.rows.push_back(r), some.counts.push_back(1);
          some.values.insert(some.values.end(), g.begin() + r * d, g.begin() + (r + 1) * d);
        }
      }
      reference::optim_step(s, sparse_w.data(), v, d, all, sparse_st);
      auto const before_w = some_w;
      auto const before_st = some_st;
      reference::optim_step(s, some_w.data(), v, d, some, some_st);
      std::int64_t const per_row = s.optimizer == Optimizer::rowwise_adagrad ? 1 : d;
      for (std::int64_t r = 0; r < v; ++r) {
        if (r % 3 == 1) continue;
        EXPECT_EQ(std::memcmp(&some_w[r * d], &before_w[r * d], d * sizeof(float)), 0) << "row " << r;
        if (!some_st.first.empty())
          EXPECT_EQ(std::memcmp(&some_st.first[r * per_row], &before_st.first[r * per_row], per_row * sizeof(float)),
                    0);
      }
    }
    EXPECT_TRUE(same_bits(dense_w, sparse_w));
    EXPECT_TRUE(same_bits(dense_st.first, sparse_st.first));
    EXPECT_TRUE(same_bits(dense_st.second, sparse_st.second));
    EXPECT_EQ(dense_st.step, 4);
    EXPECT_EQ(some_st.step, 4);
  }
}

// Each bad setting, state or gradient is refused by name, and nothing changes.
TEST(Optim, RefusesBadInputByNameAndChangesNothing) {
  std::int64_t const v = 3, d = 2;
  auto const good = optim_defaults(Optimizer::adam);
  auto const w0 = random_floats(v * d, 2, 1.0f), g = random_floats(v * d, 3, 0.1f);
  auto const st0 = initial_state(good, v, d);
  auto expect_refused = [&](char const* name, OptimSettings const& s, OptimState st, std::vector<float> const& grad) {
    auto w = w0;
    auto const before = st;
    try {
      reference::optim_step(s, w.data(), v, d, grad.data(), st);
      ADD_FAILURE() << name << " was not refused";
    } catch (InvalidArgument const& e) {
      EXPECT_EQ(e.argument(), name) << e.what();
    }
    EXPECT_TRUE(same_bits(w, w0)) << name;
    EXPECT_TRUE(same_bits(st.first, before.first) && st.step == before.step) << name;
  };
  for (double bad : {-1e-3, std::nan(""), HUGE_VAL}) {
    auto s = good;
    s.lr = bad;
    expect_refused("lr", s, st0, g);
    s = good, s.eps = bad;
    expect_refused("eps", s, st0, g);
    s = good, s.weight_decay = bad;
    expect_refused("weight_decay", s, st0, g);
  }
  auto s = good;
  s.beta2 = 1.0;
  expect_refused("betas", s, st0, g);
  auto sgd = optim_defaults(Optimizer::sgd);
  sgd.nesterov = true;
  expect_refused("nesterov", sgd, initial_state(sgd, v, d), g);
  expect_refused("state", good, initial_state(optim_defaults(Optimizer::adagrad), v, d), g);
  expect_refused("state", good, initial_state(good, v + 1, d), g);
  auto nan_state = st0;
  nan_state.second[3] = std::nanf("");
  expect_refused("state", good, nan_state, g);
  auto bad_g = g;
  bad_g[4] = INFINITY;
  expect_refused("grad", good, st0, bad_g);
  EXPECT_THROW(parse_optimizer("adamax"), InvalidArgument);
  EXPECT_EQ(parse_optimizer("rowwise_adagrad"), Optimizer::rowwise_adagrad);
}

// ---- against torch's CPU optimizers (tests/data/torch_optim.txt) ----
//
// The inputs are scripts/make_torch_optim_reference.py's hash: a multiple of 2^-11 in
// [-1, 1), times a power of two, the same in Python and here.
float hashed(std::int64_t i, std::int64_t seed, float scale) {
  auto const h = (std::uint64_t(i) * 2654435761ull + std::uint64_t(seed) * 40503ull) % 4093ull;
  return float(double(std::int64_t(h) - 2046) / 2048.0) * scale;
}

struct TorchOptimCase {
  std::string name;
  OptimSettings settings;
  bool sparse = false;
  std::vector<std::vector<float>> tables;  // torch's, after steps 1, 10, 100
};

OptimSettings parse_settings(std::string const& optimizer, std::istream& words) {
  auto s = optim_defaults(parse_optimizer(optimizer));
  std::map<std::string, double*> numbers{{"lr", &s.lr},
                                         {"momentum", &s.momentum},
                                         {"dampening", &s.dampening},
                                         {"weight_decay", &s.weight_decay},
                                         {"lr_decay", &s.lr_decay},
                                         {"initial_accumulator_value", &s.initial_accumulator_value},
                                         {"eps", &s.eps}};
  std::map<std::string, bool*> flags{
      {"nesterov", &s.nesterov}, {"maximize", &s.maximize}, {"decoupled_weight_decay", &s.decoupled_weight_decay}};
  for (std::string word; words >> word;) {
    auto const eq = word.find('=');
    auto const key = word.substr(0, eq), text = word.substr(eq + 1);
    if (numbers.count(key))
      *numbers[key] = std::stod(text);
    else if (flags.count(key))
      *flags[key] = text == "1";
    else
      ADD_FAILURE() << "unknown setting " << word;
  }
  return s;
}

std::vector<TorchOptimCase> load_torch_optim() {
  std::ifstream file(test::data_file("torch_optim.txt"));
  std::vector<TorchOptimCase> cases;
  for (std::string line; std::getline(file, line);) {
    if (line.rfind("case ", 0) != 0) continue;
    std::istringstream words(line.substr(5));
    TorchOptimCase c;
    std::string optimizer;
    int sparse = 0;
    words >> c.name >> optimizer >> sparse;
    c.sparse = sparse != 0;
    c.settings = parse_settings(optimizer, words);
    for (int k = 0; k < 3; ++k) {
      std::getline(file, line);
      c.tables.push_back(test::parse_hex(line));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

// Values of kembed's table equal to torch's after steps 1, 10 and 100 (16 x 8 = 128
// values), and the largest distance of the others: docs/CONTRACT.md's table.
struct OptimShares {
  char const* name;
  test::Agreement after[3];
};
OptimShares const torch_optim_shares[] = {
    {"sgd", {{128, 0}, {128, 0}, {128, 0}}},
    {"sgd_momentum", {{128, 0}, {128, 0}, {128, 0}}},
    {"sgd_nesterov", {{128, 0}, {128, 0}, {128, 0}}},
    {"adagrad", {{128, 0}, {122, 8}, {105, 4}}},
    {"adagrad_sparse", {{123, 1}, {109, 16}, {73, 7}}},
    {"adam", {{127, 4}, {125, 2}, {120, 2}}},
    {"adam_l2", {{128, 0}, {126, 2}, {120, 18}}},
    {"adamw", {{127, 4}, {126, 1}, {119, 4}}},
    {"sparse_adam", {{40, 419}, {7, 792}, {5, 419}}},
};

TEST(Optim, SharesOfValuesEqualToTorchAreAsRecorded) {
  std::int64_t const v = 16, d = 8;
  auto const cases = load_torch_optim();
  ASSERT_EQ(cases.size(), std::size(torch_optim_shares)) << "tests/data/torch_optim.txt is missing or incomplete";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto const& c = cases[i];
    ASSERT_EQ(c.name, torch_optim_shares[i].name);
    SCOPED_TRACE(c.name);
    std::vector<float> w(std::size_t(v * d));
    for (std::int64_t e = 0; e < v * d; ++e) w[e] = hashed(e, 1, 1.0f);
    auto state = initial_state(c.settings, v, d);
    int kept = 0;
    for (std::int64_t step = 1; step <= 100; ++step) {
      std::vector<float> g(std::size_t(v * d));
      for (std::int64_t e = 0; e < v * d; ++e) g[e] = hashed(e, 100 + step, 0.125f);
      if (c.sparse) {
        SparseGradient sg;
        sg.num_embeddings = v, sg.embedding_dim = d;
        for (std::int64_t r = 0; r < v; ++r)
          if ((r + step) % 3 != 0) {
            sg.rows.push_back(r), sg.counts.push_back(1);
            sg.values.insert(sg.values.end(), g.begin() + r * d, g.begin() + (r + 1) * d);
          }
        reference::optim_step(c.settings, w.data(), v, d, sg, state);
      } else {
        reference::optim_step(c.settings, w.data(), v, d, g.data(), state);
      }
      if (step == 1 || step == 10 || step == 100) {
        EXPECT_EQ(test::agreement(w, c.tables[kept]), torch_optim_shares[i].after[kept]) << "after step " << step;
        ++kept;
      }
    }
  }
}

}  // namespace
}  // namespace kembed
