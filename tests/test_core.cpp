// The backend-free contract: options, shapes, validation messages, and the
// reference oracle itself checked on cases small enough to work out by hand.
#include <gtest/gtest.h>

#include <kembed/core/build_info.hpp>
#include <kembed/core/compare.hpp>
#include <kembed/core/error.hpp>
#include <kembed/core/options.hpp>
#include <kembed/core/reference.hpp>
#include <kembed/core/shape.hpp>
#include <kembed/core/synthetic.hpp>
#include <kembed/core/validate.hpp>

#include "support/test_support.hpp"

#include <cmath>
#include <limits>
#include <type_traits>

namespace kembed {
namespace {

using test::bits_of;
using test::from_bits;

template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (E const& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception of the expected type";
  return {};
}

TEST(Shape, NumelAndOverflow) {
  EXPECT_EQ((Shape{2, 3, 4}).numel(), 24);
  EXPECT_EQ((Shape{}).numel(), 1);
  EXPECT_EQ((Shape{3}).str(), "(3,)");
  EXPECT_EQ((Shape{2, 3}).appended(5).str(), "(2, 3, 5)");
  auto const big = std::int64_t{1} << 40;
  auto msg = message_of<InvalidArgument>([&] { (Shape{big, big}).numel("weight"); });
  EXPECT_NE(msg.find("does not fit in a signed 64-bit integer"), std::string::npos) << msg;
  EXPECT_THROW((Shape{2, -1}).numel(), InvalidArgument);
}

TEST(Options, ParseAndPrint) {
  EXPECT_EQ(parse_plan("scan"), Plan::scan);
  EXPECT_EQ(parse_plan("sort"), Plan::sort);
  EXPECT_EQ(parse_plan("bucket"), Plan::bucket);
  EXPECT_EQ(to_string(Plan::bucket), "bucket");
  EXPECT_EQ(parse_plan("auto"), Plan::automatic);
  EXPECT_EQ(parse_mode("deterministic"), Mode::deterministic);
  EXPECT_EQ(to_string(Plan::automatic), "auto");
  auto msg = message_of<InvalidArgument>([] { parse_plan("fastest"); });
  EXPECT_NE(msg.find("plan must be 'auto', 'scan', 'sort' or 'bucket', got 'fastest'"), std::string::npos) << msg;
  msg = message_of<InvalidArgument>([] { parse_mode("exact"); });
  EXPECT_NE(msg.find("got 'exact'"), std::string::npos) << msg;
}

// differences() names every setting that differs, one at a time and all at once;
// Settings::gradient leaves out what does not change a gradient's bits.
TEST(Options, DifferencesNameEverySetting) {
  auto const base = make_config(10, 4, Options{});
  EXPECT_TRUE(differences(base, base).empty());
  struct Edit {
    char const* name;
    char const* b;
    void (*edit)(Options&);
    bool gradient;
  };
  Edit const edits[] = {
      {"padding_idx", "3", [](Options& o) { o.padding_idx = -7; }, true},
      {"plan", "bucket", [](Options& o) { o.plan = Plan::bucket; }, false},
      {"mode", "fast", [](Options& o) { o.mode = Mode::fast; }, true},
      {"max_norm", "0.25", [](Options& o) { o.max_norm = 0.25; }, false},
      {"norm_type", "inf",
       [](Options& o) {
         o.max_norm = 1.0;
         o.norm_type = std::numeric_limits<double>::infinity();
       },
       false},
      {"scale_grad_by_freq", "batch", [](Options& o) { o.scale_grad_by_freq = FreqScale::batch; }, true},
      {"sparse", "true", [](Options& o) { o.sparse = true; }, false},
  };
  Options every;
  for (auto const& e : edits) {
    SCOPED_TRACE(e.name);
    Options o;
    e.edit(o);
    e.edit(every);
    auto const d = differences(base, make_config(10, 4, o));
    ASSERT_GE(d.size(), 1u);
    EXPECT_EQ(d.back().name, e.name);
    EXPECT_EQ(d.back().b, e.b);
    EXPECT_EQ(differences(base, make_config(10, 4, o), Settings::gradient).size(), e.gradient ? 1u : 0u);
  }
  auto const all = differences(base, make_config(10, 4, every));
  ASSERT_EQ(all.size(), std::size(edits));
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].name, edits[i].name);
  EXPECT_EQ(all[3].text(), "max_norm: none / 1");  // the last edit's max_norm
  EXPECT_EQ(all[0].a, "none");
}

TEST(Options, PaddingIndexCountsFromTheEnd) {
  Options o;
  o.padding_idx = -1;
  EXPECT_EQ(make_config(10, 4, o).padding_idx, 9);
  o.padding_idx = -10;
  EXPECT_EQ(make_config(10, 4, o).padding_idx, 0);
  o.padding_idx = 9;
  EXPECT_EQ(make_config(10, 4, o).padding_idx, 9);
  EXPECT_FALSE(make_config(10, 4, Options{}).has_padding());
}

