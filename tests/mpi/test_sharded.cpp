// The table sharded over P ranks (mpiexec -n P, P = 1..4): each rank's rows of the
// gradient and counts against the one-process layer's, memcmp, for every plan and
// mode, microbatch splits, hot rows over slab and owner boundaries, V not divisible
// by P, ranks that own no row or no referenced row, slabs that are empty (T < P),
// padding rows, int32 and int64 ids; errors stop every rank with the one-process
// message naming the global position; the forward routes rows back.
#include "mpi/ranks.hpp"
#include "support/test_support.hpp"

#include <kembed/core/synthetic.hpp>
#include <kembed/io/collective.hpp>
#include <kembed/io/table_file.hpp>
#include <kembed/mpi/sharded_embedding.hpp>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>

#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace kembed {
namespace {

using Space = Kokkos::DefaultHostExecutionSpace;
using Sharded = mpi::ShardedEmbedding<Space>;
using HostMatrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;

using test::my_rank;
using test::rank_count;

struct Case {
  std::string name;
  std::int64_t v, d, t;
  bool zipf;
  std::optional<std::int64_t> padding;
  bool int32;
  std::int64_t id_limit = 0;  // ids drawn below this (0: V), so that some ranks' rows are never hit
};

inline void PrintTo(Case const& c, std::ostream* os) {
  *os << c.name;
}

std::vector<Case> cases() {
  // Row 667 is rank 1's last row at P = 3 (V = 1001 splits 334/334/333; 251/250/250/250 at P = 4).
  return {{"zipf_hot_rows", 1001, 7, 3000, true, 3, false},
          {"uniform", 997, 16, 2000, false, std::nullopt, false},
          {"int32_padding_on_an_owner_boundary", 1001, 5, 2500, true, 667, true},
          {"fewer_rows_than_ranks", 3, 4, 300, false, -1, false},
          {"fewer_positions_than_ranks", 50, 3, 2, false, 0, false},
          {"rows_no_id_hits", 1000, 6, 1500, true, std::nullopt, false, 10}};
}

std::vector<std::int64_t> ids_for(Case const& c) {
  auto const limit = c.id_limit ? c.id_limit : c.v;
  return c.zipf ? synthetic::zipf_ids(limit, c.t, 1.1, 11) : synthetic::uniform_ids(limit, c.t, 12);
}

// This rank's part of global positions [a, b): the ranks' parts are contiguous, in rank order.
std::pair<std::int64_t, std::int64_t> slab(std::int64_t a, std::int64_t b) {
  auto const part = mpi::rows_of(b - a, rank_count(), my_rank());
  return {a + part.begin, a + part.end};
}

struct Result {
  std::vector<float> gradient;  // this rank's rows (sharded) or all rows (one process)
  std::vector<std::int64_t> counts;
};

// The one-process layer over the same microbatches, continuing in place.
Result one_process(Case const& c, Options const& o, std::vector<float> const& table,
                   std::vector<std::int64_t> const& ids, std::vector<float> const& dy, std::int64_t microbatch) {
  Embedding<Space> layer(c.v, c.d, FloatsRef(table.data(), Shape{c.v, c.d}), o);
  Embedding<Space>::matrix_type grad("grad", c.v, c.d);
  Embedding<Space>::counts_type counts("counts", c.v);
  Result r{std::vector<float>(std::size_t(c.v * c.d)), std::vector<std::int64_t>(std::size_t(c.v), 0)};
  for (std::int64_t a = 0; a < c.t; a += microbatch) {
    std::int64_t const n = std::min(microbatch, c.t - a);
    Embedding<Space>::ids64_type ids_v(ids.data() + a, n);
    Embedding<Space>::const_matrix_type dy_v(dy.data() + a * c.d, n, c.d);
    layer.backward(Space(), ids_v, dy_v, grad,
                   a > 0 ? Embedding<Space>::const_matrix_type(grad) : Embedding<Space>::const_matrix_type(), counts);
    for (std::int64_t row = 0; row < c.v; ++row) r.counts[std::size_t(row)] += counts(row);
  }
  Kokkos::deep_copy(HostMatrix(r.gradient.data(), c.v, c.d), grad);
  return r;
}

template <class Id>
Result sharded(Case const& c, Options const& o, std::vector<float> const& table, std::vector<Id> const& ids,
               std::vector<float> const& dy, std::int64_t microbatch) {
  auto const mine = mpi::rows_of(c.v, rank_count(), my_rank());
  Sharded layer(MPI_COMM_WORLD, Space(), c.v, c.d, FloatsRef(table.data() + mine.begin * c.d, Shape{mine.size(), c.d}),
                o);
  Sharded::matrix_type grad("grad", mine.size(), c.d);
  Sharded::counts_type counts("counts", mine.size());
  Result r{std::vector<float>(std::size_t(mine.size() * c.d)), std::vector<std::int64_t>(std::size_t(mine.size()))};
  for (std::int64_t a = 0; a < c.t; a += microbatch) {
    auto const [p0, p1] = slab(a, std::min(a + microbatch, c.t));
    layer.backward(IdsRef(ids.data() + p0, Shape{p1 - p0}), FloatsRef(dy.data() + p0 * c.d, Shape{p1 - p0, c.d}), grad,
                   a > 0, counts);
    for (std::int64_t row = 0; row < mine.size(); ++row) r.counts[std::size_t(row)] += counts(row);
  }
  Kokkos::deep_copy(HostMatrix(r.gradient.data(), mine.size(), c.d), grad);
  return r;
}

class Sharding : public ::testing::TestWithParam<Case> {};

TEST_P(Sharding, EveryRanksRowsAreTheOneProcessGradients) {
  auto const& c = GetParam();
  auto const table = test::table_for(c.v, c.d);
  auto const ids = ids_for(c);
  std::vector<std::int32_t> const ids32(ids.begin(), ids.end());
  auto const dy = synthetic::uniform_floats(c.t * c.d, 13);
  auto const mine = mpi::rows_of(c.v, rank_count(), my_rank());
  for (auto mode : {Mode::identical, Mode::deterministic})
    for (auto plan : {Plan::scan, Plan::sort, Plan::bucket, Plan::automatic})
      for (std::int64_t microbatch : {c.t, std::int64_t{333}, std::int64_t{7}, std::int64_t{1}}) {
        // Small splits on the small cases only: every call is a few collectives, and
        // 4 ranks on 2 cores take about a millisecond each.
        if ((microbatch == 7 && c.t > 300) || (microbatch == 1 && c.t > 10)) continue;
        SCOPED_TRACE(std::string(to_string(mode)) + ", plan " + std::string(to_string(plan)) + ", microbatch " +
                     std::to_string(microbatch) + ", " + std::to_string(rank_count()) + " ranks, rank " +
                     std::to_string(my_rank()));
        Options o;
        o.mode = mode, o.plan = plan, o.padding_idx = c.padding;
        auto const want = one_process(c, o, table, ids, dy, microbatch);
        auto const got =
            c.int32 ? sharded(c, o, table, ids32, dy, microbatch) : sharded(c, o, table, ids, dy, microbatch);
        std::vector<float> const want_rows(want.gradient.begin() + mine.begin * c.d,
                                           want.gradient.begin() + mine.end * c.d);
        std::vector<std::int64_t> const want_counts(want.counts.begin() + mine.begin, want.counts.begin() + mine.end);
        EXPECT_TRUE(test::same_bits(got.gradient, want_rows));
        EXPECT_TRUE(test::same_values(got.counts, want_counts));
      }
}

INSTANTIATE_TEST_SUITE_P(Cases, Sharding, ::testing::ValuesIn(cases()),
                         [](::testing::TestParamInfo<Case> const& info) { return info.param.name; });

// What one process says about a batch, as a string ("" if nothing).
std::string one_process_error(Case const& c, std::vector<float> const& table, std::vector<std::int64_t> const& ids,
                              std::vector<float> const& dy) {
  try {
    Embedding<Space>(c.v, c.d, FloatsRef(table.data(), Shape{c.v, c.d}))
        .backward(IdsRef(ids), FloatsRef(dy.data(), Shape{c.t, c.d}));
  } catch (Error const& e) {
    return e.what();
  }
  return "";
}

// A bad id on two ranks, or a NaN: every rank stops with one process's message,
// which names the first global position, and the gradient is left as it was.
TEST(ShardingErrors, EveryRankStopsWithTheOneProcessMessage) {
  Case const c{"errors", 101, 3, 400, true, std::nullopt, false};
  auto const table = test::table_for(c.v, c.d);
  auto const dy_good = synthetic::uniform_floats(c.t * c.d, 14);
  auto ids = ids_for(c);
  ids[250] = c.v + 4;  // the first bad position, wherever the slabs fall
  ids[399] = -1;
  auto dy_nan = dy_good;
  dy_nan[123 * c.d + 2] = std::numeric_limits<float>::quiet_NaN();
  auto const good_ids = ids_for(c);
  for (int which = 0; which < 2; ++which) {
    auto const& use_ids = which == 0 ? ids : good_ids;
    auto const& use_dy = which == 0 ? dy_good : dy_nan;
    auto const want = one_process_error(c, table, use_ids, use_dy);
    ASSERT_FALSE(want.empty());
    auto const mine = mpi::rows_of(c.v, rank_count(), my_rank());
    Sharded layer(MPI_COMM_WORLD, Space(), c.v, c.d,
                  FloatsRef(table.data() + mine.begin * c.d, Shape{mine.size(), c.d}));
    Sharded::matrix_type grad("grad", mine.size(), c.d);
    Kokkos::deep_copy(grad, 7.0f);
    auto const [p0, p1] = slab(0, c.t);
    try {
      layer.backward(IdsRef(use_ids.data() + p0, Shape{p1 - p0}),
                     FloatsRef(use_dy.data() + p0 * c.d, Shape{p1 - p0, c.d}), grad, true);
      ADD_FAILURE() << "rank " << my_rank() << " went on";
    } catch (Error const& e) {
      EXPECT_EQ(std::string(e.what()), want) << "rank " << my_rank();
    }
    auto const h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), grad);
    for (std::size_t i = 0; i < h.size(); ++i) ASSERT_EQ(h.data()[i], 7.0f) << "the carry changed";
  }
}

