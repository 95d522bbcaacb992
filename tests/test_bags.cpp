// EmbeddingBag on this binary's backend (at each thread count the suite runs at):
// every pooling, weights, padding, empty bags and max_norm against the contract's
// oracle (core/bag_reference), by memcmp; and the refusals, with nothing written.
#include "support/test_support.hpp"

#include <kembed/core/bag_reference.hpp>
#include <kembed/core/reference.hpp>
#include <kembed/embedding_bag.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>

namespace kembed {
namespace {

using Space = TEST_EXECSPACE;
using Layer = EmbeddingBag<Space>;

bool same_bits(std::vector<float> const& a, std::vector<float> const& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A bag call: Zipf-like ids over V rows, B bags of random lengths (some empty).
struct Call {
  std::vector<std::int64_t> ids, offsets;
  std::vector<float> weights;
};
Call random_call(std::int64_t v, std::int64_t bags, std::int64_t longest, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Call c;
  for (std::int64_t b = 0; b < bags; ++b) {
    c.offsets.push_back(std::int64_t(c.ids.size()));
    auto const n = std::int64_t(rng() % std::uint64_t(longest + 1)) * (rng() % 5 != 0);
    for (std::int64_t i = 0; i < n; ++i) {
      auto const u = double(rng() >> 11) / double(1ull << 53);
      c.ids.push_back(std::min<std::int64_t>(v - 1, std::int64_t(std::pow(1.0 - u, -3.0)) - 1));
    }
  }
  for (std::size_t p = 0; p < c.ids.size(); ++p) c.weights.push_back(float(std::int64_t(rng() % 2001) - 1000) / 256.0f);
  return c;
}

struct Sizes {
  std::int64_t v, d, bags, longest;
};

TEST(EmbeddingBag, ForwardIsTheOracleForEveryPooling) {
  for (auto s : {Sizes{40, 8, 30, 12}, Sizes{1000, 33, 200, 40}, Sizes{7, 1, 50, 3}, Sizes{300, 130, 20, 90},
                 Sizes{30, 5, 10, 0}, Sizes{500, 64, 120, 20}, Sizes{200, 128, 70, 6}})
    for (auto pooling : {Pooling::sum, Pooling::mean, Pooling::max})
      for (bool weighted : {false, true})
        for (std::optional<std::int64_t> pad : {std::optional<std::int64_t>{}, std::optional<std::int64_t>{0}}) {
          if (weighted && pooling != Pooling::sum) continue;
          SCOPED_TRACE(std::to_string(s.v) + " x " + std::to_string(s.d) + " " + std::string(to_string(pooling)) +
                       (weighted ? " weighted" : "") + (pad ? " padding 0" : ""));
          auto const table = test::table_for(s.v, s.d);
          auto const call = random_call(s.v, s.bags, s.longest, std::uint64_t(s.v * 7 + s.d));
          BagOptions o;
          o.pooling = pooling;
          o.embedding.padding_idx = pad;
          Layer const layer(s.v, s.d, FloatsRef(table.data(), Shape{s.v, s.d}), o);
          IdsRef const ids(call.ids), offsets(call.offsets);
          auto const t = std::int64_t(call.ids.size());
          FloatsRef const w = weighted ? FloatsRef(call.weights.data(), Shape{t}) : FloatsRef{};
          reference::BagCall const ref{ids, make_bags(Shape{t}, &offsets, false),
                                       weighted ? call.weights.data() : nullptr};
          EXPECT_TRUE(
              same_bits(layer.forward(ids, &offsets, w), reference::bag_forward(table.data(), layer.config(), ref)));
        }
}

// +0.0 and -0.0 compare equal: the first position's zero is the maximum, and the
// sum's +0.0 start turns -0.0 + -0.0 into +0.0. At d = 2 and at d = 130 (the host's
// 64-column register tiles, each column pair repeating the pattern), in every host
// ISA copy.
TEST(EmbeddingBag, SignedZerosTieAndSumAsTheContractSays) {
  float const rows[3][2] = {{+0.0f, -0.0f}, {-0.0f, +0.0f}, {-1.0f, -1.0f}};
  std::vector<std::int64_t> const ids{0, 1, 1, 0, 2, 1, 1}, offsets{0, 2, 4, 5};
  IdsRef const i(ids), o(offsets);
  for (std::int64_t d : {2, 130}) {
    std::vector<float> table(std::size_t(3 * d));
    for (std::int64_t r = 0; r < 3; ++r)
      for (std::int64_t c = 0; c < d; ++c) table[std::size_t(r * d + c)] = rows[r][c % 2];
    for (char const* isa : {"baseline", "avx2", "avx512"})
      for (auto pooling : {Pooling::sum, Pooling::mean, Pooling::max}) {
        test::ScopedEnv env("KEMBED_HOST_ISA", isa);
        SCOPED_TRACE(std::to_string(d) + " " + isa + " " + std::string(to_string(pooling)));
        BagOptions opt;
        opt.pooling = pooling;
        Layer const layer(3, d, FloatsRef(table.data(), Shape{3, d}), opt);
        reference::BagCall const ref{i, make_bags(Shape{7}, &o, false)};
        auto const y = layer.forward(i, &o);
        EXPECT_TRUE(same_bits(y, reference::bag_forward(table.data(), layer.config(), ref)));
        if (pooling == Pooling::max && d == 2)
          EXPECT_TRUE(same_bits(y, {+0.0f, -0.0f, -0.0f, +0.0f, -1.0f, -1.0f, -0.0f, +0.0f}));
      }
  }
}

// A weight of -0.0 is -0.0 in every lane: a tiny product rounds the first fused
// multiply-add to -0.0, and then fma(1, -0.0, -0.0) is -0.0 where a weight turned to
// +0.0 gives +0.0. Mean bags of one keep their row's bits (x / 1 is x). At d = 2, 64,
// 128 (the register tiles' own loops; 304 positions in 4 bags walk a whole row once) and 130,
// in every host ISA copy.
TEST(EmbeddingBag, SignedZeroWeightsGiveTheOraclesBits) {
  std::int64_t const v = 3;
  std::vector<std::int64_t> ids{0, 1}, offsets{0, 2, 3, 4};
  std::vector<float> weights{-1e-30f, -0.0f};
  ids.push_back(1), weights.push_back(-0.0f);  // a bag of one: 1 * -0.0 onto +0.0
  ids.push_back(2), weights.push_back(+0.0f);  // and its row of -0.0 and finite values
  for (int k = 0; k < 300; ++k) ids.push_back(k % 2 ? 1 : 0), weights.push_back(k % 2 ? -0.0f : -1e-30f);
  IdsRef const i(ids), o(offsets);
  auto const t = std::int64_t(ids.size());
  for (std::int64_t d : {2, 64, 128, 130}) {
    std::vector<float> table(std::size_t(v * d));
    for (std::int64_t c = 0; c < d; ++c) {
      table[std::size_t(c)] = 1e-30f, table[std::size_t(d + c)] = 1.0f;
      table[std::size_t(2 * d + c)] = c % 3 ? -0.0f : -2.5f;
    }
    for (char const* isa : {"baseline", "avx2", "avx512"})
      for (auto pooling : {Pooling::sum, Pooling::mean}) {
        test::ScopedEnv env("KEMBED_HOST_ISA", isa);
        bool const weighted = pooling == Pooling::sum;
        SCOPED_TRACE(std::to_string(d) + " " + isa + " " + std::string(to_string(pooling)));
        BagOptions opt;
        opt.pooling = pooling;
        Layer const layer(v, d, FloatsRef(table.data(), Shape{v, d}), opt);
        FloatsRef const w = weighted ? FloatsRef(weights.data(), Shape{t}) : FloatsRef{};
        reference::BagCall const ref{i, make_bags(Shape{t}, &o, false), weighted ? weights.data() : nullptr};
        auto const y = layer.forward(i, &o, w);
        EXPECT_TRUE(same_bits(y, reference::bag_forward(table.data(), layer.config(), ref)));
        if (weighted) EXPECT_TRUE(std::signbit(y[0]) && std::signbit(y[std::size_t(3 * d)]));
      }
  }
}

TEST(EmbeddingBag, TwoDimensionalIdsAndTheLastOffset) {
  auto const table = test::table_for(50, 6);
  std::vector<std::int64_t> ids(12 * 5);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = std::int64_t((i * i + 7) % 50);
  BagOptions o;
  o.pooling = Pooling::mean;
  Layer const layer(50, 6, FloatsRef(table.data(), Shape{50, 6}), o);
  auto const grid = layer.forward(IdsRef(ids.data(), Shape{12, 5}));
  std::vector<std::int32_t> const narrow(ids.begin(), ids.end());  // int32 ids: widened, the same bits
  EXPECT_TRUE(same_bits(grid, layer.forward(IdsRef(narrow.data(), Shape{12, 5}))));
  std::vector<std::int64_t> offsets;
  for (std::int64_t b = 0; b < 12; ++b) offsets.push_back(b * 5);
  IdsRef const flat(ids), starts(offsets);
  EXPECT_TRUE(same_bits(grid, layer.forward(flat, &starts)));
  o.include_last_offset = true;
  Layer const csr(50, 6, FloatsRef(table.data(), Shape{50, 6}), o);
  offsets.push_back(60);
  IdsRef const ends(offsets);
  EXPECT_TRUE(same_bits(grid, csr.forward(flat, &ends)));
}

// The device's forward loops (columns on lanes, the output row read and written at
// each position), run here with one lane, against the oracle: on a host backend the
// layer runs loops of its own (a register tile), so this is what checks the device's.
TEST(EmbeddingBag, TheDevicesForwardLoopsAreTheOracle) {
  using M = typename Layer::memory_space;
  auto const up = [](auto const& v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    return Kokkos::create_mirror_view_and_copy(
        M(), Kokkos::View<T const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(v.data(), v.size()));
  };
  for (auto s : {Sizes{40, 8, 30, 12}, Sizes{1000, 70, 200, 40}, Sizes{300, 130, 20, 90}})
    for (auto pooling : {Pooling::sum, Pooling::mean, Pooling::max})
      for (bool weighted : {false, true}) {
        if (weighted && pooling != Pooling::sum) continue;
        SCOPED_TRACE(std::to_string(s.d) + " " + std::string(to_string(pooling)) + (weighted ? " weighted" : ""));
        auto const table = test::table_for(s.v, s.d);
        auto const call = random_call(s.v, s.bags, s.longest, std::uint64_t(s.v + s.d));
        BagOptions o;
        o.pooling = pooling;
        o.embedding.padding_idx = 0;
        Layer const layer(s.v, s.d, FloatsRef(table.data(), Shape{s.v, s.d}), o);
        IdsRef const ids(call.ids), offsets(call.offsets);
        auto const t = std::int64_t(call.ids.size());
        auto bounds = call.offsets;
        bounds.push_back(t);
        detail::BagViews<M> bags{
            {up(bounds), t}, weighted ? up(call.weights) : decltype(up(call.weights)){}, 0, pooling, s.bags};
        typename Layer::matrix_type y("y", s.bags, s.d);
        detail::bag_forward_shaped<false>(Space(), typename Layer::ids64_type(up(call.ids)), bags,
                                          layer.embedding().weight(), y);
        std::vector<float> got(std::size_t(s.bags * s.d));
        Kokkos::deep_copy(Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                              got.data(), s.bags, s.d),
                          y);
        reference::BagCall const ref{ids, make_bags(Shape{t}, &offsets, false),
                                     weighted ? call.weights.data() : nullptr};
        EXPECT_TRUE(same_bits(got, reference::bag_forward(table.data(), layer.config(), ref)));
      }
}

TEST(EmbeddingBag, ViewsGiveTheHostArraysBits) {
  auto const table = test::table_for(200, 20);
  auto const call = random_call(200, 64, 30, 11);
  BagOptions o;
  o.pooling = Pooling::sum;
  Layer const layer(200, 20, FloatsRef(table.data(), Shape{200, 20}), o);
  IdsRef const ids(call.ids), offsets(call.offsets);
  auto const t = std::int64_t(call.ids.size());
  auto const want = layer.forward(ids, &offsets, FloatsRef(call.weights.data(), Shape{t}));
  using M = typename Layer::memory_space;
  auto const up = [](auto const& v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    return Kokkos::create_mirror_view_and_copy(
        M(), Kokkos::View<T const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(v.data(), v.size()));
  };
  typename Layer::matrix_type y("y", 64, 20);
  Space space;
  layer.forward(space, typename Layer::ids64_type(up(call.ids)), up(call.offsets), y, up(call.weights));
  std::vector<float> got(64 * 20);
  Kokkos::deep_copy(
      Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(got.data(), 64, 20), y);
  EXPECT_TRUE(same_bits(got, want));
}

TEST(EmbeddingBag, MaxNormRenormalisesTheTableFirstAsEmbeddingDoes) {
  auto table = test::table_for(60, 9);
  for (auto& x : table) x *= 4.0f;
  auto const call = random_call(60, 40, 10, 5);
  BagOptions o;
  o.pooling = Pooling::sum;
  o.embedding.max_norm = 1.5;
  Layer const layer(60, 9, FloatsRef(table.data(), Shape{60, 9}), o);
  IdsRef const ids(call.ids), offsets(call.offsets);
  auto const y = layer.forward(ids, &offsets);
  reference::renorm(table.data(), layer.config().embedding, ids);
  EXPECT_TRUE(same_bits(layer.embedding().weight_host(), table));
  reference::BagCall const ref{ids, make_bags(Shape{std::int64_t(call.ids.size())}, &offsets, false)};
  EXPECT_TRUE(same_bits(y, reference::bag_forward(table.data(), layer.config(), ref)));
}

std::vector<float> dy_for(std::int64_t bags, std::int64_t d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> dy(std::size_t(bags * d));
  for (auto& x : dy) x = std::ldexp(float(std::int64_t(rng() % 4001) - 2000), -int(rng() % 12));
  return dy;
}

// Every pooling, with and without weights and a padding row, in every mode and plan,
// each scale_grad_by_freq, from a carry: the oracle's bits. Mode fast runs identical
// where terms have factors (as with scale_grad_by_freq), so it is checked there, and
// on one thread everywhere.
// (6 rows under ~300 positions: at 8 or more positions per row the scan plan tests
// its finished sums, not each term, another loop.)
TEST(EmbeddingBag, BackwardIsTheOracleForEveryPoolingPlanAndMode) {
  for (auto s : {Sizes{40, 8, 30, 12}, Sizes{500, 33, 120, 40}, Sizes{30, 5, 10, 0}, Sizes{6, 8, 60, 12}})
    for (auto pooling : {Pooling::sum, Pooling::mean, Pooling::max})
      for (bool weighted : {false, true})
        for (auto freq : {FreqScale::none, FreqScale::call, FreqScale::batch})
          for (auto mode : {Mode::identical, Mode::deterministic, Mode::fast})
            for (auto plan : {Plan::scan, Plan::sort, Plan::bucket, Plan::automatic}) {
              if ((weighted && pooling != Pooling::sum) || (freq != FreqScale::none && pooling == Pooling::max))
                continue;
              if (mode != Mode::identical && plan != Plan::automatic) continue;  // no plans to choose from
              // Mode fast is identical's bits on one thread (and atomic order on more).
              if (mode == Mode::fast && Space().concurrency() > 1 && freq == FreqScale::none && !weighted &&
                  pooling != Pooling::mean)
                continue;
              auto const table = test::table_for(s.v, s.d);
              auto const call = random_call(s.v, s.bags, s.longest, std::uint64_t(s.v + s.d));
              auto const t = std::int64_t(call.ids.size());
              auto const dy = dy_for(s.bags, s.d, 3), carry = dy_for(s.v, s.d, 4);
              BagOptions o;
              o.pooling = pooling;
              o.embedding.padding_idx = 1;
              o.embedding.mode = mode;
              o.embedding.plan = plan;
              o.embedding.scale_grad_by_freq = freq;
              Layer const layer(s.v, s.d, FloatsRef(table.data(), Shape{s.v, s.d}), o);
              IdsRef const ids(call.ids), offsets(call.offsets);
              auto batch = reference::counts(s.v, ids);
              for (auto& n : batch) n += 2;
              auto const* counts = freq == FreqScale::batch ? batch.data() : nullptr;
              FloatsRef const w = weighted ? FloatsRef(call.weights.data(), Shape{t}) : FloatsRef{};
              SCOPED_TRACE(std::to_string(s.v) + " " + std::string(to_string(pooling)) +
                           (weighted ? " weighted " : " ") + std::string(to_string(freq)) + " " +
                           std::string(to_string(mode)) + " " + std::string(to_string(plan)));
              auto const got = layer.backward(ids, &offsets, FloatsRef(dy.data(), Shape{s.bags, s.d}), w,
                                              FloatsRef(carry.data(), Shape{s.v, s.d}), counts);
              reference::BagCall const ref{ids, make_bags(Shape{t}, &offsets, false),
                                           weighted ? call.weights.data() : nullptr};
              auto const f = mode == Mode::deterministic ? reference::bag_backward_deterministic
                                                         : reference::bag_backward_identical;
              EXPECT_TRUE(same_bits(got.values, f(table.data(), layer.config(), ref, dy.data(), carry.data(), counts)));
              EXPECT_EQ(got.counts, reference::counts(s.v, ids));
            }
}

// The bucket plan folds terms with factors (mean, weights) on each of its paths:
// rows started at their first term (no carry), from a carry in scratch memory, a
// sparse bucket's few rows in the gradient itself, and on 2+ threads a hot bucket's
// rows dealt to parts. Buckets on the host hold 1,024 rows at d = 64: 89% of the
// positions fall in bucket 0's first 64 rows, 10% in bucket 1, 1% on ten rows of
// bucket 4 (sparse), none in 2 and 3. dy's zeros with weights < 0 make terms of -0.0,
// which start a row at +0.0 (fma(-0.0, s, +0.0)), as the fold from +0.0 does.
TEST(EmbeddingBag, TheBucketPlanFoldsFactorsOnEveryPath) {
  std::int64_t const v = 5000, d = 64, bags = 240;
  auto const table = test::table_for(v, d);
  std::mt19937_64 rng(17);
  Call call;
  for (std::int64_t b = 0; b < bags; ++b) {
    call.offsets.push_back(std::int64_t(call.ids.size()));
    for (auto n = std::int64_t(rng() % 17); n > 0; --n) {
      auto const u = rng() % 100;
      call.ids.push_back(u < 89   ? std::int64_t(rng() % 64)
                         : u < 99 ? 1024 + std::int64_t(rng() % 1024)
                                  : 4096 + std::int64_t(rng() % 10));
      call.weights.push_back(float(std::int64_t(rng() % 2001) - 1000) / 256.0f);
    }
  }
  auto const t = std::int64_t(call.ids.size());
  auto dy = dy_for(bags, d, 8);
  for (std::size_t i = 0; i < dy.size(); i += 7) dy[i] = 0.0f;
  auto const carry = dy_for(v, d, 9);
  IdsRef const ids(call.ids), offsets(call.offsets);
  for (bool weighted : {false, true})
    for (bool with_carry : {false, true}) {
      SCOPED_TRACE(std::string(weighted ? "weighted sum" : "mean") + (with_carry ? ", carry" : ""));
      BagOptions o;
      o.pooling = weighted ? Pooling::sum : Pooling::mean;
      o.embedding.padding_idx = 3;
      o.embedding.plan = Plan::bucket;
      Layer const layer(v, d, FloatsRef(table.data(), Shape{v, d}), o);
      ASSERT_EQ(layer.embedding().path_for(Space(), CallShape{t, bags, false, true}).plan, Plan::bucket);
      FloatsRef const w = weighted ? FloatsRef(call.weights.data(), Shape{t}) : FloatsRef{};
      FloatsRef const c = with_carry ? FloatsRef(carry.data(), Shape{v, d}) : FloatsRef{};
      reference::BagCall const ref{ids, make_bags(Shape{t}, &offsets, false), weighted ? call.weights.data() : nullptr};
      auto const got = layer.backward(ids, &offsets, FloatsRef(dy.data(), Shape{bags, d}), w, c);
      EXPECT_TRUE(same_bits(got.values, reference::bag_backward_identical(table.data(), layer.config(), ref, dy.data(),
                                                                          with_carry ? carry.data() : nullptr)));
      EXPECT_EQ(got.counts, reference::counts(v, ids));
    }
}

// The host's copies of the bag kernels and of the scaled folds (baseline, AVX2 with
// FMA: detail::run_for; and the forward's AVX-512 copy: detail::run_wide) give the
// oracle's bits, whichever the CPU picks (a copy the CPU lacks falls back to the
// best it has). d = 130: two 64-column register tiles and a narrow one; d = 64 and
// 128: one and two tiles, which have a loop of their own. The first call's bags
// average about 10 positions (d = 128 walks each tile on its own), the second's 80, the
// third's 2 (both tiles in registers, each bag walked once); the second's tables are
// past 32 MiB (rows fetched ahead into L2, not L1).
TEST(EmbeddingBag, EveryHostIsaCopyEqualsTheOracles) {
  struct Case {
    std::int64_t v, longest;
  };
  for (auto const [v, longest] : {Case{200, 25}, Case{66000, 200}, Case{300, 4}}) {
    std::int64_t const bags = 60;
    auto const call = random_call(v, bags, longest, 13);
    auto const t = std::int64_t(call.ids.size());
    IdsRef const ids(call.ids), offsets(call.offsets);
    for (std::int64_t const d : {130, 64, 128})
      for (char const* isa : {"baseline", "avx2", "avx512"})
        for (auto pooling : {Pooling::sum, Pooling::mean, Pooling::max}) {
          test::ScopedEnv env("KEMBED_HOST_ISA", isa);
          SCOPED_TRACE(std::string(isa) + " " + std::string(to_string(pooling)) + " d = " + std::to_string(d) +
                       " V = " + std::to_string(v));
          auto const table = test::table_for(v, d);
          auto const dy = dy_for(bags, d, 6);
          BagOptions o;
          o.pooling = pooling;
          o.embedding.padding_idx = 3;
          if (pooling == Pooling::mean) o.embedding.scale_grad_by_freq = FreqScale::call;
          Layer const layer(v, d, FloatsRef(table.data(), Shape{v, d}), o);
          bool const weighted = pooling == Pooling::sum;
          FloatsRef const w = weighted ? FloatsRef(call.weights.data(), Shape{t}) : FloatsRef{};
          reference::BagCall const ref{ids, make_bags(Shape{t}, &offsets, false),
                                       weighted ? call.weights.data() : nullptr};
          EXPECT_TRUE(
              same_bits(layer.forward(ids, &offsets, w), reference::bag_forward(table.data(), layer.config(), ref)));
          EXPECT_TRUE(
              same_bits(layer.backward(ids, &offsets, FloatsRef(dy.data(), Shape{bags, d}), w).values,
                        reference::bag_backward_identical(table.data(), layer.config(), ref, dy.data(), nullptr)));
        }
  }
}

// A sparse carry listing every third row.
SparseGradient sparse_carry_for(std::int64_t v, std::int64_t d, std::uint64_t seed) {
  auto const values = dy_for(v, d, seed);
  SparseGradient g;
  g.num_embeddings = v, g.embedding_dim = d;
  for (std::int64_t r = 0; r < v; r += 3) {
    g.rows.push_back(r);
    g.counts.push_back(1);
    g.values.insert(g.values.end(), values.begin() + r * d, values.begin() + (r + 1) * d);
  }
  return g;
}

// The row-sparse gradient lists the ids' rows and the carry's, each the dense
// oracle's row with to_dense(carry) as its carry; counts are this call's. Mode fast
// folds as identical here. The last size has only empty bags (no positions).
TEST(EmbeddingBag, SparseListsTheOraclesRowsForEveryPoolingAndMode) {
  for (auto s : {Sizes{40, 8, 30, 12}, Sizes{500, 33, 120, 40}, Sizes{30, 5, 10, 0}})
    for (auto pooling : {Pooling::sum, Pooling::mean, Pooling::max})
      for (bool weighted : {false, true})
        for (auto freq : {FreqScale::none, FreqScale::call, FreqScale::batch})
          for (auto mode : {Mode::identical, Mode::deterministic, Mode::fast}) {
            if ((weighted && pooling != Pooling::sum) || (freq != FreqScale::none && pooling == Pooling::max)) continue;
            auto const table = test::table_for(s.v, s.d);
            auto const call = random_call(s.v, s.bags, s.longest, std::uint64_t(s.v + s.d));
            auto const t = std::int64_t(call.ids.size());
            auto const dy = dy_for(s.bags, s.d, 3);
            auto const carry = sparse_carry_for(s.v, s.d, 4);
            BagOptions o;
            o.pooling = pooling;
            o.embedding.padding_idx = 1;
            o.embedding.mode = mode;
            o.embedding.scale_grad_by_freq = freq;
            Layer const layer(s.v, s.d, FloatsRef(table.data(), Shape{s.v, s.d}), o);
            IdsRef const ids(call.ids), offsets(call.offsets);
            auto batch = reference::counts(s.v, ids);
            for (auto& n : batch) n += 1;
            auto const* counts = freq == FreqScale::batch ? batch.data() : nullptr;
            FloatsRef const w = weighted ? FloatsRef(call.weights.data(), Shape{t}) : FloatsRef{};
            SCOPED_TRACE(std::to_string(s.v) + " " + std::string(to_string(pooling)) + (weighted ? " weighted " : " ") +
                         std::string(to_string(freq)) + " " + std::string(to_string(mode)));
            auto const got =
                layer.backward_sparse(ids, &offsets, FloatsRef(dy.data(), Shape{s.bags, s.d}), w, &carry, counts);
            reference::BagCall const ref{ids, make_bags(Shape{t}, &offsets, false),
                                         weighted ? call.weights.data() : nullptr};
            auto const f =
                mode == Mode::deterministic ? reference::bag_backward_deterministic : reference::bag_backward_identical;
            EXPECT_TRUE(same_bits(to_dense(got),
                                  f(table.data(), layer.config(), ref, dy.data(), to_dense(carry).data(), counts)));
            EXPECT_EQ(dense_counts(got), reference::counts(s.v, ids));
            std::set<std::int64_t> want(carry.rows.begin(), carry.rows.end());
            want.insert(call.ids.begin(), call.ids.end());
            EXPECT_EQ(got.rows, std::vector<std::int64_t>(want.begin(), want.end()));
          }
}

// One microbatch of whole bags: its ids, offsets, weights and dy.
struct Slice {
  std::vector<std::int64_t> ids, offsets;
  std::vector<float> weights, dy;
};
Slice slice(Call const& call, std::vector<float> const& dy, std::int64_t d, std::int64_t b0, std::int64_t b1) {
  auto const end = [&](std::int64_t b) {
    return b < std::int64_t(call.offsets.size()) ? call.offsets[std::size_t(b)] : std::int64_t(call.ids.size());
  };
  auto const p0 = end(b0), p1 = end(b1);
  Slice s;
  s.ids.assign(call.ids.begin() + p0, call.ids.begin() + p1);
  s.weights.assign(call.weights.begin() + p0, call.weights.begin() + p1);
  for (auto b = b0; b < b1; ++b) s.offsets.push_back(end(b) - p0);
  s.dy.assign(dy.begin() + b0 * d, dy.begin() + b1 * d);
  return s;
}

// Random splits into whole-bag microbatches, in order, each continuing the gradient:
// dense in place (views), sparse from the last result (host arrays), and sparse in
// place (views): each the oracle's bits (the unsplit gradient's in mode identical),
// with batch counts where they apply.
TEST(EmbeddingBag, RandomWholeBagSplitsWithCarriesGiveTheUnsplitGradient) {
  std::int64_t const v = 300, d = 17, bags = 90;
  auto const table = test::table_for(v, d);
  auto const call = random_call(v, bags, 20, 9);
  auto const dy = dy_for(bags, d, 5);
  IdsRef const all(call.ids), all_offsets(call.offsets);
  auto const t = std::int64_t(call.ids.size());
  auto const batch = reference::counts(v, all);
  using M = typename Layer::memory_space;
  auto const up = [](auto const& x) {
    using T = typename std::decay_t<decltype(x)>::value_type;
    return Kokkos::create_mirror_view_and_copy(
        M(), Kokkos::View<T const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(x.data(), x.size()));
  };
  auto const batch_d = up(batch);
  std::mt19937_64 rng(17);
  Space space;
  for (auto pooling : {Pooling::sum, Pooling::mean, Pooling::max})
    for (auto mode : {Mode::identical, Mode::deterministic}) {
      BagOptions o;
      o.pooling = pooling;
      o.embedding.mode = mode;
      o.embedding.padding_idx = 2;
      if (pooling != Pooling::max) o.embedding.scale_grad_by_freq = FreqScale::batch;
      Layer const layer(v, d, FloatsRef(table.data(), Shape{v, d}), o);
      bool const weighted = pooling == Pooling::sum;
      auto const* counts = pooling != Pooling::max ? batch.data() : nullptr;
      typename Layer::batch_counts_type batch_view;
      if (counts) batch_view = batch_d;
      reference::BagCall const ref{all, make_bags(Shape{t}, &all_offsets, false),
                                   weighted ? call.weights.data() : nullptr};
      auto const f =
          mode == Mode::deterministic ? reference::bag_backward_deterministic : reference::bag_backward_identical;
      std::vector<std::int64_t> cuts{0, bags};
      for (int k = 0; k < 4; ++k) cuts.push_back(std::int64_t(rng() % std::uint64_t(bags + 1)));
      std::sort(cuts.begin(), cuts.end());
      // Identical: the unsplit gradient. Deterministic sums each call's terms as a
      // tree, then adds the carry: the oracle continued call by call.
      auto want = f(table.data(), layer.config(), ref, dy.data(), nullptr, counts);
      if (mode == Mode::deterministic) {
        std::fill(want.begin(), want.end(), 0.0f);
        for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
          auto const s = slice(call, dy, d, cuts[k], cuts[k + 1]);
          IdsRef const ids(s.ids), offsets(s.offsets);
          reference::BagCall const part{ids, make_bags(Shape{std::int64_t(s.ids.size())}, &offsets, false),
                                        weighted ? s.weights.data() : nullptr};
          want = f(table.data(), layer.config(), part, s.dy.data(), want.data(), counts);
        }
      }
      SCOPED_TRACE(std::string(to_string(pooling)) + " " + std::string(to_string(mode)) + " cuts " +
                   std::to_string(cuts[1]) + " " + std::to_string(cuts[2]) + " " + std::to_string(cuts[3]));
      typename Layer::matrix_type grad("grad", v, d);
      auto in_place = layer.sparse_carry(space);
      SparseGradient chained;
      for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
        auto const s = slice(call, dy, d, cuts[k], cuts[k + 1]);
        auto const n = std::int64_t(s.offsets.size());
        typename Layer::ids64_type const ids_d = up(s.ids);
        typename Layer::weights_type w_d;
        if (weighted) w_d = up(s.weights);
        auto const dy_d = Kokkos::create_mirror_view_and_copy(
            M(), Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                     s.dy.data(), n, d));
        layer.backward(space, ids_d, up(s.offsets), dy_d, grad, grad, {}, w_d, batch_view);
        layer.backward_sparse(space, ids_d, up(s.offsets), dy_d, in_place, w_d, batch_view);
        IdsRef const ids(s.ids), offsets(s.offsets);
        auto const w = weighted ? FloatsRef(s.weights.data(), Shape{std::int64_t(s.ids.size())}) : FloatsRef{};
        chained = layer.backward_sparse(ids, &offsets, FloatsRef(s.dy.data(), Shape{n, d}), w,
                                        k == 0 ? nullptr : &chained, counts);
      }
      std::vector<float> dense(std::size_t(v * d));
      Kokkos::deep_copy(
          Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(dense.data(), v, d),
          grad);
      EXPECT_TRUE(same_bits(dense, want)) << "dense in place";
      EXPECT_TRUE(same_bits(to_dense(chained), want)) << "sparse chained";
      EXPECT_TRUE(same_bits(to_dense(Layer::embedding_type::to_host(space, layer.listed(space, in_place), v)), want))
          << "sparse in place";
    }
}

