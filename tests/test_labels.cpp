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
  {  // torch's other options: the sparse form with a carry, scaling, max_norm
    Options o;
    o.max_norm = 0.5;
    o.scale_grad_by_freq = FreqScale::batch;
    Layer layer(v, d, FloatsRef(table.data(), Shape{v, d}), o);
    layer.forward(IdsRef(ids));
    auto const n = layer.counts(IdsRef(ids));
    auto const g = layer.backward_sparse(IdsRef(ids), FloatsRef(dy.data(), Shape{t, d}), nullptr, n.data());
    layer.backward_sparse(IdsRef(ids), FloatsRef(dy.data(), Shape{t, d}), &g, n.data());
    layer.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{t, d}), FloatsRef{}, n.data());
    o.norm_type = 3.0;  // the host's pow
    o.scale_grad_by_freq = FreqScale::call;
    o.mode = Mode::deterministic;
    Layer other(v, d, FloatsRef(table.data(), Shape{v, d}), o);
    other.forward(IdsRef(ids));
    other.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{t, d}));
    other.backward_sparse(IdsRef(ids), FloatsRef(dy.data(), Shape{t, d}));
  }
  make_matrix(TEST_EXECSPACE(), "kembed::dy", 3, 2);
  {  // past detail::inline_id_check ids the check is a kernel on every backend
    std::vector<std::int64_t> many(detail::inline_id_check + 1, 3);
    Layer(v, d, FloatsRef(table.data(), Shape{v, d})).forward(IdsRef(many));
  }
  {  // past detail::inline_finite_check elements so is the finite check (here of dy, in place)
    std::int64_t const n = detail::inline_finite_check / d + 1;
    Kokkos::View<std::int64_t*, Layer::memory_space> many("many", n);
    auto const dy_n = make_matrix(TEST_EXECSPACE(), "kembed::dy", n, d);
    auto const grad = make_matrix(TEST_EXECSPACE(), "kembed::gradient", v, d);
    Layer(v, d, FloatsRef(table.data(), Shape{v, d})).backward(TEST_EXECSPACE(), Layer::ids64_type(many), dy_n, grad, grad);
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
        "kembed::backward_bucket::busiest", "kembed::backward_bucket::fold", "kembed::backward_fast", "kembed::counts",
        "kembed::make_matrix", "kembed::unique_rows::radix::histogram", "kembed::unique_rows::segments",
        "kembed::backward_sparse::merge_shared", "kembed::backward_sparse::merge_new",
        "kembed::backward_sparse::merge_carry", "kembed::backward_sparse::gather_carry",
        "kembed::backward_sparse::gather_batch_counts", "kembed::check_batch_counts", "kembed::check_sparse_rows",
        "kembed::renorm::norms", "kembed::renorm::gather", "kembed::renorm::scale_rows"})
    EXPECT_EQ(kernels().count(want), 1u) << "kernel never seen: " << want;
  // The sort plan's fold: the host shape, or the device's teams with columns on lanes.
  bool const host = detail::Tiles<TEST_EXECSPACE>::host;
  for (char const* want : {host ? "kembed::backward_fold" : "kembed::backward_fold_teams",
                           host ? "kembed::backward_fold_pairwise" : "kembed::backward_fold_pairwise_teams"})
    EXPECT_EQ(kernels().count(want), 1u) << "kernel never seen: " << want;
  for (char const* want : {"kembed::forward", "kembed::backward[identical,scan]", "kembed::backward[identical,sort]",
                           "kembed::backward[identical,bucket]",
                           "kembed::backward[deterministic,sort]", "kembed::backward[fast]", "kembed::counts",
                           "kembed::renorm", "kembed::backward_sparse[identical]",
                           "kembed::backward_sparse[deterministic]",
                           "kembed::backward[identical,sort,scale_grad_by_freq]",
                           "kembed::backward[deterministic,sort,scale_grad_by_freq]"})
    EXPECT_EQ(regions().count(want), 1u) << "region never seen: " << want;
}

