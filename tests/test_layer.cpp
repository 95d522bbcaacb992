// The layer's surface: forward bits, ownership of the table, counts, every refusal
// of the contract (each message checked, each leaving the layer and carry as they
// were), and the thread count this run was asked for.
#include "support/test_support.hpp"

#include <kembed/core/reference.hpp>
#include <kembed/core/synthetic.hpp>
#include <kembed/embedding.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>

namespace kembed {
namespace {

using Layer = Embedding<TEST_EXECSPACE>;
using test::same_bits;

TEST(Backend, RunsWithTheRequestedThreadCount) {
  if (!detail::Tiles<TEST_EXECSPACE>::host) GTEST_SKIP() << TEST_EXECSPACE::name() << " is a device: no thread count";
  TEST_EXECSPACE space;
  char const* want = std::getenv("KEMBED_TEST_THREADS");
#ifdef KOKKOS_ENABLE_OPENMP
  if (std::is_same<TEST_EXECSPACE, Kokkos::OpenMP>::value)
    ASSERT_NE(want, nullptr) << "CTest sets KEMBED_TEST_THREADS for every OpenMP run";
#endif
  if (want)
    EXPECT_EQ(space.concurrency(), std::atoi(want)) << TEST_EXECSPACE::name();
  else
    EXPECT_EQ(space.concurrency(), 1) << TEST_EXECSPACE::name() << " runs one thread";
}

TEST(Forward, GathersRowsBitForBitFromInt32AndInt64Ids) {
  std::int64_t const v = 1000, d = 17;
  auto table = test::table_for(v, d);
  table[5 * d + 3] = -0.0f;
  table[6 * d] = test::from_bits(1u);  // subnormal
  Options o;
  o.padding_idx = 5;  // the forward gathers the padding row like any other
  Layer layer(v, d, FloatsRef(table.data(), Shape{v, d}), o);
  auto ids64 = synthetic::zipf_ids(v, 4000, 1.1, 3);
  ids64[0] = 5;
  ids64[1] = 6;
  std::vector<std::int32_t> ids32(ids64.begin(), ids64.end());
  auto const want = reference::forward(table.data(), layer.config(), IdsRef(ids64));
  EXPECT_TRUE(same_bits(layer.forward(IdsRef(ids64)), want));
  EXPECT_TRUE(same_bits(layer.forward(IdsRef(ids32.data(), Shape{40, 100})), want));
  EXPECT_EQ(test::bits_of(layer.forward(IdsRef(ids64))[3]), 0x80000000u);
}

// Every id is checked before y is written, whether the host checks them on the
// calling thread (up to detail::inline_id_check ids) or in a parallel pass:
// the error names the first bad position and y keeps every bit.
TEST(Forward, BadIdsAreNamedAndWriteNothing) {
  std::int64_t const v = 40, d = 5;
  auto const table = test::table_for(v, d);
  Layer layer(v, d, FloatsRef(table.data(), Shape{v, d}));
  std::int64_t const inline_max = detail::inline_id_check;
  for (std::int64_t t : {std::int64_t{3}, inline_max, inline_max + 1, 3 * inline_max})
    for (std::int64_t bad : {std::int64_t{-1}, v, std::int64_t{1} << 40})
      // near the end (the last thread's part), and the last id of a host thread's first chunk
      for (std::int64_t at : {t - 2, t > detail::host_id_chunk ? detail::host_id_chunk - 1 : 0}) {
        SCOPED_TRACE("T = " + std::to_string(t) + ", bad id " + std::to_string(bad) + " at " + std::to_string(at));
        auto ids = synthetic::uniform_ids(v, t, 5);
        ids[at] = bad;
        ids[t - 1] = -7;  // a later bad id is not the one reported
        auto const ids_d = Kokkos::create_mirror_view_and_copy(
            typename Layer::memory_space(),
            Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(ids.data(), t));
        auto const before = test::table_for(t, d, 9);
        typename Layer::matrix_type y("y", t, d);
        Kokkos::deep_copy(y,
                          Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                              before.data(), t, d));
        try {
          layer.forward(TEST_EXECSPACE(), ids_d, y);
          ADD_FAILURE() << "no error";
        } catch (IdOutOfRange const& e) {
          std::string const want =
              "ids holds " + std::to_string(bad) + " at position " + std::to_string(at) + ", outside [0, 40)";
          EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
        }
        auto const y_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y);
        EXPECT_TRUE(same_bits(std::vector<float>(y_h.data(), y_h.data() + t * d), before));
      }
}

// kembed::make_matrix: zeroed, shaped, labelled; negative extents refused. On Linux
// the buffer's pages are advised for huge pages (the mapping says "hg"), which is
// what makes the forward's random row reads faster; whether the system grants them
// is its business, so the advice is what is tested.
TEST(MakeMatrix, ZeroedLabelledAndAdvisedForHugePages) {
  TEST_EXECSPACE space;
  std::int64_t const rows = 1 << 16, cols = 130;  // 33 MiB
  auto const m = make_matrix(space, "kembed::test_matrix", rows, cols);
  EXPECT_EQ(m.label(), "kembed::test_matrix");
  ASSERT_EQ(std::int64_t(m.extent(0)), rows);
  ASSERT_EQ(std::int64_t(m.extent(1)), cols);
  auto const h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m);
  std::int64_t nonzero_bits = 0;
  for (std::int64_t i = 0; i < rows * cols; ++i) nonzero_bits += test::bits_of(h.data()[i]) != 0u;
  EXPECT_EQ(nonzero_bits, 0);
  auto const empty = make_matrix(space, "kembed::empty", 0, 4);
  EXPECT_EQ(empty.size(), 0u);
  try {
    make_matrix(space, "kembed::bad", 3, -1);
    ADD_FAILURE() << "no error for a negative extent";
  } catch (InvalidArgument const& e) {
    EXPECT_NE(std::string(e.what()).find("make_matrix(3, -1): the extents must not be negative"), std::string::npos)
        << e.what();
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (!std::is_same<typename Layer::memory_space, Kokkos::HostSpace>::value) return;
  // The mapping that holds the matrix's first whole 2 MiB page.
  auto const page = 2ull << 20;
  auto const inside = (reinterpret_cast<unsigned long long>(m.data()) + page) & ~(page - 1);
  std::ifstream smaps("/proc/self/smaps");
  ASSERT_TRUE(smaps) << "no /proc/self/smaps";
  std::string line, flags;
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;  // a mapping's first line: "lo-hi perms ..."
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2) {
      in_mapping = lo <= inside && inside < hi;
    } else if (in_mapping && line.rfind("VmFlags:", 0) == 0) {
      flags = line;
      break;
    }
  }
  EXPECT_NE((flags + " ").find(" hg "), std::string::npos) << "the matrix's mapping: " << flags;
