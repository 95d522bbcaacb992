// Which rank owns each row (kembed/core/ownership.hpp): every row on exactly one rank
// at one slot, under both rules and every shape; ranges as mpi::rows_of always gave;
// spread places a Zipf head by count, the same from the hot rows alone as from V
// counts, and the refusals.
#include <gtest/gtest.h>

#include <kembed/core/error.hpp>
#include <kembed/core/ownership.hpp>
#include <kembed/core/synthetic.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

namespace kembed {
namespace {

std::vector<std::int64_t> counts_of(std::vector<std::int64_t> const& ids, std::int64_t v) {
  std::vector<std::int64_t> c(std::size_t(v), 0);
  for (auto id : ids) ++c[std::size_t(id)];
  return c;
}

// Every row has one owner and one slot, and each rank's slots name its rows (holes: -1).
void expect_a_bijection(Ownership const& o) {
  std::vector<int> seen(std::size_t(o.rows()), 0);
  for (int r = 0; r < o.ranks(); ++r)
    for (std::int64_t s = 0; s < o.slots(r); ++s) {
      auto const row = o.row_at(r, s);
      if (row < 0) continue;
      ASSERT_LT(row, o.rows());
      ++seen[std::size_t(row)];
      EXPECT_EQ(o.owner_of(row), r) << "row " << row;
      EXPECT_EQ(o.slot_of(row), s) << "row " << row;
    }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
}

TEST(Ownership, RangesAreContiguousInRankOrder) {
  for (std::int64_t v : {0, 1, 3, 1001, 1024})
    for (int p : {1, 2, 3, 4, 7}) {
      SCOPED_TRACE(std::to_string(v) + " rows, " + std::to_string(p) + " ranks");
      auto const o = Ownership::ranges(v, p);
      EXPECT_TRUE(o.contiguous());
      expect_a_bijection(o);
      std::int64_t next = 0;
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(o.first_row(r), next);
        EXPECT_LE(o.slots(r), v / p + 1);
        EXPECT_GE(o.slots(r), v / p);
        next += o.slots(r);
      }
      EXPECT_EQ(next, v);
    }
  // V = 1001 splits 251/250/250/250 at P = 4 and 334/334/333 at P = 3.
  EXPECT_EQ(Ownership::ranges(1001, 4).first_row(2), 501);
  EXPECT_EQ(Ownership::ranges(1001, 3).first_row(2), 668);
}

TEST(Ownership, SpreadPutsAZipfHeadOnSeveralRanksAndKeepsTheSlotsEven) {
  std::int64_t const v = 5000, t = 200000;
  auto const counts = counts_of(synthetic::zipf_ids(v, t, 1.1, 3), v);
  for (int p : {1, 2, 3, 4, 8, 64}) {
    SCOPED_TRACE(std::to_string(p) + " ranks");
    auto const o = Ownership::spread(counts, p);
    EXPECT_FALSE(o.contiguous());
    expect_a_bijection(o);
    std::vector<std::int64_t> terms(std::size_t(p), 0);
    for (std::int64_t row = 0; row < v; ++row) terms[std::size_t(o.owner_of(row))] += counts[std::size_t(row)];
    auto const busiest = *std::max_element(terms.begin(), terms.end());
    auto const hottest = *std::max_element(counts.begin(), counts.end());
    // Within a quarter of the mean, or the hottest row alone is more than 1/P.
    if (hottest * p <= t) EXPECT_LE(busiest * p * 4, t * 5) << "busiest " << busiest;
    for (int r = 0; r < p; ++r) EXPECT_LE(o.slots(r), (v + p - 1) / p + std::int64_t(o.hot_rows().size()));
    // Every hot row is one the rule calls hot, and the rest stay on row mod P.
    for (std::int64_t row = 0; row < v; ++row) {
      bool const hot = Ownership::is_hot(counts[std::size_t(row)], t, p);
      if (!hot) EXPECT_EQ(o.owner_of(row), row % p);
    }
  }
  // P = 4: row 0 (the Zipf head) and the next ones are on different ranks.
  auto const o = Ownership::spread(counts, 4);
  EXPECT_NE(o.owner_of(0), o.owner_of(1));
}

// What ranks can gather (the hot rows and each rank's other terms) gives the same
// ownership as all V counts, in any order.
TEST(Ownership, SpreadFromTheHotRowsAloneIsTheSame) {
  std::int64_t const v = 3000, t = 50000;
  auto const counts = counts_of(synthetic::zipf_ids(v, t, 1.2, 5), v);
  for (int p : {2, 3, 4}) {
    std::vector<Ownership::HotRow> hot;
    std::vector<std::int64_t> base(std::size_t(p), 0);
    for (std::int64_t row = v - 1; row >= 0; --row) {
      if (Ownership::is_hot(counts[std::size_t(row)], t, p))
        hot.push_back({row, counts[std::size_t(row)]});
      else
        base[std::size_t(row % p)] += counts[std::size_t(row)];
    }
    EXPECT_FALSE(hot.empty());
    EXPECT_TRUE(Ownership::spread(v, p, hot, base) == Ownership::spread(counts, p));
  }
}

TEST(Ownership, BadShapesAreRefused) {
  EXPECT_THROW(Ownership::ranges(-1, 2), InvalidArgument);
  EXPECT_THROW(Ownership::ranges(10, 0), InvalidArgument);
  EXPECT_THROW(Ownership::spread(10, 2, {}, {1}), InvalidArgument);
  EXPECT_THROW(Ownership::spread(10, 2, {{10, 5}}, {0, 0}), InvalidArgument);
  EXPECT_THROW(Ownership::spread(10, 2, {{3, 5}, {3, 5}}, {0, 0}), InvalidArgument);
}

}  // namespace
}  // namespace kembed
