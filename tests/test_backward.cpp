// The backward against the oracle, bit for bit, on every input of the catalogue,
// with every plan and mode, on the backend this binary is built for.
#include "support/test_support.hpp"

#include <kembed/core/reference.hpp>
#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>

#include <algorithm>
#include <cmath>

namespace kembed {
namespace {

using Layer = Embedding<TEST_EXECSPACE>;
using test::Batch;
using test::Input;
using test::IdsHolder;
using test::same_bits;
using test::same_values;
using HostMatrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
using ConstHostMatrix = Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;

}  // namespace
// Short names in test listings.
inline void PrintTo(Plan plan, std::ostream* os) {
  *os << to_string(plan);
}
namespace {

constexpr Plan all_plans[] = {Plan::scan, Plan::sort, Plan::bucket, Plan::automatic};

class Catalogue : public ::testing::TestWithParam<Input> {};

Layer layer_for(Batch const& b, Plan plan, Mode mode, std::vector<float> const& table) {
  return Layer(b.rows, b.dim, FloatsRef(table.data(), Shape{b.rows, b.dim}), b.options(plan, mode));
}

TEST_P(Catalogue, IdenticalEveryPlanEqualsTheOracle) {
  auto const& b = GetParam().batch();
  IdsHolder ids(b);
  auto const table = test::table_for(b.rows, b.dim);
  auto const want = reference::backward_identical(b.config(), ids.ref(), b.dy.data(), nullptr);
  auto const want_counts = reference::counts(b.rows, ids.ref());
  for (auto plan : all_plans) {
    SCOPED_TRACE(std::string("plan ") + std::string(to_string(plan)));
    auto const got =
        layer_for(b, plan, Mode::identical, table).backward(ids.ref(), FloatsRef(b.dy.data(), b.dy_shape()));
    EXPECT_TRUE(same_bits(got.values, want));
    EXPECT_TRUE(same_values(got.counts, want_counts));
  }
}

// The host folds exist as a baseline (SSE2) copy and an AVX2 copy on x86-64
// (detail::run_for); both must give the oracle's bits, whichever the CPU would pick.
TEST_P(Catalogue, BothHostIsaCopiesEqualTheOracles) {
  auto const& b = GetParam().batch();
  IdsHolder ids(b);
  auto const table = test::table_for(b.rows, b.dim);
  auto const identical = reference::backward_identical(b.config(), ids.ref(), b.dy.data(), nullptr);
  auto const deterministic = reference::backward_deterministic(b.config(), ids.ref(), b.dy.data(), nullptr);
  for (char const* isa : {"baseline", "avx2"}) {
    test::ScopedEnv env("KEMBED_HOST_ISA", isa);
    for (auto plan : all_plans) {
      SCOPED_TRACE(std::string(isa) + ", plan " + std::string(to_string(plan)));
      FloatsRef const dy(b.dy.data(), b.dy_shape());
      EXPECT_TRUE(same_bits(layer_for(b, plan, Mode::identical, table).backward(ids.ref(), dy).values, identical));
      EXPECT_TRUE(
          same_bits(layer_for(b, plan, Mode::deterministic, table).backward(ids.ref(), dy).values, deterministic));
    }
  }
}

TEST_P(Catalogue, DeterministicEveryPlanEqualsThePairwiseOracle) {
  auto const& b = GetParam().batch();
  IdsHolder ids(b);
  auto const table = test::table_for(b.rows, b.dim);
  auto const want = reference::backward_deterministic(b.config(), ids.ref(), b.dy.data(), nullptr);
  for (auto plan : all_plans) {
    SCOPED_TRACE(std::string("plan ") + std::string(to_string(plan)));
    auto const got =
        layer_for(b, plan, Mode::deterministic, table).backward(ids.ref(), FloatsRef(b.dy.data(), b.dy_shape()));
    EXPECT_TRUE(same_bits(got.values, want));
  }
}

// The suite's only tolerance. Any order of n additions lies within
// n * 2^-24 * sum|terms| of the exact sum, and so within twice that of the
// ascending fold. On Serial the atomic adds run in ascending order: bit-equal.
TEST_P(Catalogue, FastIsWithinTheSummationBoundAndExactOnSerial) {
  auto const& b = GetParam().batch();
  IdsHolder ids(b);
  auto const table = test::table_for(b.rows, b.dim);
  auto const want = reference::backward_identical(b.config(), ids.ref(), b.dy.data(), nullptr);
  auto const got =
      layer_for(b, Plan::automatic, Mode::fast, table).backward(ids.ref(), FloatsRef(b.dy.data(), b.dy_shape()));
  EXPECT_TRUE(same_values(got.counts, reference::counts(b.rows, ids.ref())));
  if (std::is_same<TEST_EXECSPACE, Kokkos::DefaultHostExecutionSpace>::value && TEST_EXECSPACE().concurrency() == 1) {
    EXPECT_TRUE(same_bits(got.values, want));
  }
  std::vector<double> magnitude(want.size(), 0.0);
  std::vector<std::int64_t> terms(want.size(), 0);
  for (std::int64_t p = 0; p < b.positions(); ++p)
    for (std::int64_t c = 0; c < b.dim; ++c) {
      magnitude[b.ids[p] * b.dim + c] += std::fabs(double(b.dy[p * b.dim + c]));
      terms[b.ids[p] * b.dim + c] += 1;
    }
  std::size_t checked = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(want[i])) continue;  // overflow depends on the order: only finite sums have a bound
    double const bound = 2.0 * double(terms[i]) * 0x1p-24 * magnitude[i];
    ASSERT_LE(std::fabs(double(got.values[i]) - double(want[i])), bound) << "element " << i;
    ++checked;
  }
  // Only the overflow case may have no finite sum to bound.
  if (b.name != "overflow_to_inf") EXPECT_GT(checked, 0u);
}

