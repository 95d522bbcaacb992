// EmbeddingBag's contract without Kokkos: torch's rules for bags and options, the
// refusals, and the oracle on cases small enough to work out by hand, then against
// torch's own CPU EmbeddingBag (data/torch_bag.txt, scripts/make_torch_bag_reference.py).
#include <gtest/gtest.h>

#include <kembed/core/bag_reference.hpp>
#include <kembed/core/bags.hpp>
#include <kembed/core/compare.hpp>
#include <kembed/core/error.hpp>
#include <kembed/core/reference.hpp>

#include "support/test_support.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

namespace kembed {
namespace {

using test::bits_of;

// The argument an error names and its message, or fails when nothing is thrown.
template <class F>
std::pair<std::string, std::string> refusal(F&& f) {
  try {
    f();
  } catch (Error const& e) {
    return {e.argument(), e.what()};
  }
  ADD_FAILURE() << "nothing was refused";
  return {};
}

bool same_bits(std::vector<float> const& a, std::vector<float> const& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

BagConfig config(std::int64_t v, std::int64_t d, Pooling pooling, std::optional<std::int64_t> pad = {}) {
  BagOptions o;
  o.pooling = pooling;
  o.embedding.padding_idx = pad;
  return make_bag_config(v, d, o);
}

Bags bags_of(std::vector<std::int64_t> const& offsets, std::int64_t t, bool last = false) {
  IdsRef const ref(offsets);
  return make_bags(Shape{t}, &ref, last);
}

TEST(BagRules, OffsetsAsTorchReadsThem) {
  EXPECT_EQ(bags_of({0, 2, 2, 5}, 6).bounds, (std::vector<std::int64_t>{0, 2, 2, 5, 6}));
  EXPECT_EQ(bags_of({0, 2, 6}, 6, true).bounds, (std::vector<std::int64_t>{0, 2, 6}));
  EXPECT_EQ(bags_of({0, 6}, 6).bounds, (std::vector<std::int64_t>{0, 6, 6}));  // the last bag empty
  EXPECT_EQ(make_bags(Shape{3, 4}, nullptr, false).bounds, (std::vector<std::int64_t>{0, 4, 8, 12}));
  std::vector<std::int32_t> const narrow{0, 1};
  IdsRef const ref(narrow);
  EXPECT_EQ(make_bags(Shape{3}, &ref, false).bounds, (std::vector<std::int64_t>{0, 1, 3}));
}

TEST(BagRules, BadOffsetsAreRefusedByName) {
  struct Case {
    std::vector<std::int64_t> offsets;
    bool last;
    char const* says;
  };
  for (auto const& c :
       {Case{{1, 3}, false, "first bag must start at 0"}, Case{{0, 4, 3}, false, "decrease at entry 2"},
        Case{{0, 7}, false, "past the 6 ids"}, Case{{0, 3, 5}, true, "end at 5 but there are 6 ids"},
        Case{{0}, true, "at least 2"}, Case{{}, false, "at least 1"},
        // drops whose unsigned difference wraps (5 - INT64_MIN: top bit clear; the rules' one pass)
        Case{{0, 5, INT64_MIN}, false, "decrease at entry 2"}, Case{{0, INT64_MAX, 0}, false, "at entry 1, past"},
        Case{{0, 2, -1}, false, "decrease at entry 2"}, Case{{0, 2, INT64_MAX}, false, "past the 6 ids"}}) {
    auto const [argument, message] = refusal([&] { bags_of(c.offsets, 6, c.last); });
    EXPECT_EQ(argument, "offsets");
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
  }
  std::vector<std::int32_t> const wraps{0, 5, INT32_MIN};  // int32 offsets, the same pass
  IdsRef const narrow(wraps);
  EXPECT_NE(refusal([&] { make_bags(Shape{6}, &narrow, false); }).second.find("decrease at entry 2"),
            std::string::npos);
  std::vector<std::int64_t> const offsets{0};
  IdsRef const ref(offsets);
  EXPECT_EQ(refusal([&] { make_bags(Shape{2, 3}, &ref, false); }).first, "offsets");
  EXPECT_EQ(refusal([&] { make_bags(Shape{6}, nullptr, false); }).first, "offsets");
  EXPECT_EQ(refusal([&] { make_bags(Shape{2, 3, 1}, nullptr, false); }).first, "ids");
  EXPECT_EQ(refusal([&] { make_bags(Shape{0, 3}, nullptr, false); }).first, "ids");
  IdsRef const two_d(offsets.data(), Shape{1, 1});
  EXPECT_EQ(refusal([&] { make_bags(Shape{6}, &two_d, false); }).first, "offsets");
}

TEST(BagRules, OptionsAsTorchHasThem) {
  EXPECT_EQ(parse_pooling("max"), Pooling::max);
  EXPECT_EQ(refusal([] { parse_pooling("median"); }).first, "mode");
  EXPECT_EQ(BagOptions{}.pooling, Pooling::mean);  // torch's default
  BagOptions o;
  o.pooling = Pooling::max;
  o.embedding.scale_grad_by_freq = FreqScale::call;
  EXPECT_EQ(refusal([&] { make_bag_config(4, 2, o); }).first, "scale_grad_by_freq");
  o.embedding.scale_grad_by_freq = FreqScale::none;
  o.embedding.padding_idx = 4;
  EXPECT_EQ(refusal([&] { make_bag_config(4, 2, o); }).first, "padding_idx");
}

TEST(BagRules, WeightsOnlyWithSumOfTheIdsShapeAndFinite) {
  std::vector<float> w{1, 2, 3};
  EXPECT_NO_THROW(check_bag_weights(config(4, 2, Pooling::sum), Shape{3}, FloatsRef(w.data(), Shape{3})));
  EXPECT_NO_THROW(check_bag_weights(config(4, 2, Pooling::mean), Shape{3}, FloatsRef{}));
  for (auto pooling : {Pooling::mean, Pooling::max})
    EXPECT_EQ(refusal([&] { check_bag_weights(config(4, 2, pooling), Shape{3}, FloatsRef(w.data(), Shape{3})); }).first,
              "per_sample_weights");
  EXPECT_EQ(refusal([&] {
              check_bag_weights(config(4, 2, Pooling::sum), Shape{1, 3}, FloatsRef(w.data(), Shape{3}));
            }).first,
            "per_sample_weights");
  w[1] = std::nanf("");
  auto const [argument, message] =
      refusal([&] { check_bag_weights(config(4, 2, Pooling::sum), Shape{3}, FloatsRef(w.data(), Shape{3})); });
  EXPECT_EQ(argument, "per_sample_weights");
  EXPECT_NE(message.find("NaN"), std::string::npos) << message;
  EXPECT_EQ(refusal([] { check_bag_dy(Shape{3, 2}, 2, 2); }).first, "dy");
}

// Table rows 0..3 of one column: 1, 2^-24, -0.0, 5.
std::vector<float> const column{1.0f, std::ldexp(1.0f, -24), -0.0f, 5.0f};

TEST(BagOracle, ForwardFoldsAscendingFromPositiveZero) {
  // Bag 0: 1 then four 2^-24 (each lost to rounding); bag 1: 2^-24 x 4 then 1 (kept);
  // bag 2: -0.0 alone, whose sum from +0.0 is +0.0; bag 3: empty.
  std::vector<std::int64_t> const ids{0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 2};
  reference::BagCall const call{IdsRef(ids), bags_of({0, 5, 10, 11}, 11)};
  auto const y = reference::bag_forward(column.data(), config(4, 1, Pooling::sum), call);
  EXPECT_EQ(bits_of(y[0]), bits_of(1.0f));
  EXPECT_EQ(bits_of(y[1]), bits_of(1.0f + std::ldexp(1.0f, -22)));
  EXPECT_EQ(bits_of(y[2]), bits_of(+0.0f));
  EXPECT_EQ(bits_of(y[3]), bits_of(+0.0f));
}

TEST(BagOracle, MeanDividesAndPaddingLeavesTheBag) {
  std::vector<std::int64_t> const ids{3, 0, 3, 0, 2};  // row 0 is padding: bag 0 = {5, 5}, bag 1 = {} left
  reference::BagCall const call{IdsRef(ids), bags_of({0, 3, 4}, 5)};
  auto const y = reference::bag_forward(column.data(), config(4, 1, Pooling::mean, 0), call);
  EXPECT_EQ(bits_of(y[0]), bits_of(10.0f / 2.0f));
  EXPECT_EQ(bits_of(y[1]), bits_of(+0.0f));  // only padding: +0.0
  EXPECT_EQ(bits_of(y[2]), bits_of(+0.0f));  // -0.0 summed from +0.0, then / 1
}

TEST(BagOracle, MaxTakesTheLowestPositionOfATie) {
  std::vector<float> const w{1, 7, 7, 2, 0, 7};  // rows (1, 7), (7, 2), (0, 7)
  std::vector<std::int64_t> const ids{0, 1, 2, 1};
  reference::BagCall const call{IdsRef(ids), bags_of({0, 4}, 4)};
  auto const cfg = config(3, 2, Pooling::max);
  EXPECT_EQ(reference::bag_argmax(w.data(), cfg, call), (std::vector<std::int64_t>{1, 0, -1, -1}));
  EXPECT_TRUE(same_bits(reference::bag_forward(w.data(), cfg, call), {7, 7, 0, 0}));
  // The gradient goes to the winners only: dy (10, 20) to row 1 column 0, row 0 column 1.
  std::vector<float> const dy{10, 20, 30, 40};
  EXPECT_TRUE(
      same_bits(reference::bag_backward_identical(w.data(), cfg, call, dy.data(), nullptr), {0, 20, 10, 0, 0, 0}));
}

TEST(BagOracle, BackwardTermsAreEachPositionsFactorOnItsBag) {
  std::vector<float> const w{1, 2, 3, 4, 5, 6};  // 3 rows, d = 2
  std::vector<std::int64_t> const ids{0, 2, 0, 0};
  std::vector<float> const dy{1, 2, 3, 4};  // bags {0, 2, 0} and {0}
  reference::BagCall const call{IdsRef(ids), bags_of({0, 3}, 4)};
  auto const mean = reference::bag_backward_identical(w.data(), config(3, 2, Pooling::mean), call, dy.data(), nullptr);
  float const third = float(1.0 / 3.0);
  float const r0c0 = std::fmaf(3, 1.0f, std::fmaf(1, third, std::fmaf(1, third, 0.0f)));
  EXPECT_EQ(bits_of(mean[0]), bits_of(r0c0));
  EXPECT_EQ(bits_of(mean[4]), bits_of(std::fmaf(1, third, 0.0f)));
  std::vector<float> const psw{0.5f, 3.0f, -2.0f, 0.25f};
  reference::BagCall const weighted{IdsRef(ids), call.bags, psw.data()};
  auto const sum = config(3, 2, Pooling::sum);
  auto const g = reference::bag_backward_identical(w.data(), sum, weighted, dy.data(), nullptr);
  EXPECT_EQ(bits_of(g[1]), bits_of(std::fmaf(4, 0.25f, std::fmaf(2, -2.0f, std::fmaf(2, 0.5f, 0.0f)))));
  auto const wg = reference::bag_weights_grad(w.data(), sum, weighted, dy.data());
  EXPECT_EQ(bits_of(wg[1]), bits_of(std::fmaf(2, 6, std::fmaf(1, 5, 0.0f))));
  EXPECT_EQ(bits_of(wg[3]), bits_of(std::fmaf(4, 2, std::fmaf(3, 1, 0.0f))));
}

// Microbatches of whole bags, in order, each continuing the last gradient, give the
// unsplit gradient in mode identical, with batch counts, for every pooling. (Mode
// deterministic's tree depends on the boundaries, as for the unpooled backward.)
TEST(BagOracle, WholeBagMicrobatchesReproduceTheUnsplitGradient) {
  auto const w = test::table_for(9, 3);
  std::vector<std::int64_t> ids;
  for (int p = 0; p < 60; ++p) ids.push_back((p * p + 3 * p) % 9);
  std::vector<std::int64_t> const offsets{0, 5, 5, 17, 30, 31, 44, 52};
  auto const counts = reference::counts(9, IdsRef(ids));
  std::vector<float> dy(offsets.size() * 3), psw(ids.size());
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = std::ldexp(float(i % 7) - 3.3f, int(i % 5) - 2);
  for (std::size_t i = 0; i < psw.size(); ++i) psw[i] = 0.1f * float(i % 11) - 0.4f;
  for (auto pooling : {Pooling::sum, Pooling::mean, Pooling::max})
    for (bool weighted : {false, true}) {
      if (weighted && pooling != Pooling::sum) continue;
      BagOptions o;
      o.pooling = pooling;
      o.embedding.padding_idx = 4;
      if (pooling != Pooling::max) o.embedding.scale_grad_by_freq = FreqScale::batch;
      auto const cfg = make_bag_config(9, 3, o);
      auto const run = [&](std::int64_t b0, std::int64_t b1, float const* carry) {
        auto const p0 = offsets[std::size_t(b0)], p1 = b1 < 8 ? offsets[std::size_t(b1)] : 60;
        std::vector<std::int64_t> part(ids.begin() + p0, ids.begin() + p1), local;
        for (auto b = b0; b < b1; ++b) local.push_back(offsets[std::size_t(b)] - p0);
        reference::BagCall const call{IdsRef(part), bags_of(local, p1 - p0), weighted ? psw.data() + p0 : nullptr};
        return reference::bag_backward_identical(w.data(), cfg, call, dy.data() + b0 * 3, carry,
                                                 cfg.embedding.scales() ? counts.data() : nullptr);
      };
      SCOPED_TRACE(std::string(to_string(pooling)) + (weighted ? " weighted" : ""));
      auto const whole = run(0, 8, nullptr);
      auto const first = run(0, 3, nullptr);
      auto const second = run(3, 6, first.data());
      EXPECT_TRUE(same_bits(run(6, 8, second.data()), whole));
    }
}

// ---- against torch 2.15's CPU EmbeddingBag ----
struct TorchBag {
  std::string name, mode, pad;
  std::int64_t v = 0, d = 0;
  bool freq = false, last = false;
  Shape ids_shape;
  std::vector<float> table, psw, dy, y, grad, psw_grad;
  std::vector<std::int64_t> ids, offsets;
};

std::vector<float> hex_or_none(std::string const& line) {
  return line == "-" ? std::vector<float>{} : test::parse_hex(line);
}

std::vector<TorchBag> load_torch_bags() {
  std::ifstream file(test::data_file("torch_bag.txt"));
  std::vector<TorchBag> cases;
  for (std::string line; std::getline(file, line);) {
    if (line.rfind("case ", 0) != 0) continue;
    TorchBag c;
    std::string shape;
    std::istringstream(line.substr(5)) >> c.name >> c.v >> c.d >> c.mode >> c.pad >> c.freq >> c.last >> shape;
    std::vector<std::int64_t> dims;
    for (std::istringstream s(shape); std::getline(s, line, 'x');) dims.push_back(std::stoll(line));
    c.ids_shape = Shape(dims);
    std::string l[8];
    for (auto& x : l) std::getline(file, x);
    c.table = test::parse_hex(l[0]), c.ids = test::parse_ints(l[1]);
    if (l[2] != "-") c.offsets = test::parse_ints(l[2]);
    c.psw = hex_or_none(l[3]), c.dy = test::parse_hex(l[4]), c.y = test::parse_hex(l[5]);
    c.grad = test::parse_hex(l[6]), c.psw_grad = hex_or_none(l[7]);
    cases.push_back(std::move(c));
  }
  return cases;
}

using test::Agreement;
using test::agreement;

struct Shares {
  char const* name;
  Agreement y, grad, weights;
};
Shares const torch_shares[] = {{"sum_zipf", {320, 0}, {270, 62}, {}},
                               {"mean_padding_hot_row", {320, 0}, {266, 86}, {}},
                               {"max_ties", {250, 0}, {150, 0}, {}},
                               {"max_padding", {250, 0}, {150, 0}, {}},
                               {"weighted_padding_negative", {103, 1051}, {35, 73}, {140, 176}},
                               {"sum_freq", {100, 0}, {102, 60}, {}},
                               {"mean_freq", {100, 0}, {100, 41}, {}},
                               {"sum_last_offset", {140, 0}, {76, 512}, {}},
                               {"mean_2d", {60, 0}, {20, 5}, {}},
                               {"order_sensitive", {1, 0}, {2, 0}, {}}};

TEST(TorchBag, SharesOfValuesEqualToTorchAreAsRecorded) {
  auto const cases = load_torch_bags();
  ASSERT_EQ(cases.size(), std::size(torch_shares)) << "tests/data/torch_bag.txt is missing or incomplete";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto const& c = cases[i];
    auto const& want = torch_shares[i];
    ASSERT_EQ(c.name, want.name);
    SCOPED_TRACE(c.name);
    BagOptions o;
    o.pooling = parse_pooling(c.mode);
    if (c.pad != "none") o.embedding.padding_idx = std::stoll(c.pad);
    o.embedding.scale_grad_by_freq = c.freq ? FreqScale::call : FreqScale::none;
    o.include_last_offset = c.last;
    auto const cfg = make_bag_config(c.v, c.d, o);
    IdsRef const offsets(c.offsets);
    reference::BagCall const call{IdsRef(c.ids.data(), c.ids_shape),
                                  make_bags(c.ids_shape, c.offsets.empty() ? nullptr : &offsets, c.last),
                                  c.psw.empty() ? nullptr : c.psw.data()};
    EXPECT_EQ(agreement(reference::bag_forward(c.table.data(), cfg, call), c.y), want.y);
    EXPECT_EQ(agreement(reference::bag_backward_identical(c.table.data(), cfg, call, c.dy.data(), nullptr), c.grad),
              want.grad);
    if (!c.psw.empty())
      EXPECT_EQ(agreement(reference::bag_weights_grad(c.table.data(), cfg, call, c.dy.data()), c.psw_grad),
                want.weights);
  }
}

}  // namespace
}  // namespace kembed