#endif
}

// The host's streaming-store path runs only for outputs of 64 MiB and more: here
// it is forced on small outputs, with rows that are and are not 16-byte aligned.
TEST(Forward, StreamingStoresGiveTheSameBits) {
  for (std::int64_t d : {16, 17, 3}) {
    std::int64_t const v = 300, t = 5000;
    auto const table = test::table_for(v, d);
    Layer layer(v, d, FloatsRef(table.data(), Shape{v, d}));
    auto const ids = synthetic::zipf_ids(v, t, 1.1, 4);
    auto const ids_d = Kokkos::create_mirror_view_and_copy(
        typename Layer::memory_space(),
        Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(ids.data(), t));
    typename Layer::matrix_type y("y", t, d);
    detail::forward(TEST_EXECSPACE(), ids_d, layer.weight(), y, /*stream_bytes=*/0);
    auto const y_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y);
    std::vector<float> got(y_h.data(), y_h.data() + t * d);
    EXPECT_TRUE(same_bits(got, reference::forward(table.data(), layer.config(), IdsRef(ids)))) << "d = " << d;
  }
}

// The bucket plan writes small gradients that few positions hit with ordinary
// stores, others with streaming stores: here both store paths run (stream_bytes 0
// forces streaming) on gradients whose buckets are sparse and dense, rows that are
// and are not 16-byte aligned, with and without a carry and a padding row.
TEST(Backward, BucketStreamingAndCachedStoresGiveTheSameBits) {
  using Matrix = typename Layer::matrix_type;
  using HostConstMatrix = Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  struct Size {
    std::int64_t v, t;
  };
  Size const sizes[] = {{3000, 40}, {3000, 5000}, {200000, 3000}};
  for (Size const size : sizes) {
    for (std::int64_t d : {16, 17, 3}) {
      for (bool with_carry : {false, true}) {
        std::int64_t const v = size.v, t = size.t;
        auto const ids = synthetic::zipf_ids(v, t, 1.1, 5);
        auto const dy = synthetic::uniform_floats(t * d, 6);
        auto const carry = test::table_for(v, d, 8);
        Options options;
        options.padding_idx = 2;
        Config const config = make_config(v, d, options);
        auto const want =
            reference::backward_identical(config, IdsRef(ids), dy.data(), with_carry ? carry.data() : nullptr);
        auto const ids_d = Kokkos::create_mirror_view_and_copy(
            typename Layer::memory_space(),
            Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(ids.data(), t));
        auto const dy_d =
            Kokkos::create_mirror_view_and_copy(typename Layer::memory_space(), HostConstMatrix(dy.data(), t, d));
        typename Layer::const_matrix_type carry_d;
        if (with_carry)
          carry_d =
              Kokkos::create_mirror_view_and_copy(typename Layer::memory_space(), HostConstMatrix(carry.data(), v, d));
        for (std::int64_t stream_bytes : {std::int64_t{0}, std::int64_t{1} << 62}) {
          Matrix grad("grad", v, d);
          Kokkos::deep_copy(grad, std::nanf(""));
          typename Layer::counts_type counts("counts", v);
          bool const bad = detail::backward_bucket(TEST_EXECSPACE(), ids_d, dy_d, carry_d, grad, counts, 2,
                                                   detail::host_isa(), stream_bytes);
          EXPECT_FALSE(bad);
          auto const grad_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad);
          std::vector<float> got(grad_h.data(), grad_h.data() + v * d);
          EXPECT_TRUE(same_bits(got, want)) << "V = " << v << ", T = " << t << ", d = " << d << ", carry " << with_carry
                                            << ", stream_bytes " << stream_bytes;
          auto const counts_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), counts);
          std::vector<std::int64_t> n(v, 0);
          for (auto id : ids) ++n[id];
          EXPECT_TRUE(std::equal(n.begin(), n.end(), counts_h.data()));
        }
      }
    }
  }
}

// From 32 MiB a host gradient starts as 32-byte streamed stores where the CPU has
// AVX2 (detail::start_host_gradient), else as each thread's memset or memcpy. Both
// starts (KEMBED_HOST_ISA picks), with a carry and without, give the oracle's bits,
// on unaligned rows, a -0.0 in an untouched carry row kept; the carry is not changed.
TEST(Backward, AStreamedStartOfALargeGradientGivesTheSameBits) {
  std::int64_t const d = 17, v = (detail::start_stream_bytes / 4 + d - 1) / d + 3, t = 3000;  // just past it
  auto const ids = synthetic::zipf_ids(v, t, 1.1, 5);
  auto const dy = synthetic::uniform_floats(t * d, 6);
  auto carry = synthetic::uniform_floats(v * d, 7);
  carry[(v - 1) * d + 3] = -0.0f;
  auto const carry_before = carry;
  ASSERT_EQ(reference::counts(v, IdsRef(ids))[v - 1], 0) << "the last row should be untouched";
  Options o;
  o.plan = Plan::scan;
  auto const layer = Layer::backward_only(TEST_EXECSPACE(), v, d, o);
  for (bool const with_carry : {false, true}) {
    auto const want =
        reference::backward_identical(layer.config(), IdsRef(ids), dy.data(), with_carry ? carry.data() : nullptr);
    for (char const* isa : {"baseline", "auto"}) {
      SCOPED_TRACE(std::string(isa) + (with_carry ? ", carry" : ", no carry"));
      test::ScopedEnv env("KEMBED_HOST_ISA", isa);
      FloatsRef const dy_ref(dy.data(), Shape{t, d});
      auto const got = with_carry ? layer.backward(IdsRef(ids), dy_ref, FloatsRef(carry.data(), Shape{v, d}))
                                  : layer.backward(IdsRef(ids), dy_ref);
      EXPECT_TRUE(same_bits(got.values, want));
      EXPECT_TRUE(same_bits(carry, carry_before));
    }
  }
}