// Every gradient row is written exactly once, whatever the caller's `grad` and
// `counts` held before (here NaN with a payload of its own, and -1): every element
// is the oracle's, in every plan and mode, from +0.0 and from a carry (which takes
// plan `bucket` through its other paths: rows started from the carry, and sparse
// buckets).
TEST_P(Catalogue, EveryElementIsWrittenWhateverGradHeld) {
  auto const& b = GetParam().batch();
  auto const table = test::table_for(b.rows, b.dim);
  auto const host_carry = synthetic::uniform_floats(b.rows * b.dim, 31);
  auto const want_counts = reference::counts(b.rows, IdsRef(b.ids));
  auto const ids = Kokkos::create_mirror_view_and_copy(
      Layer::memory_space(),
      Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(b.ids.data(), b.ids.size()));
  auto const dy = Kokkos::create_mirror_view_and_copy(Layer::memory_space(),
                                                      ConstHostMatrix(b.dy.data(), b.positions(), b.dim));
  auto const carry = Kokkos::create_mirror_view_and_copy(Layer::memory_space(),
                                                         ConstHostMatrix(host_carry.data(), b.rows, b.dim));
  Layer::matrix_type grad("grad", b.rows, b.dim);
  Layer::counts_type counts("counts", b.rows);
  std::uint32_t const stale = 0x7fc0beefu;
  std::vector<float> got(host_carry.size());
  std::vector<std::int64_t> got_counts(want_counts.size());
  TEST_EXECSPACE space;
  for (bool const with_carry : {false, true}) {
    float const* from = with_carry ? host_carry.data() : nullptr;
    auto const identical = reference::backward_identical(b.config(), IdsRef(b.ids), b.dy.data(), from);
    auto const deterministic = reference::backward_deterministic(b.config(), IdsRef(b.ids), b.dy.data(), from);
    for (auto mode : {Mode::identical, Mode::deterministic, Mode::fast})
      for (auto plan : all_plans) {
        SCOPED_TRACE(std::string(to_string(mode)) + ", plan " + std::string(to_string(plan)) +
                     (with_carry ? ", with a carry" : ""));
        Kokkos::deep_copy(grad, test::from_bits(stale));
        Kokkos::deep_copy(counts, -1);
        layer_for(b, plan, mode, table)
            .backward(space, ids, dy, grad, with_carry ? Layer::const_matrix_type(carry) : Layer::const_matrix_type(),
                      counts);
        Kokkos::deep_copy(HostMatrix(got.data(), b.rows, b.dim), grad);
        Kokkos::deep_copy(
            Kokkos::View<std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(got_counts.data(), got_counts.size()),
            counts);
        EXPECT_TRUE(same_values(got_counts, want_counts));
        if (mode == Mode::fast) {  // its order is free: no element may be left as it was
          auto const left =
              std::count_if(got.begin(), got.end(), [&](float x) { return test::bits_of(x) == stale; });
          EXPECT_EQ(left, 0) << "elements left as they were";
        } else {
          EXPECT_TRUE(same_bits(got, mode == Mode::identical ? identical : deterministic));
        }
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Inputs, Catalogue, ::testing::ValuesIn(test::catalogue()),
                         [](::testing::TestParamInfo<Input> const& info) { return info.param.name; });

TEST(Backward, NegativeZeroRowsArePositiveZero) {
  auto const& b = test::catalogue_batch("negative_zero_only_rows");
  IdsHolder ids(b);
  auto const table = test::table_for(b.rows, b.dim);
  for (auto plan : all_plans) {
    auto const g =
        layer_for(b, plan, Mode::identical, table).backward(ids.ref(), FloatsRef(b.dy.data(), b.dy_shape()));
    for (std::int64_t c = 0; c < b.dim; ++c) {
      EXPECT_EQ(test::bits_of(g.values[1 * b.dim + c]), 0u);
      EXPECT_EQ(test::bits_of(g.values[2 * b.dim + c]), 0u);
    }
    EXPECT_GT(g.counts[1] + g.counts[2], 0);
  }
}

TEST(Backward, OverflowReachesInfinityAsTheOrderSays) {
  auto const& b = test::catalogue_batch("overflow_to_inf");
  IdsHolder ids(b);
  auto const want = reference::backward_identical(b.config(), ids.ref(), b.dy.data(), nullptr);
  std::size_t infinities = 0;
  for (float x : want) infinities += std::isinf(x) ? 1 : 0;
  EXPECT_GT(infinities, 0u) << "the case should overflow somewhere";
}

// Microbatches: split positions into consecutive chunks, carry the gradient.
class Carry : public ::testing::TestWithParam<Plan> {
 protected:
  Batch batch() const {
    Batch b;
    b.name = "carry";
    b.rows = 300;
    b.dim = 6;
    b.ids = synthetic::zipf_ids(b.rows, 3000, 1.1, 21);
    b.dy = synthetic::uniform_floats(b.positions() * b.dim, 22);
    b.padding_idx = 5;
    return b;
  }
  // Runs the batch in chunks ending at `cuts` (ascending, last = T).
  std::vector<float> chunked(Batch const& b, std::vector<std::int64_t> const& cuts, Mode mode = Mode::identical) const {
    auto const table = test::table_for(b.rows, b.dim);
    auto const layer = layer_for(b, GetParam(), mode, table);
    std::vector<float> grad;
    std::int64_t begin = 0;
    for (auto end : cuts) {
      std::vector<std::int64_t> ids(b.ids.begin() + begin, b.ids.begin() + end);
      FloatsRef dy(b.dy.data() + begin * b.dim, Shape{end - begin, b.dim});
      grad = grad.empty() ? layer.backward(IdsRef(ids), dy).values
                          : layer.backward(IdsRef(ids), dy, FloatsRef(grad.data(), Shape{b.rows, b.dim})).values;
      begin = end;
    }
    return grad;
  }
};

TEST_P(Carry, RandomSplitPointsReproduceTheUnsplitGradient) {
  auto const b = batch();
  auto const want = reference::backward_identical(b.config(), IdsRef(b.ids), b.dy.data(), nullptr);
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    synthetic::Rng rng(seed);
    std::vector<std::int64_t> cuts;
    for (std::int64_t p = 1; p < b.positions(); ++p)
      if (rng.below(200) == 0) cuts.push_back(p);
    cuts.push_back(b.positions());
    SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(cuts.size()) + " chunks");
    EXPECT_TRUE(same_bits(chunked(b, cuts), want));
  }
}