// Under a spread ownership (a Zipf head placed by count on several ranks, the other
// rows on row mod P), every slot's gradient and count are its row's one-process ones,
// bit for bit, a hole's stay zero, and the forward brings the rows back;
// spread_ownership, from each rank's counts of its own slab, is the whole batch's
// Ownership::spread.
TEST(ShardingSpread, EverySlotIsItsRowsOneProcessGradient) {
  for (auto const& c : cases()) {
    SCOPED_TRACE(c.name + ", " + std::to_string(rank_count()) + " ranks, rank " + std::to_string(my_rank()));
    auto const table = test::table_for(c.v, c.d);
    auto const ids = ids_for(c);
    auto const dy = synthetic::uniform_floats(c.t * c.d, 13);
    auto const [p0, p1] = slab(0, c.t);
    std::vector<std::int64_t> counted(std::size_t(c.v), 0), all(std::size_t(c.v), 0);
    for (std::int64_t p = 0; p < c.t; ++p) ++all[std::size_t(ids[std::size_t(p)])];
    for (std::int64_t p = p0; p < p1; ++p) ++counted[std::size_t(ids[std::size_t(p)])];
    auto const own = mpi::spread_ownership(MPI_COMM_WORLD, counted);
    ASSERT_TRUE(own == Ownership::spread(all, rank_count()));
    auto const slots = own.slots(my_rank());
    std::vector<float> local(std::size_t(slots * c.d), 0.0f);
    for (std::int64_t s = 0; s < slots; ++s)
      if (auto const row = own.row_at(my_rank(), s); row >= 0)
        std::copy_n(table.begin() + row * c.d, c.d, local.begin() + s * c.d);
    for (auto mode : {Mode::identical, Mode::deterministic})
      for (std::int64_t microbatch : {c.t, std::int64_t{333}}) {
        Options o;
        o.mode = mode, o.padding_idx = c.padding;
        auto const want = one_process(c, o, table, ids, dy, microbatch);
        Sharded layer(MPI_COMM_WORLD, Space(), own, c.d, FloatsRef(local.data(), Shape{slots, c.d}), o);
        Sharded::matrix_type grad("grad", slots, c.d);
        Sharded::counts_type counts("counts", slots);
        std::vector<std::int64_t> got_counts(std::size_t(slots), 0);
        for (std::int64_t a = 0; a < c.t; a += microbatch) {
          auto const [q0, q1] = slab(a, std::min(a + microbatch, c.t));
          layer.backward(IdsRef(ids.data() + q0, Shape{q1 - q0}), FloatsRef(dy.data() + q0 * c.d, Shape{q1 - q0, c.d}),
                         grad, a > 0, counts);
          for (std::int64_t s = 0; s < slots; ++s) got_counts[std::size_t(s)] += counts(s);
        }
        std::vector<float> got(std::size_t(slots * c.d)), want_rows(std::size_t(slots * c.d), 0.0f);
        std::vector<std::int64_t> want_counts(std::size_t(slots), 0);
        Kokkos::deep_copy(HostMatrix(got.data(), slots, c.d), grad);
        for (std::int64_t s = 0; s < slots; ++s)
          if (auto const row = own.row_at(my_rank(), s); row >= 0) {
            std::copy_n(want.gradient.begin() + row * c.d, c.d, want_rows.begin() + s * c.d);
            want_counts[std::size_t(s)] = want.counts[std::size_t(row)];
          }
        EXPECT_TRUE(test::same_bits(got, want_rows)) << to_string(mode) << ", microbatch " << microbatch;
        EXPECT_TRUE(test::same_values(got_counts, want_counts));
        auto const y = layer.forward(IdsRef(ids.data() + p0, Shape{p1 - p0}));
        std::vector<float> rows;
        for (std::int64_t p = p0; p < p1; ++p)
          rows.insert(rows.end(), table.begin() + ids[std::size_t(p)] * c.d,
                      table.begin() + (ids[std::size_t(p)] + 1) * c.d);
        EXPECT_TRUE(test::same_bits(y, rows));
      }
  }
}