// The scan's blocks split the columns, then the rows; each keeps a scratch copy of
// its sums where they fit 1 MiB; folding into the gradient itself, the blocks own
// whole rows in runs of 1 MiB past 32 MiB, or from 8 MiB with a position per row
// (detail::scan_split).
TEST(Plans, TheScanSplitsIntoRunsOfRowsPastTheCache) {
  using detail::scan_split;
  std::int64_t const many = std::int64_t{1} << 40;
  auto const halves = scan_split(2, 32767, 64, many);  // just under 8 MiB: column halves, no scratch copy
  EXPECT_EQ(halves.col_blocks, 2);
  EXPECT_EQ(halves.row_blocks, 1);
  EXPECT_FALSE(halves.runs);
  EXPECT_FALSE(halves.in_scratch(32767, 64));
  auto const runs = scan_split(2, 32768, 64, 32768);  // 8 MiB, one position per row: runs of 4,096 rows
  EXPECT_EQ(runs.col_blocks, 1);
  EXPECT_EQ(runs.row_blocks, 2);
  EXPECT_EQ(runs.run_shift, 12);
  EXPECT_TRUE(runs.runs);
  EXPECT_EQ(runs.most_rows(32768 + 1), 5 * 4096);       // 9 runs (the last of one row): 5 and 4
  EXPECT_FALSE(scan_split(2, 32768, 64, 32767).runs);   // under one per row
  EXPECT_FALSE(scan_split(2, 131072, 64, 1).runs);      // 32 MiB
  EXPECT_TRUE(scan_split(2, 131073, 64, 1).runs);       // past it, at any count
  auto const scratch = scan_split(2, 4096, 128, many);  // 2 MiB: 1 MiB halves in scratch copies
  EXPECT_EQ(scratch.col_blocks, 2);
  EXPECT_TRUE(scratch.in_scratch(4096, 128));
  EXPECT_FALSE(scratch.runs);
  auto const wide = scan_split(4, 3, std::int64_t{1} << 22, 1);  // 3 rows of 16 MiB: a run a row
  EXPECT_EQ(wide.row_blocks, 3);
  EXPECT_EQ(wide.run_shift, 0);
  EXPECT_TRUE(wide.runs);
  auto const huge = scan_split(2, std::int64_t{1} << 62, 64, 1);  // no overflow
  EXPECT_TRUE(huge.runs);
  EXPECT_EQ(huge.run_shift, 12);
  EXPECT_FALSE(huge.in_scratch(std::int64_t{1} << 62, 64));
  EXPECT_EQ(scan_split(1, std::int64_t{1} << 62, 64, many).row_blocks, 1);
  EXPECT_FALSE(scan_split(2, 10, 0, many).runs);
}