TEST_P(Carry, ManyChunksAndChunksOfOnePosition) {
  auto b = batch();
  auto const want = reference::backward_identical(b.config(), IdsRef(b.ids), b.dy.data(), nullptr);
  std::vector<std::int64_t> hundred, ones;
  for (std::int64_t k = 1; k <= 100; ++k) hundred.push_back(k * b.positions() / 100);
  EXPECT_TRUE(same_bits(chunked(b, hundred), want));
  b.ids.resize(400);
  b.dy.resize(400 * b.dim);
  auto const want_short = reference::backward_identical(b.config(), IdsRef(b.ids), b.dy.data(), nullptr);
  for (std::int64_t p = 1; p <= b.positions(); ++p) ones.push_back(p);
  EXPECT_TRUE(same_bits(chunked(b, ones), want_short));
}

TEST_P(Carry, TheCarryIsNotModifiedAndSeedsTheSum) {
  auto const b = batch();
  auto const table = test::table_for(b.rows, b.dim);
  auto carry = synthetic::uniform_floats(b.rows * b.dim, 23);
  // A row with no occurrences keeps its carry, sign of zero included.
  auto const n = reference::counts(b.rows, IdsRef(b.ids));
  std::int64_t idle = 0;
  while (idle < b.rows && n[idle] != 0) ++idle;
  ASSERT_LT(idle, b.rows) << "the batch should leave some row untouched";
  carry[idle * b.dim] = -0.0f;
  auto const carry_before = carry;
  auto const layer = layer_for(b, GetParam(), Mode::identical, table);
  auto const got = layer.backward(IdsRef(b.ids), FloatsRef(b.dy.data(), b.dy_shape()),
                                  FloatsRef(carry.data(), Shape{b.rows, b.dim}));
  EXPECT_TRUE(same_bits(carry, carry_before));
  auto const want = reference::backward_identical(b.config(), IdsRef(b.ids), b.dy.data(), carry.data());
  EXPECT_TRUE(same_bits(got.values, want));
  for (std::int64_t c = 0; c < b.dim; ++c) EXPECT_EQ(test::bits_of(got.values[5 * b.dim + c]), 0u) << "padding row";
  EXPECT_EQ(test::bits_of(got.values[idle * b.dim]), 0x80000000u);
}