TEST(EmbeddingBag, PerSampleWeightsGradientIsTheOracles) {
  auto const table = test::table_for(120, 19);
  auto const call = random_call(120, 50, 25, 21);
  auto const dy = dy_for(50, 19, 8);
  BagOptions o;
  o.pooling = Pooling::sum;
  o.embedding.padding_idx = 0;
  Layer const layer(120, 19, FloatsRef(table.data(), Shape{120, 19}), o);
  IdsRef const ids(call.ids), offsets(call.offsets);
  reference::BagCall const ref{ids, make_bags(Shape{std::int64_t(call.ids.size())}, &offsets, false),
                               call.weights.data()};
  EXPECT_TRUE(same_bits(layer.per_sample_weights_backward(ids, &offsets, FloatsRef(dy.data(), Shape{50, 19})),
                        reference::bag_weights_grad(table.data(), layer.config(), ref, dy.data())));
  o.pooling = Pooling::mean;
  Layer const mean(120, 19, FloatsRef(table.data(), Shape{120, 19}), o);
  try {
    mean.per_sample_weights_backward(ids, &offsets, FloatsRef(dy.data(), Shape{50, 19}));
    ADD_FAILURE() << "mode mean has no weights to differentiate";
  } catch (InvalidArgument const& e) {
    EXPECT_EQ(e.argument(), "per_sample_weights");
  }
}