// `auto` as measured (docs/PERFORMANCE.md), at each boundary of the rule, and the
// layer resolving it for its own backend.
TEST(Plans, AutoFollowsTheMeasuredRule) {
  using detail::auto_plan;
  std::int64_t const mib = 1 << 20, d = 16;  // 64-byte rows: n rows of 16 floats = n * 64 bytes
  // One thread: scan at every size, unpooled or bags, factors or not.
  for (std::int64_t v : {std::int64_t{1}, mib / 2, mib + 1, std::int64_t{1} << 40, std::int64_t{1} << 62})
    for (std::int64_t t : {std::int64_t{1}, v / 64 + 1, 4 * mib + 1, std::int64_t{1} << 62}) {
      EXPECT_EQ(auto_plan(true, 1, v, d, t), Plan::scan) << v << " rows, " << t << " positions";
      EXPECT_EQ(auto_plan(true, 1, v, 512, t, std::max<std::int64_t>(t / 2, 1), true), Plan::scan);
    }
  // 2-4 threads: up to 2 MiB of gradient, scan up to 256 KiB of dy, or from 4 MiB
  // where the scan's column slices are at most 64 floats, else sort; larger
  // gradients: sort from 8 positions per row, else bucket.
  std::int64_t const many = std::int64_t{1} << 40;
  EXPECT_EQ(auto_plan(true, 2, 1000, 64, many), Plan::scan);   // slices of 32
  EXPECT_EQ(auto_plan(true, 2, 1000, 128, many), Plan::scan);  // of 64
  EXPECT_EQ(auto_plan(true, 2, 1000, 160, many), Plan::sort);  // of 80
  EXPECT_EQ(auto_plan(true, 2, 1000, 512, many), Plan::sort);  // the scan splits rows
  EXPECT_EQ(auto_plan(true, 4, 1000, 256, many), Plan::scan);  // 4 slices of 64
  EXPECT_EQ(auto_plan(true, 4, 1000, 512, many), Plan::sort);
  EXPECT_EQ(auto_plan(true, 2, 1000, 128, 8192), Plan::sort);      // 4 MiB of dy
  EXPECT_EQ(auto_plan(true, 2, 1000, 128, 8193), Plan::scan);
  EXPECT_EQ(auto_plan(true, 2, 4096, 128, many), Plan::scan);      // 2 MiB of gradient
  EXPECT_EQ(auto_plan(true, 2, 4097, 128, 8 * 4097), Plan::sort);  // past 2 MiB: the rule below
  for (std::int64_t threads : {2, 4}) {
    EXPECT_EQ(auto_plan(true, threads, mib / 32, d, 4096), Plan::scan);
    EXPECT_EQ(auto_plan(true, threads, mib / 32, d, 4097), Plan::sort);
    EXPECT_EQ(auto_plan(true, threads, mib / 32, d, 2 * mib), Plan::sort);
    EXPECT_EQ(auto_plan(true, threads, mib / 32, d, std::int64_t{1} << 62), Plan::sort);  // no overflow
    EXPECT_EQ(auto_plan(true, threads, 1, d, 1), Plan::scan);
    EXPECT_EQ(auto_plan(true, threads, mib / 32 + 1, d, 4000), Plan::bucket);
    // At most V/12 positions: scan at any size (the gradient starts as a memset).
    EXPECT_EQ(auto_plan(true, threads, mib / 32 + 1, d, (mib / 32 + 1) / 12), Plan::scan);
    EXPECT_EQ(auto_plan(true, threads, mib / 32 + 1, d, (mib / 32 + 1) / 12 + 1), Plan::bucket);
    EXPECT_EQ(auto_plan(true, threads, std::int64_t{1} << 40, 256, std::int64_t{1} << 34), Plan::scan);
    EXPECT_EQ(auto_plan(true, threads, std::int64_t{1} << 40, 256, std::int64_t{1} << 34, 1000, true), Plan::scan);
    EXPECT_EQ(auto_plan(true, threads, mib / 32 + 1, d, 8 * (mib / 32 + 1) - 1), Plan::bucket);
    EXPECT_EQ(auto_plan(true, threads, mib / 32 + 1, d, 8 * (mib / 32 + 1)), Plan::sort);
    // A bag call's terms read a dy row per bag: the rule counts dy rows, not positions.
    EXPECT_EQ(auto_plan(true, threads, mib / 32 + 1, d, 8 * (mib / 32 + 1), 8 * (mib / 32 + 1) - 1), Plan::bucket);
    EXPECT_EQ(auto_plan(true, threads, mib / 32 + 1, d, 16 * 8 * (mib / 32 + 1) - 1, 8 * (mib / 32 + 1)), Plan::sort);
    EXPECT_EQ(auto_plan(true, threads, std::int64_t{1} << 40, d, std::int64_t{1} << 43), Plan::sort);
    EXPECT_EQ(auto_plan(true, threads, std::int64_t{1} << 40, d, (std::int64_t{1} << 43) - 1), Plan::bucket);
  }
  // Bag calls (dy_rows bags of t positions), 2-4 threads: scan from 16 per bag where the scan's column
  // slices are at most 64 floats, at any size, with factors or without.
  std::int64_t const huge = std::int64_t{1} << 40;
  for (bool factors : {false, true}) {
    SCOPED_TRACE(factors ? "factors" : "no factors");
    EXPECT_EQ(auto_plan(true, 2, 65536, 128, 65536, 4000, factors), Plan::scan);    // 32 MiB, 1 per row
    EXPECT_EQ(auto_plan(true, 2, 65536, 128, 32768, 2000, factors), Plan::scan);    // half a position per row
    EXPECT_EQ(auto_plan(true, 2, 65536, 128, 65536, 4097, factors), Plan::bucket);  // under 16 per bag
    EXPECT_EQ(auto_plan(true, 2, 65537, 128, 65537, 4000, factors), Plan::scan);    // past 32 MiB
    EXPECT_EQ(auto_plan(true, 2, huge, 128, std::int64_t{1} << 20, 65536, factors), Plan::scan);  // any size
    EXPECT_EQ(auto_plan(true, 3, huge, 64, std::int64_t{1} << 62, 1000, factors), Plan::scan);  // no overflow
    EXPECT_EQ(auto_plan(true, 2, 32768, 256, 32768, 1000, factors), Plan::bucket);              // slices of 128
    EXPECT_EQ(auto_plan(true, 4, 32768, 256, 32768, 1000, factors), Plan::scan);                // 4 slices of 64
    EXPECT_EQ(auto_plan(true, 2, mib / 2, 16, mib / 2, 1000, factors), Plan::scan);             // rows split
    EXPECT_EQ(auto_plan(true, 8, 65536, 128, 65536, 1000, factors), Plan::bucket);
    // A gradient of at most 2 MiB: the bag rule first.
    EXPECT_EQ(auto_plan(true, 2, 8000, 64, 8192, 512, factors), Plan::scan);
  }
  // From 8 MiB, where the scan's blocks own runs of rows, at most V/6 positions scan
  // (d <= 128 on 2 threads); under it, or wider, V/12.
  for (std::int64_t threads : {2, 4}) {
    EXPECT_EQ(auto_plan(true, threads, 32768, 64, 32768 / 6), Plan::scan);  // 8 MiB
    EXPECT_EQ(auto_plan(true, threads, 32768, 64, 32768 / 6 + 1), Plan::bucket);
    EXPECT_EQ(auto_plan(true, threads, 32767, 64, 32767 / 12), Plan::scan);
    EXPECT_EQ(auto_plan(true, threads, 32767, 64, 32767 / 12 + 1), Plan::bucket);
    EXPECT_EQ(auto_plan(true, threads, 32768, 64, 32768 / 6, 32768 / 6, true), Plan::scan);  // bags of one
  }
  EXPECT_EQ(auto_plan(true, 2, 65536, 256, 65536 / 12), Plan::scan);
  EXPECT_EQ(auto_plan(true, 2, 65536, 256, 65536 / 12 + 1), Plan::bucket);
  // Below it, terms with factors sort on a small gradient (bags of 1 and 8: 2 MiB
  // of dy, which the sum's rule sorts too), and take the rule before past it.
  EXPECT_EQ(auto_plan(true, 2, 8000, 64, 65536, 65536, true), Plan::sort);
  EXPECT_EQ(auto_plan(true, 2, 8000, 64, 8192, 1024, true), Plan::sort);
  EXPECT_EQ(auto_plan(true, 2, 8000, 64, 8192, 1024), Plan::sort);
  EXPECT_EQ(auto_plan(true, 2, 4096, 64, 1000, 1000), Plan::scan);  // 256 KiB of dy
  EXPECT_EQ(auto_plan(true, 2, 4096, 64, 1000, 1000, true), Plan::sort);
  EXPECT_EQ(auto_plan(true, 8, 1 << 13, 1, (1 << 13) - 1, (1 << 13) - 1, true), Plan::sort);
  EXPECT_EQ(auto_plan(true, 2, 65537, 128, 65537, 65537, true), Plan::bucket);
  // More threads: bucket past 2 MiB, the contract's V * T rule below.
  EXPECT_EQ(auto_plan(true, 8, mib / 32 + 1, d, 1), Plan::bucket);
  EXPECT_EQ(auto_plan(true, 8, 1 << 13, 1, 1 << 13), Plan::sort);
  EXPECT_EQ(auto_plan(true, 8, 1 << 13, 1, (1 << 13) - 1), Plan::scan);
  // A device sorts.
  EXPECT_EQ(auto_plan(false, 1, 1000, d, 1000), Plan::sort);

  bool const host = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Layer::memory_space>::accessible;
  std::vector<float> table(1000 * 512, 0.5f);
  Layer layer(1000, 512, FloatsRef(table.data(), Shape{1000, 512}));
  for (std::int64_t t : {1000, 100000, 1000000})
    EXPECT_EQ(layer.plan_for(t), auto_plan(host, TEST_EXECSPACE().concurrency(), 1000, 512, t));
  Options o;
  o.plan = Plan::scan;
  EXPECT_EQ(Layer(1000, 512, FloatsRef(table.data(), Shape{1000, 512}), o).plan_for(1 << 30), Plan::scan);  // not auto
}