TEST_P(Carry, InPlaceOnDeviceViews) {
  // grad and carry the same view: the batch job's way of streaming microbatches.
  auto const b = batch();
  auto const table = test::table_for(b.rows, b.dim);
  auto const layer = layer_for(b, GetParam(), Mode::identical, table);
  auto const want = reference::backward_identical(b.config(), IdsRef(b.ids), b.dy.data(), nullptr);
  Layer::matrix_type grad("grad", b.rows, b.dim);
  auto ids_h =
      Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(b.ids.data(), b.ids.size());
  auto dy_h = Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
      b.dy.data(), b.positions(), b.dim);
  auto ids_d = Kokkos::create_mirror_view_and_copy(Layer::memory_space(), ids_h);
  auto dy_d = Kokkos::create_mirror_view_and_copy(Layer::memory_space(), dy_h);
  TEST_EXECSPACE space;
  std::int64_t const cuts[] = {0, 1, 700, 701, 2999, b.positions()};
  for (int k = 0; k + 1 < 6; ++k) {
    auto const range = std::make_pair(cuts[k], cuts[k + 1]);
    Layer::ids64_type ids_chunk = Kokkos::subview(ids_d, range);
    Layer::const_matrix_type dy_chunk = Kokkos::subview(dy_d, range, Kokkos::ALL);
    if (k == 0)
      layer.backward(space, ids_chunk, dy_chunk, grad);
    else
      layer.backward(space, ids_chunk, dy_chunk, grad, grad);
  }
  std::vector<float> got(want.size());
  Kokkos::deep_copy(
      Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(got.data(), b.rows, b.dim),
      grad);
  EXPECT_TRUE(same_bits(got, want));
}

