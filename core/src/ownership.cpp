#include <kembed/core/error.hpp>
#include <kembed/core/ownership.hpp>

#include <algorithm>
#include <numeric>
#include <queue>
#include <string>
#include <tuple>

namespace kembed {
namespace {

void check_shape(std::int64_t rows, int ranks) {
  if (rows < 0) throw InvalidArgument("rows", "an ownership needs rows >= 0, got " + std::to_string(rows));
  if (ranks < 1) throw InvalidArgument("ranks", "an ownership needs ranks >= 1, got " + std::to_string(ranks));
}

}  // namespace

Ownership Ownership::ranges(std::int64_t rows, int ranks) {
  check_shape(rows, ranks);
  Ownership o;
  o.kind_ = Kind::ranges, o.rows_ = rows, o.ranks_ = ranks;
  return o;
}

Ownership Ownership::spread(std::vector<std::int64_t> const& counts, int ranks) {
  check_shape(std::int64_t(counts.size()), ranks);
  std::int64_t const total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  std::vector<HotRow> hot;
  std::vector<std::int64_t> base(std::size_t(ranks), 0);
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (is_hot(counts[r], total, ranks))
      hot.push_back({std::int64_t(r), counts[r]});
    else
      base[r % std::size_t(ranks)] += counts[r];
  }
  return spread(std::int64_t(counts.size()), ranks, std::move(hot), std::move(base));
}

// Heaviest first (ties: the lower row), each to the rank with the fewest terms so far
// (ties: the lower rank): the same answer on every rank from the same inputs.
Ownership Ownership::spread(std::int64_t rows, int ranks, std::vector<HotRow> hot, std::vector<std::int64_t> base) {
  check_shape(rows, ranks);
  if (std::int64_t(base.size()) != ranks)
    throw InvalidArgument(
        "base_terms", "want one count per rank (" + std::to_string(ranks) + "), got " + std::to_string(base.size()));
  Ownership o;
  o.kind_ = Kind::spread, o.rows_ = rows, o.ranks_ = ranks;
  std::sort(hot.begin(), hot.end(),
            [](HotRow const& a, HotRow const& b) { return std::tie(b.terms, a.row) < std::tie(a.terms, b.row); });
  using Load = std::pair<std::int64_t, int>;  // (terms, rank): the least first
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> load;
  for (int r = 0; r < ranks; ++r) load.push({base[std::size_t(r)], r});
  o.hosted_.assign(std::size_t(ranks), {});
  for (auto const& h : hot) {
    if (h.row < 0 || h.row >= rows)
      throw InvalidArgument("hot",
                            "hot row " + std::to_string(h.row) + " is outside [0, " + std::to_string(rows) + ")");
    auto [terms, r] = load.top();
    load.pop();
    o.hot_owner_.push_back({h.row, r});
    o.hosted_[std::size_t(r)].push_back(h.row);
    load.push({terms + h.terms, r});
  }
  std::sort(o.hot_owner_.begin(), o.hot_owner_.end());
  if (std::adjacent_find(o.hot_owner_.begin(), o.hot_owner_.end(),
                         [](auto const& a, auto const& b) { return a.first == b.first; }) != o.hot_owner_.end())
    throw InvalidArgument("hot", "a hot row is listed twice");
  for (auto& rows_here : o.hosted_) std::sort(rows_here.begin(), rows_here.end());
  o.hot_slot_.resize(o.hot_owner_.size());
  for (std::size_t i = 0; i < o.hot_owner_.size(); ++i) {
    auto const [row, r] = o.hot_owner_[i];
    auto const& here = o.hosted_[std::size_t(r)];
    o.hot_slot_[i] = o.own_slots(r) + (std::lower_bound(here.begin(), here.end(), row) - here.begin());
  }
  return o;
}

std::int64_t Ownership::own_slots(int rank) const {
  return rank < rows_ ? (rows_ - rank + ranks_ - 1) / ranks_ : 0;
}

std::int64_t Ownership::hot_index(std::int64_t row) const {
  auto const at = std::lower_bound(hot_owner_.begin(), hot_owner_.end(), std::pair<std::int64_t, int>{row, -1});
  return at != hot_owner_.end() && at->first == row ? at - hot_owner_.begin() : -1;
}

std::int64_t Ownership::first_row(int rank) const {
  if (kind_ == Kind::ranges) return rows_ / ranks_ * rank + std::min<std::int64_t>(rank, rows_ % ranks_);
  return rank;
}

int Ownership::owner_of(std::int64_t row) const {
  if (kind_ == Kind::spread) {
    auto const h = hot_owner_.empty() ? -1 : hot_index(row);
    return h >= 0 ? hot_owner_[std::size_t(h)].second : int(row % ranks_);
  }
  std::int64_t const q = rows_ / ranks_, extra = rows_ % ranks_;  // the first `extra` ranks hold q + 1
  return row < extra * (q + 1) ? int(row / (q + 1)) : int(extra + (row - extra * (q + 1)) / q);
}

std::int64_t Ownership::slot_of(std::int64_t row) const {
  if (kind_ == Kind::ranges) return row - first_row(owner_of(row));
  auto const h = hot_owner_.empty() ? -1 : hot_index(row);
  return h >= 0 ? hot_slot_[std::size_t(h)] : row / ranks_;
}

std::int64_t Ownership::slots(int rank) const {
  if (kind_ == Kind::ranges) return first_row(rank + 1) - first_row(rank);
  return own_slots(rank) + std::int64_t(hosted_[std::size_t(rank)].size());
}

std::int64_t Ownership::row_at(int rank, std::int64_t slot) const {
  if (kind_ == Kind::ranges) return first_row(rank) + slot;
  auto const own = own_slots(rank);
  if (slot >= own) return hosted_[std::size_t(rank)][std::size_t(slot - own)];
  std::int64_t const row = slot * ranks_ + rank;
  return hot_index(row) >= 0 ? -1 : row;  // a hot row's slot here is a hole: it lives on its owner
}

}  // namespace kembed