TEST(Ownership, TheLayerKeepsItsOwnCopy) {
  std::int64_t const v = 4, d = 3;
  auto table = test::table_for(v, d);
  auto const original = table;
  Layer layer(v, d, FloatsRef(table.data(), Shape{v, d}));
  table[0] = 1234.0f;  // the caller's buffer changes; the layer must not see it
  EXPECT_TRUE(same_bits(layer.weight_host(), original));
  std::vector<std::int64_t> ids{0};
  EXPECT_EQ(test::bits_of(layer.forward(IdsRef(ids))[0]), test::bits_of(original[0]));
  // Reassignment takes a new copy; copies of a layer share nothing mutable.
  auto copy = layer;
  copy.set_weight(FloatsRef(table.data(), Shape{v, d}));
  EXPECT_TRUE(same_bits(copy.weight_host(), table));
  EXPECT_TRUE(same_bits(layer.weight_host(), original));
  // Backward never touches the table.
  std::vector<float> dy(d, 1.0f);
  layer.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{1, d}));
  EXPECT_TRUE(same_bits(layer.weight_host(), original));
}

TEST(Ownership, FromPretrainedViewCopiesTheView) {
  std::int64_t const v = 5, d = 2;
  Layer::matrix_type w("w", v, d);
  Kokkos::deep_copy(w, 2.5f);
  auto layer = Layer::from_pretrained(TEST_EXECSPACE(), w);
  Kokkos::deep_copy(w, 7.0f);
  EXPECT_TRUE(same_bits(layer.weight_host(), std::vector<float>(v * d, 2.5f)));
  EXPECT_EQ(layer.num_embeddings(), v);
  EXPECT_EQ(layer.embedding_dim(), d);
}

// Embedding::over works on the caller's table (kembed.torch's Parameter): a write to it
// reaches the next forward, and max_norm's renormalisation writes it, as torch's does.
TEST(Ownership, OverWorksOnTheCallersTable) {
  std::int64_t const v = 4, d = 2;
  Layer::matrix_type w("w", v, d);
  Kokkos::deep_copy(w, 3.0f);
  Options renorm;
  renorm.max_norm = 1.0;
  auto const plain = Layer::over(TEST_EXECSPACE(), w);
  auto const capped = Layer::over(TEST_EXECSPACE(), w, renorm);
  EXPECT_EQ(plain.weight().data(), w.data());
  Kokkos::deep_copy(w, 0.5f);  // an optimiser's step
  std::vector<std::int64_t> ids{2};
  EXPECT_TRUE(same_bits(plain.forward(IdsRef(ids)), std::vector<float>(d, 0.5f)));
  Kokkos::deep_copy(w, 3.0f);
  auto const y = capped.forward(IdsRef(ids));
  auto const host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), w);
  EXPECT_EQ(test::bits_of(host(2, 0)), test::bits_of(y[0]));  // row 2 renormalised in the caller's table
  EXPECT_LT(host(2, 0), 3.0f);
  EXPECT_EQ(host(1, 0), 3.0f);  // rows not referenced stay
  Options bad;
  bad.padding_idx = 9;
  EXPECT_THROW(Layer::over(TEST_EXECSPACE(), w, bad), InvalidArgument);
}

TEST(Counts, EqualTheOracleAndIncludeThePaddingRow) {
  std::int64_t const v = 50;
  auto ids = synthetic::zipf_ids(v, 5000, 1.1, 9);
  auto table = test::table_for(v, 2);
  Options o;
  o.padding_idx = 0;
  Layer layer(v, 2, FloatsRef(table.data(), Shape{v, 2}), o);
  EXPECT_EQ(layer.counts(IdsRef(ids)), reference::counts(v, IdsRef(ids)));
}

// ---- refusals ---------------------------------------------------------------

struct Refusal {
  std::string name;
  std::string argument;  // Error::argument()
  std::string message;   // a substring the message must hold
  std::function<void()> call;
};

class Refusals : public ::testing::Test {
 protected:
  static constexpr std::int64_t v = 6, d = 3, t = 4;
  std::vector<float> table = test::table_for(v, d);
  std::vector<float> table_before = table;
  std::vector<std::int64_t> ids{0, 1, 2, 3};
  std::vector<float> dy = test::table_for(t, d, 11);
  std::vector<float> carry = test::table_for(v, d, 12);
  std::vector<float> carry_before = carry;
  Layer layer{v, d, FloatsRef(table.data(), Shape{v, d})};

  FloatsRef dy_ref() { return FloatsRef(dy.data(), Shape{t, d}); }
  FloatsRef carry_ref() { return FloatsRef(carry.data(), Shape{v, d}); }
  static Options with(std::function<void(Options&)> f) {
    Options o;
    f(o);
    return o;
  }