TEST_P(Carry, InPlaceContinuesPastAnOverflowAndTouchesOnlyItsRows) {
  // A sum that overflows to +-inf in one microbatch is carried on in place (the
  // layer's own output is not re-checked), and the result is the unsplit one.
  Batch b = test::catalogue_batch("overflow_to_inf");
  b.padding_idx = 2;
  auto const want = reference::backward_identical(b.config(), IdsRef(b.ids), b.dy.data(), nullptr);
  auto const table = test::table_for(b.rows, b.dim);
  auto const layer = layer_for(b, GetParam(), Mode::identical, table);
  Layer::matrix_type grad("grad", b.rows, b.dim);
  TEST_EXECSPACE space;
  for (std::int64_t p = 0; p < b.positions(); p += 5) {
    std::int64_t const n = std::min<std::int64_t>(5, b.positions() - p);
    Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> ids(b.ids.data() + p, n);
    Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> dy(
        b.dy.data() + p * b.dim, n, b.dim);
    layer.backward(space, Kokkos::create_mirror_view_and_copy(Layer::memory_space(), ids),
                   Kokkos::create_mirror_view_and_copy(Layer::memory_space(), dy), grad, grad);
  }
  std::vector<float> got(want.size());
  Kokkos::deep_copy(
      Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(got.data(), b.rows, b.dim),
      grad);
  EXPECT_TRUE(same_bits(got, want));
  // A separate carry holding inf is still refused.
  EXPECT_THROW(
      layer.backward(IdsRef(b.ids), FloatsRef(b.dy.data(), b.dy_shape()), FloatsRef(got.data(), Shape{b.rows, b.dim})),
      NonFinite);
}

INSTANTIATE_TEST_SUITE_P(Plans, Carry, ::testing::ValuesIn(all_plans), [](::testing::TestParamInfo<Plan> const& info) {
  return std::string(info.param == Plan::automatic ? "auto" : to_string(info.param));
});

// Small calls continuing a gradient in place on a table far larger than the call
// (the listed-rows path, on the calling thread up to 1500, in parallel at 3000): every mode
// and scaling, chained call by call against the oracle, -0.0 kept in untouched rows.
struct SmallCallCase {
  Mode mode;
  FreqScale scale;
  std::int64_t call;
};
class SmallCalls : public ::testing::TestWithParam<SmallCallCase> {};

Options small_call_options(Mode mode, FreqScale scale, std::int64_t padding_idx) {
  Options o;
  o.mode = mode;
  o.scale_grad_by_freq = scale;
  o.padding_idx = padding_idx;
  return o;
}

// Copies in the layer's memory (create_mirror_view_and_copy would alias host memory).
Layer::matrix_type copy_of(float const* data, std::int64_t rows, std::int64_t cols) {
  Layer::matrix_type m("m", rows, cols);
  Kokkos::deep_copy(m, ConstHostMatrix(data, rows, cols));
  return m;
}
Layer::ids64_type copy_of(std::int64_t const* ids, std::int64_t n) {
  Kokkos::View<std::int64_t*, Layer::memory_space> m("ids", n);
  Kokkos::deep_copy(m, Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(ids, n));
  return m;
}