// EmbeddingBag's own kernels and regions, seen through Kokkos Tools: the pooled
// forward, the terms the backward folds (each position's bag, each term's factor, and
// the weights' gradient). Here, not in test_labels.cpp: a device binary holds each
// translation unit's kernels apart, and the bag's would be there twice.
std::set<std::string> bag_kernels, bag_regions;
void on_bag_kernel(char const* name, std::uint32_t, std::uint64_t*) {
  bag_kernels.insert(name);
}
void on_bag_region(char const* name) {
  bag_regions.insert(name);
}

TEST(EmbeddingBag, KernelsAndRegionsAreNamedKembed) {
  std::int64_t const v = 50, d = 3;
  auto const table = test::table_for(v, d);
  std::vector<std::int64_t> const ids{1, 4, 4, 9, 0, 2}, offsets{0, 2, 2, 5};
  std::vector<float> const dy(4 * d, 0.5f), w(ids.size(), 2.0f);
  IdsRef const i(ids), o(offsets);
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(on_bag_kernel);
  Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(on_bag_kernel);
  Kokkos::Tools::Experimental::set_begin_parallel_scan_callback(on_bag_kernel);
  Kokkos::Tools::Experimental::set_push_region_callback(on_bag_region);
  for (auto pooling : {Pooling::sum, Pooling::mean, Pooling::max}) {
    BagOptions opt;
    opt.pooling = pooling;
    if (pooling == Pooling::mean) opt.embedding.scale_grad_by_freq = FreqScale::call;
    Layer const bags(v, d, FloatsRef(table.data(), Shape{v, d}), opt);
    FloatsRef const weights = pooling == Pooling::sum ? FloatsRef(w.data(), Shape{6}) : FloatsRef{};
    bags.forward(i, &o, weights);
    bags.backward(i, &o, FloatsRef(dy.data(), Shape{4, d}), weights);
    bags.backward_sparse(i, &o, FloatsRef(dy.data(), Shape{4, d}), weights);
    if (pooling == Pooling::sum) bags.per_sample_weights_backward(i, &o, FloatsRef(dy.data(), Shape{4, d}));
  }
  Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_parallel_scan_callback(nullptr);
  Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
  for (auto const& name : bag_kernels)
    if (name.rfind("Kokkos::", 0) != 0) EXPECT_EQ(name.rfind("kembed::", 0), 0u) << "unlabelled kernel: " << name;
  for (char const* want : {"kembed::bag_forward", "kembed::bag_of", "kembed::bag_scales", "kembed::bag_weights_grad"})
    EXPECT_EQ(bag_kernels.count(want), 1u) << "kernel never seen: " << want;
  for (char const* want : {"kembed::bag_forward", "kembed::bag_backward", "kembed::bag_backward_sparse[identical]",
                           "kembed::bag_weights_backward"})
    EXPECT_EQ(bag_regions.count(want), 1u) << "region never seen: " << want;
}