  void expect_refused(Refusal const& r) {
    SCOPED_TRACE(r.name);
    try {
      r.call();
      ADD_FAILURE() << r.name << ": no error";
    } catch (Error const& e) {
      EXPECT_EQ(e.argument(), r.argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(r.message), std::string::npos)
          << "message: " << e.what() << "\nwant it to contain: " << r.message;
      EXPECT_EQ(std::string(e.what()).rfind("kembed: ", 0), 0u) << e.what();
    }
    EXPECT_TRUE(same_bits(layer.weight_host(), table_before)) << r.name << " changed the table";
    EXPECT_TRUE(same_bits(carry, carry_before)) << r.name << " changed the carry";
  }
};

TEST_F(Refusals, EveryRefusalOfTheContract) {
  auto const nan = std::numeric_limits<float>::quiet_NaN();
  auto const inf = std::numeric_limits<float>::infinity();
  std::vector<float> bad_table = table;
  bad_table[2 * d + 1] = nan;
  std::vector<float> bad_dy = dy;
  bad_dy[1 * d + 2] = -inf;
  std::vector<float> bad_carry = carry;
  bad_carry[4 * d] = inf;
  std::vector<std::int64_t> high{0, 6, 7, 1}, low{0, 1, -3, 9};
  std::vector<std::int32_t> high32{0, 1, 2, 6};
  std::vector<std::int64_t> none;

  std::vector<Refusal> const rows{
      {"id at V", "ids", "ids holds 6 at position 1, outside [0, 6)", [&] { layer.backward(IdsRef(high), dy_ref()); }},
      {"negative id, first reported", "ids", "ids holds -3 at position 2",
       [&] { layer.backward(IdsRef(low), dy_ref()); }},
      {"int32 id at V in forward", "ids", "ids holds 6 at position 3", [&] { layer.forward(IdsRef(high32)); }},
      {"NaN in the table at construction", "weight", "weight holds NaN at row 2, column 1",
       [&] {
         Layer(v, d, FloatsRef(bad_table.data(), Shape{v, d}));
       }},
      {"NaN in the table at assignment", "weight", "weight holds NaN at row 2, column 1",
       [&] {
         layer.set_weight(FloatsRef(bad_table.data(), Shape{v, d}));
       }},
      {"inf in dy", "dy", "dy holds -inf at position 1, column 2",
       [&] {
         layer.backward(IdsRef(ids), FloatsRef(bad_dy.data(), Shape{t, d}), carry_ref());
       }},
      {"inf in the carry", "carry", "carry holds +inf at row 4, column 0",
       [&] {
         layer.backward(IdsRef(ids), dy_ref(), FloatsRef(bad_carry.data(), Shape{v, d}));
       }},
      {"empty ids", "ids", "with no positions", [&] { layer.forward(IdsRef(none)); }},
      {"empty ids and dy", "ids", "with no positions",
       [&] {
         layer.backward(IdsRef(none), FloatsRef(dy.data(), Shape{0, d}));
       }},
      {"dy of the wrong shape", "dy", "dy has shape (4, 2), want (4, 3)",
       [&] {
         layer.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{t, 2}));
       }},
      {"dy without the trailing dimension", "dy", "dy has shape (12,), want (4, 3)",
       [&] { layer.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{t * d})); }},
      {"ids 2-D, dy flat", "dy", "dy has shape (4, 3), want (2, 2, 3)",
       [&] {
         layer.backward(IdsRef(ids.data(), Shape{2, 2}), dy_ref());
       }},
      {"carry of the wrong shape", "carry", "carry has shape (3, 6), want (6, 3)",
       [&] {
         layer.backward(IdsRef(ids), dy_ref(), FloatsRef(carry.data(), Shape{d, v}));
       }},
      {"table of the wrong shape", "weight", "weight has shape (3, 6), want (6, 3)",
       [&] {
         Layer(v, d, FloatsRef(table.data(), Shape{d, v}));
       }},
      {"table reassigned with another shape", "weight", "weight has shape (2, 3), want (6, 3)",
       [&] {
         layer.set_weight(FloatsRef(table.data(), Shape{2, d}));
       }},
      {"from_pretrained of a 1-D table", "weight", "from_pretrained wants a 2-D",
       [&] { Layer::from_pretrained(FloatsRef(table.data(), Shape{v * d})); }},
      {"V < 1", "num_embeddings", "num_embeddings must be at least 1, got 0",
       [&] {
         Layer(0, d, FloatsRef(table.data(), Shape{0, d}));
       }},
      {"d < 1", "embedding_dim", "embedding_dim must be at least 1, got -2",
       [&] {
         Layer(v, -2, FloatsRef(table.data(), Shape{v, -2}));
       }},
      {"padding_idx = V", "padding_idx", "padding_idx must be within [-6, 6), got 6",
       [&] {
         Layer(v, d, FloatsRef(table.data(), Shape{v, d}), with([](Options& o) { o.padding_idx = 6; }));
       }},
      {"padding_idx = -V - 1", "padding_idx", "got -7",
       [&] {
         Layer(v, d, FloatsRef(table.data(), Shape{v, d}), with([](Options& o) { o.padding_idx = -7; }));
       }},
      {"no table", "weight", "weight is required",
       [&] {
         Layer(v, d, FloatsRef(nullptr, Shape{v, d}));
       }},
      {"max_norm of 0", "max_norm", "max_norm must be a finite number > 0, got 0",
       [&] {
         Layer(v, d, FloatsRef(table.data(), Shape{v, d}), with([](Options& o) { o.max_norm = 0.0; }));
       }},
      {"max_norm NaN", "max_norm", "max_norm must be a finite number > 0, got nan",
       [&] {
         Layer(v, d, FloatsRef(table.data(), Shape{v, d}), with([](Options& o) { o.max_norm = std::nan(""); }));
       }},
      {"norm_type 0", "norm_type", "norm_type must be > 0 (or inf), got 0",
       [&] {
         Layer(v, d, FloatsRef(table.data(), Shape{v, d}), with([](Options& o) {
           o.max_norm = 1.0;
           o.norm_type = 0.0;
         }));
       }},
      {"norm_type without max_norm", "norm_type", "has no effect without max_norm",
       [&] {
         Layer(v, d, FloatsRef(table.data(), Shape{v, d}), with([](Options& o) { o.norm_type = 1.0; }));
       }},
      {"scale_grad_by_freq by name", "scale_grad_by_freq", "must be 'none', 'call' or 'batch', got 'yes'",
       [&] { parse_freq_scale("yes"); }},
      {"batch scaling without batch counts", "batch_counts", "give batch_counts",
       [&] {
         Layer(v, d, FloatsRef(table.data(), Shape{v, d}),
               with([](Options& o) { o.scale_grad_by_freq = FreqScale::batch; }))
             .backward(IdsRef(ids), dy_ref());
       }},
      {"batch counts without batch scaling", "batch_counts", "scale_grad_by_freq is 'call'",
       [&] {
         std::vector<std::int64_t> n(v, 4);
         Layer(v, d, FloatsRef(table.data(), Shape{v, d}),
               with([](Options& o) { o.scale_grad_by_freq = FreqScale::call; }))
             .backward(IdsRef(ids), dy_ref(), carry_ref(), n.data());
       }},
      {"batch counts below the call's", "batch_counts", "batch_counts[2] = 0 but this call's ids hold row 2 1 times",
       [&] {
         std::vector<std::int64_t> n{1, 1, 0, 1, 0, 0};
         Layer(v, d, FloatsRef(table.data(), Shape{v, d}),
               with([](Options& o) { o.scale_grad_by_freq = FreqScale::batch; }))
             .backward(IdsRef(ids), dy_ref(), carry_ref(), n.data());
       }},
      {"sparse batch counts below the call's", "batch_counts", "batch_counts[3] = 0",
       [&] {
         std::vector<std::int64_t> n{1, 1, 1, 0, 0, 0};
         Layer(v, d, FloatsRef(table.data(), Shape{v, d}),
               with([](Options& o) { o.scale_grad_by_freq = FreqScale::batch; }))
             .backward_sparse(IdsRef(ids), dy_ref(), nullptr, n.data());
       }},
      {"sparse carry rows not ascending", "carry", "carry.rows must be ascending and unique: rows[0] = 3, rows[1] = 3",
       [&] {
         SparseGradient c{v, d, {3, 3}, std::vector<float>(2 * d, 1.0f), {0, 0}};
         layer.backward_sparse(IdsRef(ids), dy_ref(), &c);
       }},
      {"sparse carry row outside the table", "carry", "carry.rows[1] = 6 is outside [0, 6)",
       [&] {
         SparseGradient c{v, d, {1, 6}, std::vector<float>(2 * d, 1.0f), {0, 0}};
         layer.backward_sparse(IdsRef(ids), dy_ref(), &c);
       }},
      {"sparse carry with NaN", "carry", "carry holds NaN at listed row 1, column 2",
       [&] {
         SparseGradient c{v, d, {1, 4}, std::vector<float>(2 * d, 1.0f), {0, 0}};
         c.values[d + 2] = std::nanf("");
         layer.backward_sparse(IdsRef(ids), dy_ref(), &c);
       }},
      {"sparse carry of another table", "carry", "carry is for a (6, 4) table, want (6, 3)",
       [&] {
         SparseGradient c{v, d + 1, {}, {}, {}};
         layer.backward_sparse(IdsRef(ids), dy_ref(), &c);
       }},
      {"sparse carry values short", "carry", "carry lists 2 rows but holds 3 values",
       [&] {
         SparseGradient c{v, d, {1, 4}, std::vector<float>(3, 1.0f), {0, 0}};
         layer.backward_sparse(IdsRef(ids), dy_ref(), &c);
       }},
      {"sparse: id at V", "ids", "ids holds 6 at position 1, outside [0, 6)",
       [&] { layer.backward_sparse(IdsRef(high), dy_ref()); }},
      {"sparse: inf in dy", "dy", "dy holds -inf at position 1, column 2",
       [&] { layer.backward_sparse(IdsRef(ids), FloatsRef(bad_dy.data(), Shape{t, d})); }},
      {"table too large for int64", "weight", "does not fit in a signed 64-bit integer",
       [&] {
         Layer(std::int64_t{1} << 40, std::int64_t{1} << 40, FloatsRef(table.data(), Shape{v, d}));
       }},
  };
  for (auto const& r : rows) expect_refused(r);
}