TEST(ShardingForward, RowsComeBackInEachRanksOrder) {
  for (auto const& c : cases()) {
    auto const table = test::table_for(c.v, c.d);
    auto const ids = ids_for(c);
    auto const mine = mpi::rows_of(c.v, rank_count(), my_rank());
    Sharded layer(MPI_COMM_WORLD, Space(), c.v, c.d,
                  FloatsRef(table.data() + mine.begin * c.d, Shape{mine.size(), c.d}));
    auto const [p0, p1] = slab(0, c.t);
    auto const y = layer.forward(IdsRef(ids.data() + p0, Shape{p1 - p0}));
    std::vector<float> want;
    for (std::int64_t p = p0; p < p1; ++p)
      want.insert(want.end(), table.begin() + ids[std::size_t(p)] * c.d,
                  table.begin() + (ids[std::size_t(p)] + 1) * c.d);
    EXPECT_TRUE(test::same_bits(y, want)) << c.name;
  }
}

TEST(ShardingForward, ATableShardAsAViewInTheSpacesMemory) {
  auto const c = cases().front();
  auto const table = test::table_for(c.v, c.d);
  auto const ids = ids_for(c);
  auto const mine = mpi::rows_of(c.v, rank_count(), my_rank());
  FloatsRef const host(table.data() + mine.begin * c.d, Shape{mine.size(), c.d});
  Kokkos::View<float**, Kokkos::LayoutRight, Space::memory_space> rows("rows", mine.size(), c.d);
  Kokkos::deep_copy(rows, Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                              host.data, mine.size(), c.d));
  Sharded from_host(MPI_COMM_WORLD, Space(), c.v, c.d, host);
  Sharded from_view(MPI_COMM_WORLD, Space(), c.v, c.d, Sharded::Local::const_matrix_type(rows));
  auto const [p0, p1] = slab(0, c.t);
  IdsRef const slab_ids(ids.data() + p0, Shape{p1 - p0});
  EXPECT_TRUE(test::same_bits(from_view.forward(slab_ids), from_host.forward(slab_ids)));
}

