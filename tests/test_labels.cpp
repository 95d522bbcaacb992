// Every kernel kembed launches carries a "kembed::" label, and each backward path
// announces itself in a region, so Kokkos tools (and users) see which path ran.
#include "support/test_support.hpp"

#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>

#include <set>

namespace kembed {
namespace {

using Layer = Embedding<TEST_EXECSPACE>;

std::set<std::string>& kernels() {
  static std::set<std::string> names;
  return names;
}
std::set<std::string>& regions() {
  static std::set<std::string> names;
  return names;
}

void on_kernel(char const* name, std::uint32_t, std::uint64_t*) {
  kernels().insert(name);
}
void on_region(char const* name) {
  regions().insert(name);
}

class Labels : public ::testing::Test {
 protected:
  void SetUp() override {
    kernels().clear();
    regions().clear();
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(on_kernel);
    Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(on_kernel);
    Kokkos::Tools::Experimental::set_begin_parallel_scan_callback(on_kernel);
    Kokkos::Tools::Experimental::set_push_region_callback(on_region);
  }
  void TearDown() override {
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
    Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(nullptr);
    Kokkos::Tools::Experimental::set_begin_parallel_scan_callback(nullptr);
    Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
  }
};

TEST_F(Labels, KernelsAndRegionsAreNamedKembed) {
  std::int64_t const v = 100, d = 4, t = 1000;
  auto const table = test::table_for(v, d);
  auto const ids = synthetic::zipf_ids(v, t, 1.1, 1);
  auto const dy = synthetic::uniform_floats(t * d, 2);
  for (auto mode : {Mode::identical, Mode::deterministic, Mode::fast})
    for (auto plan : {Plan::scan, Plan::sort, Plan::bucket}) {
      Options o;
      o.mode = mode;
      o.plan = plan;
      Layer layer(v, d, FloatsRef(table.data(), Shape{v, d}), o);
      layer.forward(IdsRef(ids));
      auto const g = layer.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{t, d}));
      layer.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{t, d}), FloatsRef(g.values.data(), Shape{v, d}));
      layer.counts(IdsRef(ids));
    }
  for (auto const& name : kernels()) {
    // Kokkos' own kernels (view initialisation, deep copies) keep Kokkos' names.
    if (name.rfind("Kokkos::", 0) == 0) continue;
    EXPECT_EQ(name.rfind("kembed::", 0), 0u) << "unlabelled kernel: " << name;
  }
  for (char const* want :
       {"kembed::forward", "kembed::check_ids", "kembed::check_finite", "kembed::backward_scan",
        "kembed::backward_sort::histogram", "kembed::backward_sort::offsets", "kembed::backward_sort::scatter",
        "kembed::backward_bucket::histogram", "kembed::backward_bucket::offsets", "kembed::backward_bucket::scatter",
        "kembed::backward_bucket::busiest", "kembed::backward_bucket::fold", "kembed::backward_fold",
        "kembed::backward_fold_pairwise", "kembed::backward_fast", "kembed::counts"})
    EXPECT_EQ(kernels().count(want), 1u) << "kernel never seen: " << want;
  for (char const* want : {"kembed::forward", "kembed::backward[identical,scan]", "kembed::backward[identical,sort]",
                           "kembed::backward[identical,bucket]",
                           "kembed::backward[deterministic,sort]", "kembed::backward[fast]", "kembed::counts"})
    EXPECT_EQ(regions().count(want), 1u) << "region never seen: " << want;
}

}  // namespace
}  // namespace kembed