TEST_P(SmallCalls, InPlaceCallsEqualTheOracleCallByCall) {
  auto const [mode, scale, call] = GetParam();
  std::int64_t const v = 40000, d = 5, t = 3 * call + 11;
  auto const ids = synthetic::zipf_ids(v, t, 1.05, 41);
  auto const dy = synthetic::uniform_floats(t * d, 42);
  auto want = synthetic::uniform_floats(v * d, 43);
  for (std::int64_t r = 7; r < v; r += 97) want[r * d + 1] = -0.0f;  // a sign no rewrite would keep
  auto const options = small_call_options(mode, scale, 3);
  auto const config = make_config(v, d, options);
  auto const batch = reference::counts(v, IdsRef(ids));
  std::int64_t const* const batch_h = scale == FreqScale::batch ? batch.data() : nullptr;
  auto const layer = Layer::backward_only(TEST_EXECSPACE(), v, d, options);
  auto const grad = copy_of(want.data(), v, d);
  Layer::counts_type counts("counts", v);
  Layer::batch_counts_type const batch_d = copy_of(batch.data(), v);
  TEST_EXECSPACE space;
  for (std::int64_t p = 0; p < t; p += call) {
    std::int64_t const n = std::min(call, t - p);
    std::vector<std::int64_t> part(ids.begin() + p, ids.begin() + p + n);
    want = mode == Mode::identical
               ? reference::backward_identical(config, IdsRef(part), dy.data() + p * d, want.data(), batch_h)
               : reference::backward_deterministic(config, IdsRef(part), dy.data() + p * d, want.data(), batch_h);
    auto const ids_d = copy_of(ids.data() + p, n);
    auto const dy_d = copy_of(dy.data() + p * d, n, d);
    layer.backward(space, ids_d, dy_d, grad, grad, counts,
                   scale == FreqScale::batch ? batch_d : Layer::batch_counts_type());
    auto const got_counts = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), counts);
    auto const want_counts = reference::counts(v, IdsRef(part));
    ASSERT_TRUE(std::equal(want_counts.begin(), want_counts.end(), got_counts.data())) << "counts of the call at " << p;
  }
  std::vector<float> got(want.size());
  Kokkos::deep_copy(HostMatrix(got.data(), v, d), grad);
  EXPECT_TRUE(same_bits(got, want));
}

// Not in place, the same calls write every row of the output (NaN before), from a
// separate carry or from +0.0.
TEST_P(SmallCalls, ASeparateOutputGetsEveryRow) {
  auto const [mode, scale, call] = GetParam();
  std::int64_t const v = 40000, d = 5;
  auto const ids = synthetic::zipf_ids(v, call, 1.05, 46);
  auto const dy = synthetic::uniform_floats(call * d, 47);
  auto carry = synthetic::uniform_floats(v * d, 48);
  for (std::int64_t r = 5; r < v; r += 89) carry[r * d + 2] = -0.0f;
  auto const options = small_call_options(mode, scale, 3);
  auto const config = make_config(v, d, options);
  auto const batch = reference::counts(v, IdsRef(ids));
  std::int64_t const* const batch_h = scale == FreqScale::batch ? batch.data() : nullptr;
  auto const layer = Layer::backward_only(TEST_EXECSPACE(), v, d, options);
  Layer::batch_counts_type const batch_d = copy_of(batch.data(), v);
  std::vector<float> const nan(std::size_t(v * d), std::numeric_limits<float>::quiet_NaN());
  for (bool const with_carry : {false, true}) {
    auto const grad = copy_of(nan.data(), v, d);
    Layer::const_matrix_type const carry_d = with_carry ? copy_of(carry.data(), v, d) : Layer::matrix_type();
    layer.backward(TEST_EXECSPACE(), copy_of(ids.data(), call), copy_of(dy.data(), call, d), grad, carry_d, {},
                   scale == FreqScale::batch ? batch_d : Layer::batch_counts_type());
    float const* const from = with_carry ? carry.data() : nullptr;
    auto const want = mode == Mode::identical
                          ? reference::backward_identical(config, IdsRef(ids), dy.data(), from, batch_h)
                          : reference::backward_deterministic(config, IdsRef(ids), dy.data(), from, batch_h);
    std::vector<float> got(want.size());
    Kokkos::deep_copy(HostMatrix(got.data(), v, d), grad);
    EXPECT_TRUE(same_bits(got, want)) << (with_carry ? "from a carry" : "from +0.0");
  }
}