// dy is checked inside the kernels (no extra pass): a NaN at a position whose row
// is the padding row, which no sum reads, must still be found, in every path.
TEST(RefusalsInKernels, NonFiniteDyOnThePaddingRowIsFoundByEveryPath) {
  std::int64_t const v = 5, d = 3;
  auto const table = test::table_for(v, d);
  std::vector<std::int64_t> ids{0, 1, 2, 1};
  std::vector<float> dy(ids.size() * d, 0.5f);
  dy[3 * d + 2] = std::numeric_limits<float>::quiet_NaN();  // position 3, the padding row
  for (auto mode : {Mode::identical, Mode::deterministic, Mode::fast})
    for (auto plan : {Plan::scan, Plan::sort, Plan::bucket}) {
      Options o;
      o.padding_idx = 1;
      o.mode = mode;
      o.plan = plan;
      Layer layer(v, d, FloatsRef(table.data(), Shape{v, d}), o);
      try {
        layer.backward(IdsRef(ids), FloatsRef(dy.data(), Shape{std::int64_t(ids.size()), d}));
        ADD_FAILURE() << to_string(mode) << "/" << to_string(plan) << ": accepted";
      } catch (NonFinite const& e) {
        EXPECT_NE(std::string(e.what()).find("dy holds NaN at position 3, column 2"), std::string::npos) << e.what();
      }
    }
}

