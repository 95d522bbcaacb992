// The kernels a device runs (the radix row index and the team fold, with columns on
// vector lanes) on every backend this binary is built for: on Serial and OpenMP
// they run with one lane and one team thread, so the host suites check the device
// plans' bits here, without a GPU, over the whole catalogue and several shapes.
#include "support/test_support.hpp"

#include <kembed/core/reference.hpp>
#include <kembed/embedding.hpp>

#include <vector>

namespace kembed {
namespace {

using Space = TEST_EXECSPACE;
using memory_space = Space::memory_space;
using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, memory_space>;
using HostMatrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;

template <class View>
std::vector<typename View::non_const_value_type> to_host(View const& v) {
  std::vector<typename View::non_const_value_type> out(v.size());
  Kokkos::deep_copy(Kokkos::View<typename View::non_const_value_type*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                        out.data(), out.size()),
                    v);
  return out;
}

Kokkos::View<std::int64_t*, memory_space> device_ids(test::Batch const& b) {
  return Kokkos::create_mirror_view_and_copy(
      memory_space(), Kokkos::View<std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                          const_cast<std::int64_t*>(b.ids.data()), b.ids.size()));
}

Matrix device_matrix(std::vector<float> const& h, std::int64_t rows, std::int64_t cols) {
  Matrix m("kembed::test::matrix", rows, cols);
  Kokkos::deep_copy(m, HostMatrix(const_cast<float*>(h.data()), rows, cols));
  return m;
}

class DeviceShapes : public ::testing::TestWithParam<test::Input> {};

// Every radix shape (digits of 1 to 16 bits, 1 to 64 chunks) gives the one-pass
// counting sort's index, entry for entry: (row, position) order is unique.
TEST_P(DeviceShapes, RadixRowIndexEqualsTheOnePassIndex) {
  auto const& b = GetParam().batch();
  auto const ids = device_ids(b);
  Space space;
  auto const one_pass = detail::build_row_index(space, ids, b.rows, detail::RowSortShape{63, 3});
  auto const want_offsets = to_host(one_pass.offsets);
  auto const want_positions = to_host(one_pass.positions);
  ASSERT_EQ(want_offsets.back(), b.positions());
  for (int bits : {1, 3, 16})
    for (std::int64_t chunks : {1, 5, 64}) {
      SCOPED_TRACE(std::to_string(bits) + "-bit digits, " + std::to_string(chunks) + " chunks");
      auto const index = detail::build_row_index(space, ids, b.rows, detail::RowSortShape{bits, chunks});
      EXPECT_TRUE(test::same_values(to_host(index.offsets), want_offsets));
      EXPECT_TRUE(test::same_values(to_host(index.positions), want_positions));
    }
  // And the shape a device would pick for this batch.
  auto const device = detail::row_sort_shape(false, 100000, b.rows, b.positions());
  auto const index = detail::build_row_index(space, ids, b.rows, device);
  EXPECT_TRUE(test::same_values(to_host(index.positions), want_positions));
}

// The team fold, with tiles of 1, 7 and 32 columns, from +0.0, from a carry and in
// place, in both modes, unscaled and with scale_grad_by_freq per call and per batch:
// the oracles' bits and the same non-finite verdict.
TEST_P(DeviceShapes, TeamFoldEqualsTheOracles) {
  auto const& b = GetParam().batch();
  auto const ids = device_ids(b);
  Space space;
  auto const index = detail::build_row_index(space, ids, b.rows, detail::row_sort_shape(false, 1000, b.rows, b.positions()));
  auto const dy = device_matrix(b.dy, b.positions(), b.dim);
  auto const host_carry = test::table_for(b.rows, b.dim, 11);
  auto batch_counts = reference::counts(b.rows, IdsRef(b.ids));
  for (std::int64_t r = 0; r < b.rows; ++r) batch_counts[r] += r % 3;
  Kokkos::View<std::int64_t*, Space::memory_space> batch_view("kembed::test::batch_counts", b.rows);
  Kokkos::deep_copy(batch_view, Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                    batch_counts.data(), batch_counts.size()));
  for (auto const scale_kind : {FreqScale::none, FreqScale::call, FreqScale::batch})
    for (bool const deterministic : {false, true})
      for (int carry_kind : {0, 1, 2})  // none, separate, in place
        for (std::int64_t tile : {1, 7, 32}) {
          SCOPED_TRACE(std::string(deterministic ? "deterministic" : "identical") + ", carry " +
                       std::to_string(carry_kind) + ", tile " + std::to_string(tile) + ", scale " +
                       std::string(to_string(scale_kind)));
          auto config = b.config();
          config.scale_grad_by_freq = scale_kind;
          detail::RowScale<Space::memory_space> scale;
          scale.kind = scale_kind;
          scale.batch = batch_view;
          std::int64_t const* batch = scale_kind == FreqScale::batch ? batch_counts.data() : nullptr;
          float const* from = carry_kind ? host_carry.data() : nullptr;
          auto const want = deterministic
                                ? reference::backward_deterministic(config, IdsRef(b.ids), b.dy.data(), from, batch)
                                : reference::backward_identical(config, IdsRef(b.ids), b.dy.data(), from, batch);
          Matrix grad = carry_kind == 2 ? device_matrix(host_carry, b.rows, b.dim) : Matrix("kembed::test::grad", b.rows, b.dim);
          Matrix carry = carry_kind == 1 ? device_matrix(host_carry, b.rows, b.dim) : carry_kind == 2 ? grad : Matrix();
          detail::TeamFoldShape const shape{tile, 1, 1};
          bool const flagged =
              deterministic ? detail::fold_teams(space, index, dy, carry, grad, config.padding_idx, shape,
                                                 detail::PairwiseSum{}, "kembed::test::fold", scale)
                            : detail::fold_teams(space, index, dy, carry, grad, config.padding_idx, shape,
                                                 detail::AscendingSum{}, "kembed::test::fold", scale);
          std::vector<float> got(want.size());
          Kokkos::deep_copy(HostMatrix(got.data(), b.rows, b.dim), grad);
          EXPECT_TRUE(test::same_bits(got, want));
          bool dy_finite = true;
          for (float x : b.dy) dy_finite = dy_finite && x - x == 0.0f;
          // A non-finite term is always flagged (in place the caller checked dy first).
          if (!dy_finite && carry_kind != 2) EXPECT_TRUE(flagged);
        }
}

INSTANTIATE_TEST_SUITE_P(Inputs, DeviceShapes, ::testing::ValuesIn(test::catalogue()),
                         [](::testing::TestParamInfo<test::Input> const& info) { return info.param.name; });

// The shape a device picks: one pass while the digits cover the rows, two at
// V = 1e6, T = 1e6, and histograms within a few entries per position.
TEST(DeviceShapes, RadixShapeScalesWithTheBatch) {
  auto const small = detail::row_sort_shape(false, 100000, 1000, 1000000);
  EXPECT_GE(small.digit_bits, detail::bits_for(1000));
  auto const large = detail::row_sort_shape(false, 100000, 1000000, 1000000);
  EXPECT_EQ(large.chunks, 1000000 / detail::device_sort_chunk);
  EXPECT_EQ((detail::bits_for(1000000) + large.digit_bits - 1) / large.digit_bits, 2);
  EXPECT_LE((std::int64_t{1} << large.digit_bits) * large.chunks, 4 * 1000000);
  auto const host = detail::row_sort_shape(true, 2, 1000000, 1000000);
  EXPECT_GE(host.digit_bits, detail::bits_for(1000000)) << "host backends sort in one pass";
}

}  // namespace
}  // namespace kembed