// From 8 MiB of gradient and a position per row the scan's threads own whole rows in
// runs of 1 MiB, folding into the gradient (detail::scan_split), testing each finished sum from 8
// positions per row: sum, mean and weighted, the padding row in the second run, the
// last run short, counts and a carry give the oracle's bits on every thread count;
// a NaN term is found where it is, the carry untouched.
TEST(EmbeddingBag, TheScanInRunsOfRowsIsTheOracle) {
  std::int64_t const v = 33000, d = 64, bags = 1024, per_bag = 258;  // 8.4 MB, 8 positions per row
  ASSERT_TRUE(detail::scan_split(2, v, d, bags * per_bag).runs);
  ASSERT_EQ(detail::scan_split(2, v, d, bags * per_bag).run_shift, 12);  // runs of 4,096 rows: 9, the last of 232
  std::mt19937_64 rng(11);
  Call call;
  for (std::int64_t b = 0; b < bags; ++b) {
    call.offsets.push_back(b * per_bag);
    for (std::int64_t i = 0; i < per_bag; ++i)  // a quarter on 64 hot rows, the rest anywhere
      call.ids.push_back(std::int64_t(rng() % 4 == 0 ? rng() % 64 : rng() % std::uint64_t(v)));
  }
  std::int64_t const t = bags * per_bag;
  for (std::int64_t p = 0; p < t; ++p) call.weights.push_back(float(std::int64_t(rng() % 2001) - 1000) / 256.0f);
  ASSERT_GE(t / 8, v);
  auto const table = test::table_for(v, d);
  auto dy = dy_for(bags, d, 5);
  auto const carry = dy_for(v, d, 6);
  IdsRef const ids(call.ids), offsets(call.offsets);
  for (auto pooling : {Pooling::sum, Pooling::mean})
    for (bool weighted : {false, true}) {
      if (weighted && pooling != Pooling::sum) continue;
      SCOPED_TRACE(std::string(to_string(pooling)) + (weighted ? " weighted" : ""));
      BagOptions o;
      o.pooling = pooling;
      o.embedding.padding_idx = 4100;
      o.embedding.plan = Plan::scan;
      Layer const layer(v, d, FloatsRef(table.data(), Shape{v, d}), o);
      FloatsRef const w = weighted ? FloatsRef(call.weights.data(), Shape{t}) : FloatsRef{};
      auto const got =
          layer.backward(ids, &offsets, FloatsRef(dy.data(), Shape{bags, d}), w, FloatsRef(carry.data(), Shape{v, d}));
      reference::BagCall const ref{ids, make_bags(Shape{t}, &offsets, false), weighted ? call.weights.data() : nullptr};
      EXPECT_TRUE(same_bits(
          got.values, reference::bag_backward_identical(table.data(), layer.config(), ref, dy.data(), carry.data())));
      EXPECT_EQ(got.counts, reference::counts(v, ids));
    }
  // A NaN in the last bag, whose rows lie in every run.
  dy[std::size_t((bags - 1) * d + 7)] = std::nanf("");
  auto const carry_before = carry;
  BagOptions o;
  o.embedding.plan = Plan::scan;
  Layer const layer(v, d, FloatsRef(table.data(), Shape{v, d}), o);
  try {
    layer.backward(ids, &offsets, FloatsRef(dy.data(), Shape{bags, d}), FloatsRef{},
                   FloatsRef(carry.data(), Shape{v, d}));
    ADD_FAILURE() << "a NaN in dy was taken";
  } catch (NonFinite const& e) {
    EXPECT_NE(std::string(e.what()).find("dy holds NaN"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(bags - 1)), std::string::npos) << e.what();
  }
  EXPECT_TRUE(same_bits(carry, carry_before));
}