// Small calls continuing a large gradient in place fold the rows they list: no
// V-sized index, and on host backends the smallest run on the calling thread.
TEST_F(Labels, SmallInPlaceCallsFoldOnlyTheirListedRows) {
  std::int64_t const v = 40000, d = 4;
  Options o;
  o.mode = Mode::deterministic;
  auto const layer = Layer::backward_only(TEST_EXECSPACE(), v, d, o);
  auto const grad = make_matrix(TEST_EXECSPACE(), "kembed::gradient", v, d);
  for (std::int64_t t : {std::int64_t{3}, detail::caller_positions + 1}) {  // past both rules at d = 4
    auto const ids_h = synthetic::zipf_ids(v, t, 1.1, 5);
    auto const dy_h = synthetic::uniform_floats(t * d, 6);
    Kokkos::View<std::int64_t*, Layer::memory_space> ids("ids", t);
    Layer::matrix_type dy("dy", t, d);
    Kokkos::deep_copy(ids, Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(ids_h.data(), t));
    Kokkos::deep_copy(dy, Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                              dy_h.data(), t, d));
    kernels().clear();
    layer.backward(TEST_EXECSPACE(), Layer::ids64_type(ids), dy, grad, grad);
    bool const caller = detail::runs_on_caller(TEST_EXECSPACE(), t, d);
    EXPECT_EQ(caller, detail::Tiles<TEST_EXECSPACE>::host && t == 3) << "T = " << t;
    EXPECT_EQ(regions().count(caller ? "kembed::backward[deterministic,sort,listed,caller]"
                                     : "kembed::backward[deterministic,sort,listed]"),
              1u)
        << "T = " << t;
    EXPECT_EQ(kernels().count("kembed::backward_sort::histogram"), 0u) << "a V-sized index at T = " << t;
    if (caller)
      for (auto const& name : kernels()) ADD_FAILURE() << "a kernel launched by a call on the caller: " << name;
    else
      EXPECT_EQ(kernels().count("kembed::unique_rows::radix::histogram"), 1u);
  }
}

// Which copy of the host folds ran is a region too; KEMBED_HOST_ISA picks it, and
// a value it does not know is an error before anything is written.
TEST_F(Labels, HostIsaRegionNamesTheCopyThatRan) {
  if (!detail::Tiles<TEST_EXECSPACE>::host) GTEST_SKIP() << "a device backend has no host ISA copies";
  std::int64_t const v = 50, d = 24, t = 300;
  auto const table = test::table_for(v, d);
  auto const ids = synthetic::zipf_ids(v, t, 1.1, 3);
  auto const dy = synthetic::uniform_floats(t * d, 4);
  Layer layer(v, d, FloatsRef(table.data(), Shape{v, d}));
  {
    test::ScopedEnv env("KEMBED_HOST_ISA", "baseline");
    layer.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{t, d}));
  }
  EXPECT_EQ(regions().count("kembed::host_isa[baseline]"), 1u);
#ifdef KEMBED_HOST_AVX2_CLONES  // a build with copies (not KEMBED_HOST_ISA_COPIES=OFF)
  if (__builtin_cpu_supports("avx2")) {
    test::ScopedEnv env("KEMBED_HOST_ISA", "avx2");
    layer.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{t, d}));
    EXPECT_EQ(regions().count("kembed::host_isa[avx2]"), 1u);
  }
  if (__builtin_cpu_supports("avx512f")) {  // the folds have no AVX-512 copy: they run AVX2's
    test::ScopedEnv env("KEMBED_HOST_ISA", "avx512");
    regions().clear();
    layer.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{t, d}));
    EXPECT_EQ(regions().count("kembed::host_isa[avx2]"), 1u);
  }
#endif
  // In place (the gradient is its own carry): a refused call must leave it as it was.
  Layer::matrix_type grad("grad", v, d);
  Kokkos::deep_copy(grad, 7.0f);
  Layer::ids64_type const ids_d(ids.data(), t);
  Layer::const_matrix_type const dy_d(dy.data(), t, d);
  test::ScopedEnv env("KEMBED_HOST_ISA", "sse9");
  try {
    layer.backward(TEST_EXECSPACE(), ids_d, dy_d, grad, grad);
    ADD_FAILURE() << "KEMBED_HOST_ISA=sse9 was accepted";
  } catch (InvalidArgument const& e) {
    EXPECT_NE(std::string(e.what()).find("KEMBED_HOST_ISA must be 'auto', 'baseline', 'avx2' or 'avx512', got 'sse9'"),
              std::string::npos)
        << e.what();
  }
  auto const host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad);
  for (std::size_t i = 0; i < host.size(); ++i)
    ASSERT_EQ(test::bits_of(host.data()[i]), test::bits_of(7.0f)) << "the carry changed at " << i;
}

}  // namespace
}  // namespace kembed
