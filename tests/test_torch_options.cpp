// torch's other options, each against the oracle (core/reference) bit for bit on
// this binary's backend, with every plan and mode: the row-sparse gradient (and its
// carries, sparse or dense), scale_grad_by_freq per call and per batch, and
// max_norm with every kind of norm_type.
#include "support/test_support.hpp"

#include <kembed/core/reference.hpp>
#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace kembed {
namespace {

using Layer = Embedding<TEST_EXECSPACE>;
using test::Batch;
using test::Input;
using test::IdsHolder;
using test::same_bits;
using test::same_values;

constexpr Plan all_plans[] = {Plan::scan, Plan::sort, Plan::bucket, Plan::automatic};
constexpr Mode all_modes[] = {Mode::identical, Mode::deterministic, Mode::fast};
constexpr FreqScale all_scales[] = {FreqScale::none, FreqScale::call, FreqScale::batch};

Options options_for(Batch const& b, Plan plan, Mode mode, FreqScale scale) {
  auto o = b.options(plan, mode);
  o.scale_grad_by_freq = scale;
  return o;
}

// Whole-batch counts that differ from a call's: the call's plus a little per row.
std::vector<std::int64_t> batch_counts_for(std::int64_t v, IdsRef const& ids) {
  auto n = reference::counts(v, ids);
  for (std::int64_t r = 0; r < v; ++r) n[r] += r % 3;
  return n;
}

// The oracle: mode fast has no exact sum, so where it runs a fast path the test
// checks the sparse form only (which folds as identical).
std::vector<float> oracle(Config const& config, IdsRef const& ids, float const* dy, float const* carry,
                          std::int64_t const* batch) {
  return config.mode == Mode::deterministic ? reference::backward_deterministic(config, ids, dy, carry, batch)
                                            : reference::backward_identical(config, ids, dy, carry, batch);
}

std::vector<std::int64_t> distinct(std::vector<std::int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

class Options_ : public ::testing::TestWithParam<Input> {};

TEST_P(Options_, SparseAndScaledEqualTheOracleEveryPlanModeAndScale) {
  auto const& b = GetParam().batch();
  IdsHolder ids(b);
  auto const table = test::table_for(b.rows, b.dim);
  auto const batch = batch_counts_for(b.rows, ids.ref());
  auto const counts = reference::counts(b.rows, ids.ref());
  FloatsRef const dy(b.dy.data(), b.dy_shape());
  for (auto mode : all_modes)
    for (auto scale : all_scales) {
      auto config = make_config(b.rows, b.dim, options_for(b, Plan::automatic, mode, scale));
      std::int64_t const* batch_ptr = scale == FreqScale::batch ? batch.data() : nullptr;
      if (mode == Mode::fast) config.mode = Mode::identical;  // what fast's sparse form (and scaled form) folds as
      auto const want = oracle(config, ids.ref(), b.dy.data(), nullptr, batch_ptr);
      for (auto plan : all_plans) {
        SCOPED_TRACE(std::string(to_string(mode)) + ", scale " + std::string(to_string(scale)) + ", plan " +
                     std::string(to_string(plan)));
        Layer const layer(b.rows, b.dim, FloatsRef(table.data(), Shape{b.rows, b.dim}),
                          options_for(b, plan, mode, scale));
        auto const sparse = layer.backward_sparse(ids.ref(), dy, nullptr, batch_ptr);
        EXPECT_EQ(sparse.rows, distinct(b.ids));
        EXPECT_TRUE(same_bits(to_dense(sparse), want));
        EXPECT_TRUE(same_values(dense_counts(sparse), counts));
        if (mode == Mode::fast && scale == FreqScale::none) continue;  // fast's own path: test_backward
        auto const dense = layer.backward(ids.ref(), dy, FloatsRef{}, batch_ptr);
        EXPECT_TRUE(same_bits(dense.values, want));
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Inputs, Options_, ::testing::ValuesIn(test::catalogue()),
                         [](::testing::TestParamInfo<Input> const& info) { return info.param.name; });

// Microbatches with carries: sparse after sparse, dense after sparse and sparse
// after dense all reproduce the unsplit gradient (identical mode; with
// scale_grad_by_freq=batch too, which is split-invariant; `call` is not, as torch).
class SplitBatch : public ::testing::TestWithParam<Plan> {
 protected:
  Batch batch() const {
    Batch b;
    b.name = "split";
    b.rows = 100000;  // sparse: far more rows than the batch touches
    b.dim = 5;
    b.ids = synthetic::zipf_ids(b.rows, 4000, 1.05, 31);
    b.dy = synthetic::uniform_floats(b.positions() * b.dim, 32);
    b.padding_idx = 2;
    return b;
  }
};

TEST_P(SplitBatch, SparseAndDenseCarriesReproduceTheUnsplitGradient) {
  auto const b = batch();
  auto const table = test::table_for(b.rows, b.dim);
  auto const whole = reference::counts(b.rows, IdsRef(b.ids));
  for (auto scale : {FreqScale::none, FreqScale::batch}) {
    auto const options = options_for(b, GetParam(), Mode::identical, scale);
    auto const config = make_config(b.rows, b.dim, options);
    std::int64_t const* batch_ptr = scale == FreqScale::batch ? whole.data() : nullptr;
    auto const want = reference::backward_identical(config, IdsRef(b.ids), b.dy.data(), nullptr, batch_ptr);
    Layer const layer(b.rows, b.dim, FloatsRef(table.data(), Shape{b.rows, b.dim}), options);
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE("scale " + std::string(to_string(scale)) + ", seed " + std::to_string(seed));
      synthetic::Rng rng(seed);
      SparseGradient sparse_only, mixed;
      bool started = false;
      std::int64_t begin = 0, k = 0;
      while (begin < b.positions()) {
        std::int64_t const end = std::min<std::int64_t>(b.positions(), begin + 1 + rng.below(700));
        std::vector<std::int64_t> ids(b.ids.begin() + begin, b.ids.begin() + end);
        FloatsRef dy(b.dy.data() + begin * b.dim, Shape{end - begin, b.dim});
        sparse_only = layer.backward_sparse(IdsRef(ids), dy, started ? &sparse_only : nullptr, batch_ptr);
        if (k % 2 == 1) {  // dense after sparse
          auto const carry = to_dense(mixed);
          auto const g = layer.backward(IdsRef(ids), dy, FloatsRef(carry.data(), Shape{b.rows, b.dim}), batch_ptr);
          mixed = to_sparse(g.values.data(), g.counts.data(), b.rows, b.dim);
        } else {  // sparse after dense (made sparse by to_sparse)
          mixed = layer.backward_sparse(IdsRef(ids), dy, started ? &mixed : nullptr, batch_ptr);
        }
        started = true;
        begin = end;
        ++k;
      }
      EXPECT_TRUE(same_bits(to_dense(sparse_only), want));
      EXPECT_TRUE(same_bits(to_dense(mixed), want));
      EXPECT_LT(sparse_only.size(), b.rows / 10) << "the sparse form listed rows the batch never touched";
    }
  }
}

// `call` counts each call's ids, so splitting changes the result: the carried
// result is each chunk's own scaled sum, in order (documented, as torch).
TEST_P(SplitBatch, CallScaleCountsEachCall) {
  auto const b = batch();
  auto const table = test::table_for(b.rows, b.dim);
  auto const options = options_for(b, GetParam(), Mode::identical, FreqScale::call);
  auto const config = make_config(b.rows, b.dim, options);
  Layer const layer(b.rows, b.dim, FloatsRef(table.data(), Shape{b.rows, b.dim}), options);
  std::int64_t const half = b.positions() / 2;
  std::vector<std::int64_t> first(b.ids.begin(), b.ids.begin() + half), second(b.ids.begin() + half, b.ids.end());
  auto const want1 = reference::backward_identical(config, IdsRef(first), b.dy.data(), nullptr);
  auto const want = reference::backward_identical(config, IdsRef(second), b.dy.data() + half * b.dim, want1.data());
  auto const g1 = layer.backward_sparse(IdsRef(first), FloatsRef(b.dy.data(), Shape{half, b.dim}));
  auto const g = layer.backward_sparse(IdsRef(second),
                                       FloatsRef(b.dy.data() + half * b.dim, Shape{b.positions() - half, b.dim}), &g1);
  EXPECT_TRUE(same_bits(to_dense(g), want));
  auto const unsplit = reference::backward_identical(config, IdsRef(b.ids), b.dy.data(), nullptr);
  EXPECT_FALSE(same_bits(unsplit, want)) << "splitting should change a per-call scaled gradient here";
}

INSTANTIATE_TEST_SUITE_P(Plans, SplitBatch, ::testing::ValuesIn(all_plans),
                         [](::testing::TestParamInfo<Plan> const& info) { return std::string(to_string(info.param)); });

// The sparse form of a huge table costs what the batch touches: V = 1e9 rows of 64
// would be 256 GB dense.
TEST(SparseGradient, AHugeTableCostsOnlyTheRowsTouched) {
  std::int64_t const v = 1000000000, d = 64;
  auto const layer = Layer::backward_only(TEST_EXECSPACE(), v, d);
  std::vector<std::int64_t> ids{v - 1, 0, 123456789, v - 1, 0, 5};
  auto const dy = synthetic::uniform_floats(std::int64_t(ids.size()) * d, 41);
  auto const g = layer.backward_sparse(IdsRef(ids), FloatsRef(dy.data(), Shape{std::int64_t(ids.size()), d}));
  EXPECT_EQ(g.rows, (std::vector<std::int64_t>{0, 5, 123456789, v - 1}));
  EXPECT_EQ(g.counts, (std::vector<std::int64_t>{2, 1, 1, 2}));
  for (std::int64_t c = 0; c < d; ++c) {
    EXPECT_EQ(test::bits_of(g.values[0 * d + c]), test::bits_of(0.0f + dy[1 * d + c] + dy[4 * d + c]));
    EXPECT_EQ(test::bits_of(g.values[3 * d + c]), test::bits_of(0.0f + dy[0 * d + c] + dy[3 * d + c]));
  }
}

// The padding row is listed when referenced (+0.0 with its count), as the dense
// gradient's row; a carry's padding row becomes +0.0 too.
TEST(SparseGradient, ThePaddingRowIsListedAsZero) {
  std::int64_t const v = 10, d = 3;
  Options o;
  o.padding_idx = 4;
  auto const layer = Layer::backward_only(TEST_EXECSPACE(), v, d, o);
  std::vector<std::int64_t> ids{4, 1, 4};
  std::vector<float> dy{1, 2, 3, 4, 5, 6, 7, 8, 9};
  SparseGradient carry{v, d, {4, 7}, {9, 9, 9, -1, -2, -3}, {0, 0}};
  auto const g = layer.backward_sparse(IdsRef(ids), FloatsRef(dy.data(), Shape{3, d}), &carry);
  EXPECT_EQ(g.rows, (std::vector<std::int64_t>{1, 4, 7}));
  EXPECT_EQ(g.counts, (std::vector<std::int64_t>{1, 2, 0}));
  EXPECT_TRUE(same_bits(g.values, {4, 5, 6, 0, 0, 0, -1, -2, -3}));
}

// ---- max_norm ----

struct RenormCase {
  std::string name;
  double norm_type;
};

TEST(MaxNorm, ForwardRenormalisesAsTheOracleForEveryNormType) {
  std::int64_t const v = 500, d = 13;
  auto table = test::table_for(v, d, 51);
  for (std::int64_t c = 0; c < d; ++c) table[7 * d + c] *= 1e-3f;  // a row already within max_norm
  // Hot rows, duplicates, the padding row, a row at the end.
  auto ids = synthetic::zipf_ids(v, 3000, 1.2, 52);
  ids.push_back(v - 1);
  ids.push_back(7);
  double const types[] = {1.0, 2.0, std::numeric_limits<double>::infinity(), 0.5, 3.0};
  for (double p : types) {
    for (auto plan : all_plans) {
      SCOPED_TRACE("norm_type " + std::to_string(p) + ", plan " + std::string(to_string(plan)));
      Options o;
      o.max_norm = 0.75;
      o.norm_type = p;
      o.padding_idx = 3;  // renormalised too, as torch
      o.plan = plan;
      Layer layer(v, d, FloatsRef(table.data(), Shape{v, d}), o);
      auto const config = make_config(v, d, o);
      auto want_table = table;
      reference::renorm(want_table.data(), config, IdsRef(ids));
      auto const want_y = reference::forward(want_table.data(), config, IdsRef(ids));
      EXPECT_TRUE(same_bits(layer.forward(IdsRef(ids)), want_y));
      EXPECT_TRUE(same_bits(layer.weight_host(), want_table));
      // Untouched rows keep their bits; touched rows over max_norm changed.
      std::int64_t changed = 0;
      for (std::int64_t r = 0; r < v; ++r)
        changed += std::memcmp(&want_table[r * d], &table[r * d], d * sizeof(float)) != 0;
      EXPECT_GT(changed, 10);
      for (std::int64_t c = 0; c < d; ++c) EXPECT_EQ(want_table[7 * d + c], table[7 * d + c]);
      // A second forward renormalises again from the new table, as torch.
      reference::renorm(want_table.data(), config, IdsRef(ids));
      EXPECT_TRUE(same_bits(layer.forward(IdsRef(ids)), reference::forward(want_table.data(), config, IdsRef(ids))));
    }
  }
}

TEST(MaxNorm, ABadIdChangesNoRow) {
  std::int64_t const v = 20, d = 4;
  auto const table = test::table_for(v, d, 61);
  Options o;
  o.max_norm = 0.1;
  Layer layer(v, d, FloatsRef(table.data(), Shape{v, d}), o);
  std::vector<std::int64_t> ids{1, 2, 3, 20};
  EXPECT_THROW(layer.forward(IdsRef(ids)), InvalidArgument);
  EXPECT_TRUE(same_bits(layer.weight_host(), table));
}

// The norm's definition, term by term, on values whose sums round.
TEST(MaxNorm, TheNormIsTheDefinedSum) {
  float const row[] = {1.0f, 1e-8f, -1e-8f, 3.0f, -0.0f};
  EXPECT_EQ(reference::row_norm(row, 5, 1.0), ((((1.0 + 1e-8f) + 1e-8f) + 3.0) + 0.0));
  EXPECT_EQ(reference::row_norm(row, 5, 2.0), std::sqrt(1.0 + double(1e-8f) * 1e-8f + double(1e-8f) * 1e-8f + 9.0));
  EXPECT_EQ(reference::row_norm(row, 5, std::numeric_limits<double>::infinity()), 3.0);
}

// ---- against torch's CPU results (tests/data/torch_options.txt, made by
// scripts/make_torch_options_reference.py; torch is not needed to run this) ----

// The file's records of one kind: the header's words and the lines after it.
std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> records(std::string const& kind,
                                                                                  int lines) {
  std::ifstream file(test::data_file("torch_options.txt"));
  std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> out;
  for (std::string line; std::getline(file, line);) {
    if (line.rfind(kind + " ", 0) != 0) continue;
    std::istringstream head(line);
    std::vector<std::string> words;
    for (std::string w; head >> w;) words.push_back(w);
    std::vector<std::string> body(lines);
    for (auto& b : body) std::getline(file, b);
    out.emplace_back(words, body);
  }
  return out;
}

TEST(TorchOptions, ScaleGradByFreqCallEqualsTorchBitForBit) {
  auto const cases = records("scale", 3);
  ASSERT_EQ(cases.size(), 4u) << "tests/data/torch_options.txt is missing or incomplete";
  for (auto const& [head, body] : cases) {
    std::int64_t const v = std::stoll(head[2]), d = std::stoll(head[3]), t = std::stoll(head[5]);
    auto const ids = test::parse_ints(body[0]);
    auto const dy = test::parse_hex(body[1]);
    auto const want = test::parse_hex(body[2]);
    ASSERT_EQ(std::int64_t(ids.size()), t);
    for (auto mode : {Mode::identical, Mode::fast})
      for (auto plan : all_plans) {
        SCOPED_TRACE(head[1] + ", " + std::string(to_string(mode)) + ", plan " + std::string(to_string(plan)));
        Options o;
        if (head[4] != "none") o.padding_idx = std::stoll(head[4]);
        o.plan = plan;
        o.mode = mode;
        o.scale_grad_by_freq = FreqScale::call;
        auto const layer = Layer::backward_only(TEST_EXECSPACE(), v, d, o);
        FloatsRef const dy_ref(dy.data(), Shape{t, d});
        EXPECT_TRUE(same_bits(layer.backward(IdsRef(ids), dy_ref).values, want));
        EXPECT_TRUE(same_bits(to_dense(layer.backward_sparse(IdsRef(ids), dy_ref)), want));
        // batch counts equal to the call's are the same scale
        auto const n = reference::counts(v, IdsRef(ids));
        o.scale_grad_by_freq = FreqScale::batch;
        auto const by_batch = Layer::backward_only(TEST_EXECSPACE(), v, d, o);
        EXPECT_TRUE(same_bits(by_batch.backward(IdsRef(ids), dy_ref, FloatsRef{}, n.data()).values, want));
      }
  }
}

// norm_type = inf: torch's norm (max |w|) is exact, so every renormalised row is
// torch's bit for bit. Other norm types: exactly as many rows agree as the file
// records (computed there with kembed's definition; torch's float reduction rounds
// differently, docs/CONTRACT.md), and every row agrees with kembed's oracle.
TEST(TorchOptions, MaxNormAgainstTorch) {
  auto const cases = records("renorm", 3);
  ASSERT_EQ(cases.size(), 10u) << "tests/data/torch_options.txt is missing or incomplete";
  for (auto const& [head, body] : cases) {
    SCOPED_TRACE(head[1]);
    std::int64_t const v = std::stoll(head[2]), d = std::stoll(head[3]);
    double const max_norm = std::stod(head[4]), p = std::stod(head[5]);
    std::int64_t const renormalised = std::stoll(head[7]), agree = std::stoll(head[8]);
    auto const ids = test::parse_ints(body[0]);
    auto const before = test::parse_hex(body[1]);
    auto const torch_after = test::parse_hex(body[2]);
    Options o;
    o.max_norm = max_norm;
    o.norm_type = p;
    Layer layer(v, d, FloatsRef(before.data(), Shape{v, d}), o);
    auto const y = layer.forward(IdsRef(ids));
    auto const after = layer.weight_host();
    auto oracle_after = before;
    reference::renorm(oracle_after.data(), make_config(v, d, o), IdsRef(ids));
    EXPECT_TRUE(same_bits(after, oracle_after));
    std::int64_t changed = 0, equal = 0;
    for (std::int64_t r = 0; r < v; ++r) {
      auto const row = [&](std::vector<float> const& m) { return &m[r * d]; };
      bool const touched = std::memcmp(row(after), row(before), d * 4) != 0 ||
                           std::memcmp(row(torch_after), row(before), d * 4) != 0;
      if (!touched) continue;
      ++changed;
      equal += std::memcmp(row(after), row(torch_after), d * 4) == 0;
    }
    EXPECT_EQ(changed, renormalised);
    EXPECT_EQ(equal, agree);
    if (std::isinf(p)) EXPECT_TRUE(same_bits(after, torch_after));
    EXPECT_GT(changed, 0);
    // y gathers the renormalised rows
    EXPECT_EQ(std::memcmp(&y[0], &after[ids[0] * d], d * 4), 0);
  }
}

}  // namespace
}  // namespace kembed