TEST_P(SmallCalls, ABadCallChangesNothing) {
  auto const [mode, scale, call] = GetParam();
  std::int64_t const v = 40000, d = 3;
  Options options;
  options.mode = mode;
  options.scale_grad_by_freq = scale == FreqScale::batch ? FreqScale::call : scale;
  auto const layer = Layer::backward_only(TEST_EXECSPACE(), v, d, options);
  auto const before = synthetic::uniform_floats(v * d, 44);
  auto const grad = copy_of(before.data(), v, d);
  std::vector<std::int64_t> ids(std::size_t(call), 11);
  auto dy = synthetic::uniform_floats(call * d, 45);
  dy[(call - 1) * d + 2] = std::numeric_limits<float>::quiet_NaN();
  auto const ids_d = copy_of(ids.data(), call);
  auto const dy_d = copy_of(dy.data(), call, d);
  try {
    layer.backward(TEST_EXECSPACE(), ids_d, dy_d, grad, grad);
    ADD_FAILURE() << "a NaN in dy was accepted";
  } catch (NonFinite const& e) {
    EXPECT_NE(std::string(e.what()).find("position " + std::to_string(call - 1)), std::string::npos) << e.what();
  }
  std::vector<float> got(before.size());
  Kokkos::deep_copy(HostMatrix(got.data(), v, d), grad);
  EXPECT_TRUE(same_bits(got, before));
}

// The same calls into a sparse carry continued in place: its listed rows are the
// chained backward_sparse's, bit for bit, through a resume from its listed form.
TEST_P(SmallCalls, ASparseCarryEqualsTheChainedSparseGradient) {
  auto const [mode, scale, call] = GetParam();
  std::int64_t const v = 40000, d = 5, t = 3 * call + 11;
  auto const ids = synthetic::zipf_ids(v, t, 1.05, 51);
  auto const dy = synthetic::uniform_floats(t * d, 52);
  auto const options = small_call_options(mode, scale, 0);  // padding: Zipf's hottest row
  auto const config = make_config(v, d, options);
  auto const batch = reference::counts(v, IdsRef(ids));
  std::int64_t const* const batch_h = scale == FreqScale::batch ? batch.data() : nullptr;
  auto const layer = Layer::backward_only(TEST_EXECSPACE(), v, d, options);
  Layer::batch_counts_type const batch_d = copy_of(batch.data(), v);
  TEST_EXECSPACE space;
  auto carry = layer.sparse_carry(space);
  SparseGradient want;
  std::vector<std::int64_t> total(std::size_t(v), 0);
  for (std::int64_t p = 0; p < t; p += call) {
    std::int64_t const n = std::min(call, t - p);
    std::vector<std::int64_t> part(ids.begin() + p, ids.begin() + p + n);
    want = reference::backward_sparse(config, IdsRef(part), dy.data() + p * d, p == 0 ? nullptr : &want, batch_h);
    for (auto id : part) ++total[std::size_t(id)];
    layer.backward_sparse(space, copy_of(ids.data() + p, n), copy_of(dy.data() + p * d, n, d), carry,
                          scale == FreqScale::batch ? batch_d : Layer::batch_counts_type());
    if (p == call) carry = layer.sparse_carry(space, layer.listed(space, carry));  // as a resume would
  }
  auto const got = layer.listed(space, carry);
  auto const rows = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), got.rows);
  auto const counts = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), got.counts);
  auto const values = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), got.values);
  ASSERT_EQ(std::int64_t(rows.extent(0)), want.size());
  EXPECT_TRUE(std::equal(want.rows.begin(), want.rows.end(), rows.data()));
  EXPECT_TRUE(same_bits(std::vector<float>(values.data(), values.data() + values.size()), want.values));
  for (std::int64_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(counts(i), total[std::size_t(want.rows[std::size_t(i)])]) << "row " << want.rows[std::size_t(i)];
}

