#pragma once
// Rows between the fold's owners (a team layer's slots, kembed/core/ownership.hpp)
// and the files' row ranges (contiguous, in rank order): run files, checkpoints and
// their digests are then the same bytes whatever owned the rows while they folded.
#include <kembed/core/ownership.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace kembed::job::detail {

// Rows (global numbers, or a rank's slots), each with its count and d values.
struct RowRecords {
  std::vector<std::int64_t> rows, counts;
  std::vector<float> values;  // rows.size() x d, row-major
};

// Collective. Sends each of this rank's `n` records (record(i, row, count, values):
// false for none, as a hole) to its row's owner under `to`, and hands every record
// that arrives to take(row, count, values), in no set order. In rounds of at most
// `piece` bytes sent per rank, so the memory it adds stays bounded whatever the rows.
template <class Team, class Record, class Take>
void move_rows(Team const& team, Ownership const& to, std::int64_t n, std::int64_t d, Record&& record, Take&& take,
               std::size_t piece = std::size_t{16} << 20) {
  std::size_t const bytes = 16 + 4 * std::size_t(d);
  std::int64_t const per_round = std::max<std::int64_t>(1, std::int64_t(piece / bytes));
  std::int64_t const rounds = team.max((n + per_round - 1) / per_round);
  std::vector<std::string> out(static_cast<std::size_t>(team.size()));
  std::int64_t row = 0, count = 0;
  float const* values = nullptr;
  for (std::int64_t round = 0, i = 0; round < rounds; ++round) {
    for (auto& o : out) o.clear();
    for (std::int64_t end = std::min(n, i + per_round); i < end; ++i) {
      if (!record(i, row, count, values)) continue;
      auto& o = out[std::size_t(to.owner_of(row))];
      o.append(reinterpret_cast<char const*>(&row), 8).append(reinterpret_cast<char const*>(&count), 8);
      o.append(reinterpret_cast<char const*>(values), 4 * std::size_t(d));
    }
    auto const in = team.exchange_bytes(out);
    std::vector<float> v(static_cast<std::size_t>(d));
    for (std::size_t at = 0; at + bytes <= in.size(); at += bytes) {
      std::memcpy(&row, in.data() + at, 8);
      std::memcpy(&count, in.data() + at + 8, 8);
      if (d > 0) std::memcpy(v.data(), in.data() + at + 16, 4 * std::size_t(d));
      take(row, count, v.data());
    }
  }
}

// Records ordered by their `rows` entries.
inline RowRecords sorted_by_row(RowRecords in, std::int64_t d) {
  if (std::is_sorted(in.rows.begin(), in.rows.end())) return in;
  std::vector<std::size_t> order(in.rows.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return in.rows[a] < in.rows[b]; });
  RowRecords out;
  out.values.reserve(in.values.size());
  for (auto i : order) {
    out.rows.push_back(in.rows[i]);
    out.counts.push_back(in.counts[i]);
    out.values.insert(out.values.end(), in.values.begin() + std::ptrdiff_t(i * std::size_t(d)),
                      in.values.begin() + std::ptrdiff_t((i + 1) * std::size_t(d)));
  }
  return out;
}

// Collective. Records (global rows) to their owners under `to`; what arrives, rows ascending.
template <class Team>
RowRecords move_records(Team const& team, Ownership const& to, RowRecords const& mine, std::int64_t d) {
  RowRecords got;
  move_rows(
      team, to, std::int64_t(mine.rows.size()), d,
      [&](std::int64_t i, std::int64_t& row, std::int64_t& count, float const*& values) {
        row = mine.rows[std::size_t(i)], count = mine.counts[std::size_t(i)];
        values = mine.values.data() + i * d;
        return true;
      },
      [&](std::int64_t row, std::int64_t count, float const* values) {
        got.rows.push_back(row), got.counts.push_back(count);
        got.values.insert(got.values.end(), values, values + d);
      });
  return sorted_by_row(std::move(got), d);
}

}  // namespace kembed::job::detail