// A folder every rank sees (the first rank makes it), removed at the end.
struct SharedFolder {
  std::string path;
  SharedFolder() {
    std::string made;
    if (my_rank() == 0) {
      std::string pattern = (std::filesystem::temp_directory_path() / "kembed-mpi-XXXXXX").string();
      made = ::mkdtemp(pattern.data()) ? pattern : "";
    }
    long long n = static_cast<long long>(made.size());
    MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    made.resize(std::size_t(n));
    MPI_Bcast(made.data(), int(n), MPI_CHAR, 0, MPI_COMM_WORLD);
    path = made;
  }
  ~SharedFolder() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (my_rank() == 0 && !path.empty()) std::filesystem::remove_all(path);
  }
};

TEST(ShardingFiles, EachRankSavesItsRowsIntoOneTable) {
  SharedFolder folder;
  ASSERT_FALSE(folder.path.empty());
  io::Collective const world{MPI_COMM_WORLD};
  for (auto const& c : cases()) {
    auto const table = test::table_for(c.v, c.d);
    auto const mine = mpi::rows_of(c.v, rank_count(), my_rank());
    Options o;
    o.padding_idx = c.padding;
    auto const config = make_config(c.v, c.d, o);
    std::string const many = folder.path + "/many-" + c.name + ".h5", one = folder.path + "/one-" + c.name + ".h5";
    io::save_table(many, table.data() + mine.begin * c.d, mine.begin, mine.size(), config, {}, &world);
    if (my_rank() == 0) io::save_table(one, table.data(), config);
    MPI_Barrier(MPI_COMM_WORLD);
    auto const a = io::load_table(many), b = io::load_table(one);
    EXPECT_TRUE(test::same_bits(a.weight, b.weight)) << c.name;
    EXPECT_EQ(a.config.padding_idx, b.config.padding_idx) << c.name;
    auto const back = io::load_rows(many, mine.begin, mine.size());
    EXPECT_TRUE(test::same_bits(back.weight, std::vector<float>(table.begin() + mine.begin * c.d,
                                                                table.begin() + mine.end * c.d)))
        << c.name;
  }
  // A NaN in the last rank's rows: every rank stops with the one message, no file.
  auto const c = cases().front();
  auto table = test::table_for(c.v, c.d);
  table[std::size_t((c.v - 1) * c.d + 2)] = std::numeric_limits<float>::quiet_NaN();
  auto const mine = mpi::rows_of(c.v, rank_count(), my_rank());
  std::string const bad = folder.path + "/bad.h5";
  try {
    io::save_table(bad, table.data() + mine.begin * c.d, mine.begin, mine.size(), make_config(c.v, c.d, {}), {},
                   &world);
    ADD_FAILURE() << "a NaN was saved";
  } catch (InvalidArgument const& e) {
    EXPECT_NE(std::string(e.what()).find("row " + std::to_string(c.v - 1)), std::string::npos) << e.what();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_FALSE(std::filesystem::exists(bad));
}

}  // namespace
}  // namespace kembed
