// The same batch on this binary's backend and on a host backend, in one process:
// the gradients' bytes are compared directly, not only each against the oracle.
// Built into the OpenMP suite (against Serial) and the device suite (against
// Serial, or the default host space where Kokkos has no Serial).
#include "support/test_support.hpp"

#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>

#include <type_traits>

namespace kembed {
namespace {

#if defined(KOKKOS_ENABLE_SERIAL)
using HostReference = Kokkos::Serial;
#else
using HostReference = Kokkos::DefaultHostExecutionSpace;
#endif
static_assert(!std::is_same<TEST_EXECSPACE, HostReference>::value,
              "test_cross_backend compares two backends: build it only where they differ");

template <class Space>
HostGradient run(std::int64_t v, std::int64_t d, std::vector<float> const& table, std::vector<std::int64_t> const& ids,
                 std::vector<float> const& dy, Options const& o) {
  Embedding<Space> layer(v, d, FloatsRef(table.data(), Shape{v, d}), o);
  return layer.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{std::int64_t(ids.size()), d}));
}

TEST(CrossBackend, GivesTheHostBackendsBytes) {
  // Zipf ids (hot rows), an odd width, and a padding row.
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
      auto const host = run<HostReference>(v, d, table, ids, dy, o);
      auto const here = run<TEST_EXECSPACE>(v, d, table, ids, dy, o);
      EXPECT_TRUE(test::same_bits(here.values, host.values))
          << TEST_EXECSPACE::name() << " vs " << HostReference::name() << ": " << to_string(mode) << " "
          << to_string(plan);
      EXPECT_EQ(here.counts, host.counts);
    }
}

}  // namespace
}  // namespace kembed