// `auto` weighs a bag call by its dy rows (bags), not its positions: at 2-4 threads a
// call with 8 positions per table row in 512 bags of 128 scans, with factors (mean) or
// without (sum), while an unpooled call of as many positions sorts, and 512 bags of 8
// (under 16 per bag) take the bucket plan. The region names the plan run.
TEST(EmbeddingBag, AutoPlanWeighsBagsNotPositions) {
  std::int64_t const v = 8200, d = 64;  // a 2.1 MB gradient
  auto const dy = dy_for(512, d, 3);
  bool const host = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space::memory_space>::accessible;
  auto const threads = Space().concurrency();
  std::int64_t const bags = 512;
  for (std::int64_t const per_bag : {128, 8}) {
    std::int64_t const t = per_bag == 128 ? 8 * v : per_bag * bags;
    std::vector<std::int64_t> ids(static_cast<std::size_t>(t)), offsets(static_cast<std::size_t>(bags));
    for (std::int64_t p = 0; p < t; ++p) ids[std::size_t(p)] = (p * 7919) % v;
    for (std::int64_t b = 0; b < bags; ++b) offsets[std::size_t(b)] = b * (t / bags);
    for (Pooling const pooling : {Pooling::mean, Pooling::sum}) {
      SCOPED_TRACE(std::string(to_string(pooling)) + ", bags of " + std::to_string(t / bags));
      bool const factors = pooling == Pooling::mean;
      Plan const want = detail::auto_plan(host, threads, v, d, t, bags, factors);
      if (host && threads >= 2 && threads <= 4) {
        EXPECT_EQ(want, per_bag == 128 ? Plan::scan : Plan::bucket);
        if (per_bag == 128) EXPECT_EQ(detail::auto_plan(host, threads, v, d, t), Plan::sort);
      }
      BagOptions o;  // plan auto
      o.pooling = pooling;
      auto const layer = Layer::backward_only(Space(), v, d, o);
      IdsRef const i(ids), off(offsets);
      bag_regions.clear();
      Kokkos::Tools::Experimental::set_push_region_callback(on_bag_region);
      auto const got = layer.backward(i, &off, FloatsRef(dy.data(), Shape{bags, d}));
      Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
      std::string const region = std::string("kembed::backward[identical,") + std::string(to_string(want)) + "]";
      EXPECT_EQ(bag_regions.count(region), 1u) << "region never seen: " << region;
      EXPECT_EQ(layer.embedding().path_for(Space(), CallShape{t, bags, false, factors}).plan, want);
    }
  }
}