// The folds test each finished sum, not each term (NaN and +-inf absorb under
// addition), on every path: scan into the gradient with many or few terms per row,
// scan into scratch (several threads) or in runs of rows, the sort's folds, the bucket plan's dense
// and sparse buckets. Each bad term, alone or cancelling another to NaN, on a hot
// row or a row with one term, is reported where it is; finite terms whose sum
// overflows are no error.
TEST(RefusalsInKernels, NonFiniteDyIsFoundByEveryPathWhereverItIs) {
  struct Shape3 {
    std::int64_t v, d, t;
  };
  auto const inf = std::numeric_limits<float>::infinity();
  // (110,000 rows of 20 and as many positions: from 8 MiB at one position per row
  // several threads own rows in runs.)
  for (auto const shape :
       {Shape3{50, 20, 1000}, Shape3{4000, 20, 1000}, Shape3{40000, 20, 1000}, Shape3{110000, 20, 110000}}) {
    auto const table = test::table_for(shape.v, shape.d);
    auto ids = synthetic::zipf_ids(shape.v, shape.t, 1.1, 5);
    std::vector<std::int64_t> count(shape.v, 0);
    for (auto id : ids) ++count[id];
    std::int64_t const hot = std::max_element(count.begin(), count.end()) - count.begin();
    ASSERT_GT(count[hot], 4) << shape.v;
    ASSERT_NE(hot, shape.v - 1);
    for (auto& id : ids)
      if (id == shape.v - 1) id = hot;
    std::int64_t const one = shape.t - 2;  // the only term of row V - 1
    ids[one] = shape.v - 1;
    std::int64_t const first_hot = std::find(ids.begin(), ids.end(), hot) - ids.begin();
    std::int64_t const later_hot = std::find(ids.begin() + first_hot + 1, ids.end(), hot) - ids.begin();
    std::int64_t const third_hot = std::find(ids.begin() + later_hot + 1, ids.end(), hot) - ids.begin();
    ASSERT_LT(third_hot, one);
    auto const dy = synthetic::uniform_floats(shape.t * shape.d, 6);
    auto const at = [&](std::int64_t p, std::int64_t col) {
      return "at position " + std::to_string(p) + ", column " + std::to_string(col);
    };
    struct Bad {
      char const* name;
      std::vector<std::pair<std::int64_t, float>> at;  // (flat index, value)
      std::string want;
    };
    std::int64_t const c = shape.d - 1;
    std::vector<Bad> const bads{
        {"NaN on the hot row", {{first_hot * shape.d + 3, std::nanf("")}}, "dy holds NaN " + at(first_hot, 3)},
        {"+inf on the one-term row", {{one * shape.d + c, inf}}, "dy holds +inf " + at(one, c)},
        {"+inf and -inf cancelling to NaN on the hot row",
         {{later_hot * shape.d + c, inf}, {third_hot * shape.d + c, -inf}},
         "dy holds +inf " + at(later_hot, c)},
    };
    for (auto mode : {Mode::identical, Mode::deterministic, Mode::fast})
      for (auto plan : {Plan::scan, Plan::sort, Plan::bucket}) {
        Options o;
        o.mode = mode;
        o.plan = plan;
        Layer layer(shape.v, shape.d, FloatsRef(table.data(), Shape{shape.v, shape.d}), o);
        std::string const where =
            std::to_string(shape.v) + " rows, " + std::string(to_string(mode)) + "/" + std::string(to_string(plan));
        for (auto const& bad : bads) {
          auto with_bad = dy;
          for (auto const& [i, x] : bad.at) with_bad[i] = x;
          try {
            layer.backward(IdsRef(ids), FloatsRef(with_bad.data(), Shape{shape.t, shape.d}));
            ADD_FAILURE() << where << ", " << bad.name << ": accepted";
          } catch (NonFinite const& e) {
            EXPECT_NE(std::string(e.what()).find(bad.want), std::string::npos) << where << ": " << e.what();
          }
        }
        // Finite terms that overflow: +inf in the hot row's sums, and no error.
        auto big = dy;
        for (std::int64_t p = 0; p < shape.t; ++p)
          if (ids[p] == hot) big[p * shape.d + 1] = std::numeric_limits<float>::max();
        auto const g = layer.backward(IdsRef(ids), FloatsRef(big.data(), Shape{shape.t, shape.d}));
        EXPECT_EQ(g.values[hot * shape.d + 1], inf) << where;
        if (mode == Mode::identical)
          EXPECT_TRUE(
              same_bits(g.values, reference::backward_identical(layer.config(), IdsRef(ids), big.data(), nullptr)))
              << where;
      }
  }
}

TEST_F(Refusals, ViewOverloadsCheckEverythingBeforeWriting) {
  TEST_EXECSPACE space;
  Layer::matrix_type grad("grad", v, d);
  Kokkos::deep_copy(grad, 3.0f);
  auto grad_h = Kokkos::create_mirror_view(grad);
  std::vector<std::int64_t> high{0, 1, 2, 6};
  Kokkos::View<std::int64_t*, typename Layer::memory_space> ids_d("ids", t);
  Kokkos::deep_copy(ids_d, Kokkos::View<std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(high.data(), t));
  Layer::matrix_type dy_d("dy", t, d);
  Layer::counts_type counts("counts", v);
  auto const unchanged = [&] {
    Kokkos::deep_copy(grad_h, grad);
    for (std::size_t i = 0; i < grad_h.size(); ++i) ASSERT_EQ(grad_h.data()[i], 3.0f);
  };
  // In place (grad is the carry): a bad id must leave the carry as it was.
  EXPECT_THROW(layer.backward(space, ids_d, dy_d, grad, grad, counts), IdOutOfRange);
  unchanged();
  Kokkos::deep_copy(ids_d, 0);
  Kokkos::deep_copy(Kokkos::subview(dy_d, 2, 1), std::numeric_limits<float>::quiet_NaN());
  EXPECT_THROW(layer.backward(space, ids_d, dy_d, grad, grad), NonFinite);
  unchanged();
  Kokkos::deep_copy(dy_d, 1.0f);
  Layer::matrix_type wrong("wrong", v + 1, d);
  EXPECT_THROW(layer.backward(space, ids_d, dy_d, wrong), InvalidArgument);
  EXPECT_THROW(layer.backward(space, ids_d, dy_d, grad, wrong), InvalidArgument);
  EXPECT_THROW(layer.backward(space, ids_d, dy_d, grad, grad, Layer::counts_type("short", v - 1)), InvalidArgument);
  unchanged();
  Layer::matrix_type y("y", t + 1, d);
  EXPECT_THROW(layer.forward(space, ids_d, y), InvalidArgument);
}

}  // namespace
}  // namespace kembed
