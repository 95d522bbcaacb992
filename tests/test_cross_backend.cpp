// The same batch on Serial and on OpenMP, in one process: the gradients' bytes are
// compared directly, not only each against the oracle.
#include "support/test_support.hpp"

#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>

namespace kembed {
namespace {

template <class Space>
HostGradient run(std::int64_t v, std::int64_t d, std::vector<float> const& table, std::vector<std::int64_t> const& ids,
                 std::vector<float> const& dy, Options const& o) {
  Embedding<Space> layer(v, d, FloatsRef(table.data(), Shape{v, d}), o);
  return layer.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{std::int64_t(ids.size()), d}));
}

TEST(CrossBackend, SerialAndOpenMPGiveTheSameBytes) {
  std::int64_t const v = 20000, d = 19, t = 200000;
  auto const table = test::table_for(v, d);
  auto const ids = synthetic::zipf_ids(v, t, 1.1, 31);
  auto const dy = synthetic::uniform_floats(t * d, 32);
  for (auto mode : {Mode::identical, Mode::deterministic})
    for (auto plan : {Plan::scan, Plan::sort, Plan::bucket, Plan::automatic}) {
      Options o;
      o.mode = mode;
      o.plan = plan;
      o.padding_idx = 3;
      auto const serial = run<Kokkos::Serial>(v, d, table, ids, dy, o);
      auto const openmp = run<Kokkos::OpenMP>(v, d, table, ids, dy, o);
      EXPECT_TRUE(test::same_bits(openmp.values, serial.values)) << to_string(mode) << " " << to_string(plan);
      EXPECT_EQ(openmp.counts, serial.counts);
    }
}

}  // namespace
}  // namespace kembed