// max in mode identical with plan auto on a host adds only each (bag, column)'s
// winning term (backward_argmax): the sort plan's bits, from a carry, in place, with a
// padding row, empty bags and signed zeros; its region is the one that ran.
TEST(EmbeddingBag, MaxAddsOnlyTheWinnersWithTheFoldsBits) {
  std::int64_t const v = 300, d = 37, bags = 400;
  auto const table = test::table_for(v, d);
  auto const call = random_call(v, bags, 40, 11);
  auto const t = std::int64_t(call.ids.size());
  auto const dy = dy_for(bags, d, 5), carry = dy_for(v, d, 6);
  bool const host = detail::Tiles<Space>::host;
  BagOptions o;
  o.pooling = Pooling::max;
  o.embedding.padding_idx = 1;
  Layer const fast(v, d, FloatsRef(table.data(), Shape{v, d}), o);
  o.embedding.plan = Plan::sort;
  Layer const folded(v, d, FloatsRef(table.data(), Shape{v, d}), o);
  IdsRef const ids(call.ids), offsets(call.offsets);
  EXPECT_EQ(fast.embedding().path_for(Space(), CallShape{t, bags, false, false, true}).argmax, host);
  EXPECT_FALSE(folded.embedding().path_for(Space(), CallShape{t, bags, false, false, true}).argmax);
  for (bool with_carry : {false, true}) {
    FloatsRef const c = with_carry ? FloatsRef(carry.data(), Shape{v, d}) : FloatsRef{};
    bag_regions.clear();
    Kokkos::Tools::Experimental::set_push_region_callback(on_bag_region);
    auto const got = fast.backward(ids, &offsets, FloatsRef(dy.data(), Shape{bags, d}), {}, c);
    Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
    auto const want = folded.backward(ids, &offsets, FloatsRef(dy.data(), Shape{bags, d}), {}, c);
    EXPECT_TRUE(same_bits(got.values, want.values)) << "carry " << with_carry;
    EXPECT_EQ(got.counts, want.counts);
    EXPECT_EQ(bag_regions.count("kembed::backward[identical,argmax]"), host ? 1u : 0u);
  }
  // In place, as the job continues its gradient: the carry's view is the output.
  using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Space::memory_space>;
  auto upload = [&](std::vector<float> const& h, std::int64_t rows) {
    Matrix m("m", rows, d);
    Kokkos::deep_copy(m, Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                             h.data(), rows, d));
    return m;
  };
  auto const ids_d = Kokkos::create_mirror_view_and_copy(
      Space::memory_space(),
      Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(call.ids.data(), t));
  auto const off_d = Kokkos::create_mirror_view_and_copy(
      Space::memory_space(),
      Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(call.offsets.data(), bags));
  std::vector<float> results[2];
  for (int k = 0; k < 2; ++k) {
    Layer const& layer = k == 0 ? fast : folded;
    auto const g = upload(carry, v);
    layer.backward(Space(), ids_d, off_d, upload(dy, bags), g, g);
    auto const h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g);
    results[k].assign(h.data(), h.data() + v * d);
  }
  EXPECT_TRUE(same_bits(results[0], results[1])) << "in place";
}