TEST(SparseCarry, ABadCallChangesNothing) {
  std::int64_t const v = 1000, d = 3;
  Options options;
  options.scale_grad_by_freq = FreqScale::batch;
  auto const layer = Layer::backward_only(TEST_EXECSPACE(), v, d, options);
  TEST_EXECSPACE space;
  auto carry = layer.sparse_carry(space);
  std::vector<std::int64_t> ids{4, 9, 4};
  std::vector<std::int64_t> batch(std::size_t(v), 2);
  auto const dy = synthetic::uniform_floats(3 * d, 53);
  layer.backward_sparse(space, copy_of(ids.data(), 3), copy_of(dy.data(), 3, d), carry, copy_of(batch.data(), v));
  auto const before = layer.listed(space, carry);
  auto const values_before = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), before.values);
  batch[9] = 0;  // below row 9's count in this call
  std::vector<std::int64_t> more{9, 12};
  EXPECT_THROW(layer.backward_sparse(space, copy_of(more.data(), 2), copy_of(dy.data(), 2, d), carry,
                                     copy_of(batch.data(), v)),
               InvalidArgument);
  auto bad_dy = dy;
  bad_dy[4] = std::numeric_limits<float>::infinity();
  batch[9] = 5;
  EXPECT_THROW(layer.backward_sparse(space, copy_of(more.data(), 2), copy_of(bad_dy.data(), 2, d), carry,
                                     copy_of(batch.data(), v)),
               NonFinite);
  auto const after = layer.listed(space, carry);
  auto const values_after = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), after.values);
  ASSERT_EQ(after.rows.extent(0), 2u);
  EXPECT_TRUE(same_bits(std::vector<float>(values_after.data(), values_after.data() + values_after.size()),
                        std::vector<float>(values_before.data(), values_before.data() + values_before.size())));
}

std::vector<SmallCallCase> small_call_cases() {
  std::vector<SmallCallCase> out;
  for (Mode mode : {Mode::identical, Mode::deterministic})
    for (FreqScale scale : {FreqScale::none, FreqScale::call, FreqScale::batch})
      for (std::int64_t call : {1, 7, 97, 1500, 3000}) out.push_back({mode, scale, call});
  return out;
}
INSTANTIATE_TEST_SUITE_P(Listed, SmallCalls, ::testing::ValuesIn(small_call_cases()),
                         [](::testing::TestParamInfo<SmallCallCase> const& info) {
                           return std::string(to_string(info.param.mode)) + "_" +
                                  std::string(to_string(info.param.scale)) + "_" + std::to_string(info.param.call);
                         });

// The fp trap: sums whose bits change under any reassociation or flush-to-zero.
// Row 0: 1 followed by 2^-24 terms (the ascending fold keeps 1.0; a reassociated
// one does not). Row 1: subnormals only (flushed, they would vanish).
TEST(FloatingPointTrap, OrderSensitiveSumsKeepTheirBits) {
  std::int64_t const d = 3, t = 9;
  std::vector<std::int64_t> ids{0, 0, 0, 0, 0, 1, 1, 0, 0};
  std::vector<float> dy(t * d);
  for (std::int64_t p = 0; p < t; ++p)
    for (std::int64_t c = 0; c < d; ++c)
      dy[p * d + c] = ids[p] == 1 ? test::from_bits(1u + c) : (p == 0 ? 1.0f : 0x1p-24f);
  auto const table = test::table_for(2, d);
  for (auto plan : all_plans) {
    Layer layer(2, d, FloatsRef(table.data(), Shape{2, d}), [&] {
      Options o;
      o.plan = plan;
      return o;
    }());
    auto const g = layer.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{t, d}));
    for (std::int64_t c = 0; c < d; ++c) {
      EXPECT_EQ(test::bits_of(g.values[c]), test::bits_of(1.0f)) << "plan " << to_string(plan) << ": reassociated";
      EXPECT_EQ(test::bits_of(g.values[d + c]), 2u * (1u + c)) << "plan " << to_string(plan) << ": subnormals flushed";
    }
  }
  // The deterministic tree over the same terms is not the ascending fold.
  Options o;
  o.mode = Mode::deterministic;
  Layer tree(2, d, FloatsRef(table.data(), Shape{2, d}), o);
  auto const g = tree.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{t, d}));
  EXPECT_NE(test::bits_of(g.values[0]), test::bits_of(1.0f));
}

}  // namespace
}  // namespace kembed
