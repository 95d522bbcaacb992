#pragma once
// kembed::Ownership: which of P ranks owns each row of a V-row table, and where the
// row sits among its owner's rows (its slot). An owner folds every term of its rows
// in position order, so the bits never depend on the ownership; the busiest owner's
// terms bound the fold's time (docs/SCALING.md, "Which rule should own the rows").
//
// - ranges: contiguous ranges in rank order (the first V mod P ranks one row more);
//   slot = row - the rank's first row.
// - spread: row r on rank r mod P at slot r / P, except the hot rows (each more than
//   1/(64 P) of the terms), which go one by one, heaviest first, to the rank with
//   the fewest terms so far, into slots after its own (their slots under r mod P are
//   left as holes that receive nothing). A Zipf head then lands on several ranks, and
//   every rank keeps about V / P slots.
#include <cstdint>
#include <utility>
#include <vector>

namespace kembed {

class Ownership {
 public:
  // A row hotter than 1 / (hot_share * P) of the terms is placed by its count.
  static constexpr std::int64_t hot_share = 64;
  struct HotRow {
    std::int64_t row = 0, terms = 0;
  };

  Ownership() = default;
  static Ownership ranges(std::int64_t rows, int ranks);
  // From every row's terms (V counts, the whole batch's).
  static Ownership spread(std::vector<std::int64_t> const& counts, int ranks);
  // From the hot rows alone (any order) and each rank's terms of its other rows
  // (row mod P, hot rows left out): what ranks can gather without V counts each.
  static Ownership spread(std::int64_t rows, int ranks, std::vector<HotRow> hot, std::vector<std::int64_t> base_terms);
  // Whether `terms` of a row among `total` make it hot on `ranks` ranks.
  static bool is_hot(std::int64_t terms, std::int64_t total, int ranks) {
    return terms > 0 && terms * hot_share * ranks > total;
  }

  bool contiguous() const noexcept { return kind_ == Kind::ranges; }
  std::int64_t rows() const noexcept { return rows_; }
  int ranks() const noexcept { return ranks_; }
  int owner_of(std::int64_t row) const;
  std::int64_t slot_of(std::int64_t row) const;            // among its owner's slots
  std::int64_t slots(int rank) const;                      // a rank's rows, holes included
  std::int64_t row_at(int rank, std::int64_t slot) const;  // -1: a hole
  std::int64_t first_row(int rank) const;                  // ranges: the rank's first row (else its first slot's row)
  // The hot rows (row ascending) with their owners: empty under ranges.
  std::vector<std::pair<std::int64_t, int>> const& hot_rows() const noexcept { return hot_owner_; }

  bool operator==(Ownership const& o) const {
    return kind_ == o.kind_ && rows_ == o.rows_ && ranks_ == o.ranks_ && hot_owner_ == o.hot_owner_;
  }

 private:
  enum class Kind { ranges, spread };
  std::int64_t own_slots(int rank) const;          // spread: rows r mod P == rank
  std::int64_t hot_index(std::int64_t row) const;  // in hot_owner_, or -1

  Kind kind_ = Kind::ranges;
  std::int64_t rows_ = 0;
  int ranks_ = 1;
  std::vector<std::pair<std::int64_t, int>> hot_owner_;  // spread: (row, owner), row ascending
  std::vector<std::int64_t> hot_slot_;                   // spread: each hot row's slot on its owner
  std::vector<std::vector<std::int64_t>> hosted_;        // spread: each rank's hot rows, in slot order
};

}  // namespace kembed