// The forward's argmax handed to the backward: each value's position (the lowest of a
// tie, -1 for a bag with none that counts), and every backward taking it gives the bits
// of one that finds it again, on every plan, without the table; one that names no
// position of its bag that counts is refused by name with nothing written.
TEST(EmbeddingBag, TheForwardsArgmaxGivesTheBackwardTheSameBits) {
  std::int64_t const v = 60, d = 19, bags = 150;
  auto table = test::table_for(v, d);
  for (std::int64_t r = 0; r < v; r += 7)  // ties across rows: the lowest position keeps them
    for (std::int64_t c = 0; c < d; c += 3) table[std::size_t(r * d + c)] = 0.5f;
  auto const call = random_call(v, bags, 12, 23);
  auto const t = std::int64_t(call.ids.size());
  auto const dy = dy_for(bags, d, 7);
  using M = typename Layer::memory_space;
  auto const dev = [](auto const& h) {
    using T = typename std::decay_t<decltype(h)>::value_type;
    return Kokkos::create_mirror_view_and_copy(
        M(), Kokkos::View<T const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(h.data(), h.size()));
  };
  auto const host = [](auto const& view) {
    auto const h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
    return std::vector<std::remove_const_t<typename decltype(h)::value_type>>(h.data(), h.data() + h.size());
  };
  Space space;
  typename Layer::ids64_type const ids(dev(call.ids));
  auto const offsets = dev(call.offsets);
  typename Layer::const_matrix_type const dy_d(Kokkos::create_mirror_view_and_copy(
      M(), Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(dy.data(), bags,
                                                                                                        d)));
  BagOptions o;
  o.pooling = Pooling::max;
  o.embedding.padding_idx = 1;
  Layer const layer(v, d, FloatsRef(table.data(), Shape{v, d}), o);
  typename Layer::matrix_type y("y", bags, d);
  typename Layer::argmax_type argmax("argmax", bags, d);
  layer.forward(space, ids, offsets, y, {}, argmax);
  IdsRef const ids_ref(call.ids), off_ref(call.offsets);
  EXPECT_TRUE(same_bits(host(y), layer.forward(ids_ref, &off_ref)));
  auto const won = host(argmax);
  for (std::int64_t b = 0; b < bags; ++b) {  // the oracle: strictly greater, positions ascending
    std::int64_t const end = b + 1 < bags ? call.offsets[std::size_t(b + 1)] : t;
    for (std::int64_t c = 0; c < d; ++c) {
      std::int64_t want = -1;
      for (std::int64_t p = call.offsets[std::size_t(b)]; p < end; ++p) {
        auto const r = call.ids[std::size_t(p)];
        if (r != 1 &&
            (want < 0 || table[std::size_t(r * d + c)] > table[std::size_t(call.ids[std::size_t(want)] * d + c)]))
          want = p;
      }
      ASSERT_EQ(won[std::size_t(b * d + c)], want) << "bag " << b << " column " << c;
    }
  }
  typename Layer::const_argmax_type const given = argmax;
  auto dense = [&](Layer const& l, typename Layer::const_argmax_type const& a) {
    typename Layer::matrix_type g("g", v, d);
    l.backward(space, ids, offsets, dy_d, g, {}, {}, {}, {}, a);
    return host(g);
  };
  auto const want = dense(layer, {});
  EXPECT_TRUE(same_bits(dense(layer, given), want));
  o.embedding.plan = Plan::sort;  // a fold reads the given argmax too
  EXPECT_TRUE(same_bits(dense(Layer(v, d, FloatsRef(table.data(), Shape{v, d}), o), given), want));
  o.embedding.plan = Plan::automatic;
  auto const bare = Layer::backward_only(space, v, d, o);  // no table: the argmax is all max needs
  EXPECT_TRUE(same_bits(dense(bare, given), want));
  auto const sparse = layer.backward_sparse(space, ids, offsets, dy_d, {}, {}, {}, given);
  auto const sparse_want = layer.backward_sparse(space, ids, offsets, dy_d);
  EXPECT_EQ(host(sparse.rows), host(sparse_want.rows));
  EXPECT_TRUE(same_bits(host(sparse.values), host(sparse_want.values)));
  auto carry = layer.sparse_carry(space);
  layer.backward_sparse(space, ids, offsets, dy_d, carry, {}, {}, given);
  EXPECT_TRUE(same_bits(host(layer.listed(space, carry).values), host(sparse_want.values)));

  // Refused by name, nothing written: a position outside its bag, -1 for a bag that
  // has one, the padding row's position, the wrong shape, a mode without an argmax.
  std::int64_t full = 0, padded = -1;  // a bag with a position that counts; the padding row's first position
  while (won[std::size_t(full * d)] < 0) ++full;
  for (std::int64_t p = 0; p < t && padded < 0; ++p)
    if (call.ids[std::size_t(p)] == 1) padded = p;
  ASSERT_GE(padded, 0);
  typename Layer::matrix_type g("g", v, d);
  Kokkos::deep_copy(g, 3.0f);
  auto const refused = [&](std::vector<std::int64_t> const& bad, std::int64_t rows, Layer const& l) {
    typename Layer::const_argmax_type const a(Kokkos::create_mirror_view_and_copy(
        M(), Kokkos::View<std::int64_t const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                 bad.data(), rows, d)));
    try {
      l.backward(space, ids, offsets, dy_d, g, {}, {}, {}, {}, a);
      ADD_FAILURE() << "a bad argmax was taken";
    } catch (InvalidArgument const& e) {
      EXPECT_EQ(e.argument(), "argmax") << e.what();
    }
    for (float x : host(g)) ASSERT_EQ(x, 3.0f) << "the gradient was written";
  };
  auto edit = [&](std::int64_t at, std::int64_t value) {
    auto w = won;
    w[std::size_t(at)] = value;
    return w;
  };
  refused(edit(full * d, call.offsets[std::size_t(full)] - 1), bags, layer);
  refused(edit(full * d + 1, -1), bags, layer);
  refused(
      edit((std::upper_bound(call.offsets.begin(), call.offsets.end(), padded) - call.offsets.begin() - 1) * d, padded),
      bags, layer);
  refused(std::vector<std::int64_t>(std::size_t((bags - 1) * d), -1), bags - 1, layer);
  o.pooling = Pooling::sum;
  refused(won, bags, Layer(v, d, FloatsRef(table.data(), Shape{v, d}), o));
  try {
    Layer(v, d, FloatsRef(table.data(), Shape{v, d}), o).forward(space, ids, offsets, y, {}, argmax);
    ADD_FAILURE() << "sum recorded an argmax";
  } catch (InvalidArgument const& e) {
    EXPECT_EQ(e.argument(), "argmax") << e.what();
  }
}