TEST(Options, AutoThresholdBoundary) {
  // V * T = 2^26 is the first size that sorts.
  EXPECT_EQ(resolve_plan(Plan::automatic, std::int64_t{1} << 13, (std::int64_t{1} << 13) - 1), Plan::scan);
  EXPECT_EQ(resolve_plan(Plan::automatic, std::int64_t{1} << 13, std::int64_t{1} << 13), Plan::sort);
  EXPECT_EQ(resolve_plan(Plan::automatic, 1, std::int64_t{1} << 62), Plan::sort);  // no overflow
  EXPECT_EQ(resolve_plan(Plan::scan, std::int64_t{1} << 40, std::int64_t{1} << 40), Plan::scan);
}

TEST(Validate, FirstNonFiniteFindsTheFirstAnywhere) {
  // Lengths around the checker's blocks of 1024, every kind of non-finite value, at
  // the first, a block's edges and the last place; finite extremes are not flagged.
  float const inf = std::numeric_limits<float>::infinity();
  float const kinds[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(), inf, -inf,
                         std::numeric_limits<float>::signaling_NaN()};
  for (std::int64_t n : {0, 1, 1023, 1024, 1025, 3000, 4096}) {
    std::vector<float> v(static_cast<std::size_t>(n), 1.0f);
    for (std::int64_t i = 0; i < n; i += 7)
      v[std::size_t(i)] = i % 2 ? std::numeric_limits<float>::max() : -std::numeric_limits<float>::denorm_min();
    EXPECT_EQ(first_non_finite(v.data(), n), n) << n;
    for (std::int64_t at : {std::int64_t{0}, std::int64_t{1023}, std::int64_t{1024}, n - 1})
      for (float bad : kinds) {
        if (at < 0 || at >= n) continue;
        auto w = v;
        w[std::size_t(at)] = bad;
        if (at + 1 < n) w[std::size_t(n - 1)] = -inf;  // a later one does not hide it
        EXPECT_EQ(first_non_finite(w.data(), n), at) << n << " at " << at;
      }
  }
}

TEST(Reference, TorchSemanticsOnASmallCase) {
  // ids [1, 3, 1, 1], d = 1, dy [1, 2, 3, 4]: row 1 = ((0 + 1) + 3) + 4, row 3 = 2.
  std::vector<std::int64_t> ids{1, 3, 1, 1};
  std::vector<float> dy{1, 2, 3, 4};
  Options o;
  auto g = reference::backward_identical(make_config(4, 1, o), IdsRef(ids), dy.data(), nullptr);
  EXPECT_EQ(g, (std::vector<float>{0, 8, 0, 2}));
  o.padding_idx = 1;
  g = reference::backward_identical(make_config(4, 1, o), IdsRef(ids), dy.data(), nullptr);
  EXPECT_EQ(g, (std::vector<float>{0, 0, 0, 2}));
  EXPECT_EQ(reference::counts(4, IdsRef(ids)), (std::vector<std::int64_t>{0, 3, 0, 1}));
}

TEST(Reference, NegativeZeroOnlyGivesPositiveZero) {
  std::vector<std::int64_t> ids{0, 0};
  std::vector<float> dy{-0.0f, -0.0f};
  auto g = reference::backward_identical(make_config(2, 1, Options{}), IdsRef(ids), dy.data(), nullptr);
  EXPECT_EQ(bits_of(g[0]), 0u);  // +0.0, not -0.0
  EXPECT_EQ(bits_of(g[1]), 0u);
}

TEST(Reference, PairwiseTreeShape) {
  // The tree splits after the largest power of two below n.
  float const a = 1.0f, e = 0x1p-24f;
  std::vector<float> x{a, e, e, e, e};
  // ((a + e) + (e + e)) + e = (1 + 2^-23) + 2^-24 -> ties to even -> 1 + 2^-22.
  EXPECT_EQ(bits_of(reference::pairwise_sum(x.data(), 5)), bits_of(1.0f + 0x1p-22f));
  // The sequential fold loses every e: 1 + 2^-24 ties to 1.
  float seq = 0.0f;
  for (float v : x) seq = seq + v;
  EXPECT_EQ(bits_of(seq), bits_of(1.0f));
  std::vector<float> three{1.0f, 2.0f, 4.0f};
  EXPECT_EQ(reference::pairwise_sum(three.data(), 3), 7.0f);
}

TEST(Reference, RefusesIdsOutOfRange) {
  std::vector<std::int64_t> ids{0, 5, -1};
  std::vector<float> dy{1, 1, 1};
  try {
    reference::backward_identical(make_config(5, 1, Options{}), IdsRef(ids), dy.data(), nullptr);
    FAIL() << "no error";
  } catch (IdOutOfRange const& err) {
    EXPECT_EQ(err.position(), 1);
    EXPECT_EQ(err.value(), 5);
    EXPECT_EQ(err.argument(), "ids");
  }
}