// over() works on the caller's table (max_norm writes it); backward_only() folds
// without one, and refuses what needs the table by name.
TEST(EmbeddingBag, OverTheCallersTableAndBackwardOnly) {
  std::int64_t const v = 30, d = 5;
  auto table = test::table_for(v, d);
  for (auto& x : table) x *= 3.0f;
  std::vector<std::int64_t> const ids{1, 4, 4, 9, 0, 2}, offsets{0, 2, 2, 5};
  std::vector<float> const dy(4 * d, 0.25f);
  IdsRef const i(ids), o(offsets);
  BagOptions opt;
  opt.pooling = Pooling::sum;
  opt.embedding.max_norm = 1.0;
  Layer const copied(v, d, FloatsRef(table.data(), Shape{v, d}), opt);
  auto const table_d = Kokkos::create_mirror_view_and_copy(
      typename Layer::memory_space(),
      Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(table.data(), v, d));
  auto const over = Layer::over(Space(), table_d, opt);
  EXPECT_TRUE(same_bits(over.forward(i, &o), copied.forward(i, &o)));
  std::vector<float> renormed(std::size_t(v * d));
  Kokkos::deep_copy(
      Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(renormed.data(), v, d),
      table_d);
  EXPECT_TRUE(same_bits(renormed, copied.embedding().weight_host()));  // the caller's table, renormalised
  auto const bare = Layer::backward_only(Space(), v, d, opt);
  FloatsRef const g(dy.data(), Shape{4, d});
  EXPECT_TRUE(same_bits(bare.backward(i, &o, g).values, copied.backward(i, &o, g).values));
  for (auto const& refused : std::vector<std::function<void()>>{[&] { bare.forward(i, &o); },
                                                                [&] { bare.per_sample_weights_backward(i, &o, g); }}) {
    try {
      refused();
      ADD_FAILURE() << "a layer without a table ran what needs one";
    } catch (Unsupported const& e) {
      EXPECT_EQ(e.argument(), "weight");
    }
  }
  opt.pooling = Pooling::max;
  auto const bare_max = Layer::backward_only(Space(), v, d, opt);
  EXPECT_THROW(bare_max.backward(i, &o, g), Unsupported);
}

TEST(EmbeddingBag, RefusalsNameTheArgumentAndWriteNothing) {
  auto const table = test::table_for(10, 4);
  BagOptions o;
  o.pooling = Pooling::mean;
  Layer const layer(10, 4, FloatsRef(table.data(), Shape{10, 4}), o);
  std::vector<std::int64_t> ids{1, 2, 10, 3}, offsets{0, 2};
  std::vector<float> w{1, 1, 1, 1};
  using M = typename Layer::memory_space;
  typename Layer::matrix_type y("y", 2, 4);
  Kokkos::deep_copy(y, 7.0f);
  auto const dev = [](auto& v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    return Kokkos::create_mirror_view_and_copy(
        M(), Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(v.data(), v.size()));
  };
  auto const named = [&](char const* argument, auto&& f) {
    try {
      f();
      ADD_FAILURE() << "nothing refused, want " << argument;
    } catch (Error const& e) {
      EXPECT_EQ(e.argument(), argument) << e.what();
    }
    auto const h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y);
    for (std::size_t i = 0; i < h.size(); ++i) ASSERT_EQ(h.data()[i], 7.0f) << argument << ": y was written";
  };
  Space space;
  auto const ids_d = typename Layer::ids64_type(dev(ids));
  named("ids", [&] { layer.forward(space, ids_d, dev(offsets), y); });
  ids[2] = 4;
  auto const good = typename Layer::ids64_type(dev(ids));
  std::vector<std::int64_t> bad_offsets{0, 5};
  named("offsets", [&] { layer.forward(space, good, dev(bad_offsets), y); });
  named("per_sample_weights", [&] { layer.forward(space, good, dev(offsets), y, dev(w)); });
  // The sparse carry, continued in place, is not changed by a refused call.
  auto carry = layer.sparse_carry(space);
  std::vector<float> dy(8, 1.0f);
  auto const dy_d = Kokkos::create_mirror_view_and_copy(
      M(),
      Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(dy.data(), 2, 4));
  std::vector<std::int64_t> past_v{1, 2, 10, 3};
  named("ids",
        [&] { layer.backward_sparse(space, typename Layer::ids64_type(dev(past_v)), dev(offsets), dy_d, carry); });
  dy[5] = std::nanf("");
  auto const nan_d = Kokkos::create_mirror_view_and_copy(
      M(),
      Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(dy.data(), 2, 4));
  named("dy", [&] { layer.backward_sparse(space, good, dev(offsets), nan_d, carry); });
  EXPECT_EQ(layer.listed(space, carry).rows.extent(0), 0u);
  typename Layer::matrix_type wrong("wrong", 3, 4);
  try {
    layer.forward(space, good, dev(offsets), wrong);
    ADD_FAILURE() << "a y of the wrong shape was taken";
  } catch (Error const& e) {
    EXPECT_EQ(e.argument(), "y");
  }
}

}  // namespace
}  // namespace kembed