TEST(Validate, MessagesNameTheProblem) {
  auto msg = message_of<InvalidArgument>([] { check_dy_shape(Shape{2, 3}, Shape{2, 3, 5}, 4); });
  EXPECT_NE(msg.find("dy has shape (2, 3, 5), want (2, 3, 4)"), std::string::npos) << msg;
  msg = message_of<InvalidArgument>([] { check_ids_shape(Shape{0}); });
  EXPECT_NE(msg.find("ids has shape (0,) with no positions"), std::string::npos) << msg;
  msg = message_of<NonFinite>([] { throw_non_finite("dy", 13, std::nanf(""), 5, "position"); });
  EXPECT_NE(msg.find("dy holds NaN at position 2, column 3 (flat index 13)"), std::string::npos) << msg;
  msg = message_of<IdOutOfRange>([] { throw_id_out_of_range("ids", 4, 12, 10); });
  EXPECT_NE(msg.find("ids holds 12 at position 4, outside [0, 10)"), std::string::npos) << msg;
}

TEST(Synthetic, SeededAndZipfShaped) {
  auto a = synthetic::zipf_ids(1000, 20000, 1.1, 5);
  EXPECT_EQ(a, synthetic::zipf_ids(1000, 20000, 1.1, 5));
  EXPECT_NE(a, synthetic::zipf_ids(1000, 20000, 1.1, 6));
  auto n = reference::counts(1000, IdsRef(a));
  EXPECT_GT(n[0], n[1]);
  EXPECT_GT(n[1], n[10]);
  EXPECT_GT(n[0], 20000 / 10);  // row 0 of a Zipf(1.1) over 1000 rows takes ~ 15%
  for (float x : synthetic::uniform_floats(1000, 3)) {
    EXPECT_GE(x, -1.0f);
    EXPECT_LT(x, 1.0f);
  }
}

TEST(Compare, UlpDistanceAndRowDifferences) {
  EXPECT_EQ(ulp_distance(1.0f, 1.0f), 0);
  EXPECT_EQ(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f)), 1);
  EXPECT_EQ(ulp_distance(-0.0f, 0.0f), 0);  // different bits, no distance
  EXPECT_EQ(ulp_distance(test::from_bits(1), -test::from_bits(1)), 2);
  EXPECT_EQ(ulp_distance(std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity()), 1);
  std::vector<float> a(12, 1.0f), b = a;
  b[5] = std::nextafter(1.0f, 2.0f);  // row 1, column 1: 1 ULP
  b[10] = 1.5f;                       // row 3, column 1
  b[11] = -0.0f;                      // row 3, column 2
  a[11] = 0.0f;
  auto const c = compare(a.data(), b.data(), 4, 3, -1);
  EXPECT_FALSE(c.identical());
  EXPECT_EQ(c.differing_rows, 2);
  EXPECT_EQ(c.differing_elements, 3);
  ASSERT_EQ(c.differences.size(), 2u);
  EXPECT_EQ(c.differences[0].row, 1);
  EXPECT_EQ(c.differences[0].max_ulp, 1);
  EXPECT_EQ(c.differences[1].row, 3);
  EXPECT_EQ(c.differences[1].columns, 2);
  EXPECT_EQ(c.differences[1].max_ulp_col, 1);
  EXPECT_EQ(c.max_abs, 0.5);
  EXPECT_EQ(c.max_abs_row, 3);
  EXPECT_TRUE(compare(a.data(), a.data(), 4, 3, 10).identical());
  EXPECT_EQ(compare(a.data(), b.data(), 4, 3, 1).differences.size(), 1u);
}

// Float ids are refused at compile time, rather than truncated.
static_assert(!std::is_constructible<IdsRef, float const*, Shape>::value, "float ids must not convert");
static_assert(!std::is_constructible<IdsRef, std::vector<double> const&>::value, "double ids must not convert");

// The fast-math trap, for the compiled library: -ffast-math, flush-to-zero or a
// contracted multiply-add would each change bits the contract fixes.
TEST(BuildInfo, IeeeSemantics) {
  auto const info = build_info();
  EXPECT_FALSE(info.fast_math) << "kembed_core was compiled with -ffast-math";
  EXPECT_TRUE(info.subnormals_kept) << "subnormals are flushed to zero (FTZ/DAZ) in this process";
  EXPECT_TRUE(info.additions_unfused) << "a * b + c was contracted into one rounding";
  EXPECT_FALSE(info.version.empty());
#ifdef __FAST_MATH__
  ADD_FAILURE() << "the tests themselves were compiled with -ffast-math";
#endif
}

}  // namespace
}  // namespace kembed
