#include "test_support.hpp"

#include <kembed/core/compare.hpp>
#include <kembed/core/synthetic.hpp>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>

namespace kembed::test {

::testing::AssertionResult same_bits(std::vector<float> const& got, std::vector<float> const& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: got " << got.size() << ", want " << want.size();
  // (empty vectors may hold null pointers, which memcmp must not be given)
  if (got.empty() || std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0)
    return ::testing::AssertionSuccess();
  std::size_t first = got.size(), differing = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (bits_of(got[i]) != bits_of(want[i])) {
      if (first == got.size()) first = i;
      ++differing;
    }
  }
  std::ostringstream msg;
  msg << differing << " of " << got.size() << " floats differ; first at index " << first << ": got 0x" << std::hex
      << std::setw(8) << std::setfill('0') << bits_of(got[first]) << " (" << std::defaultfloat << std::setprecision(9)
      << got[first] << "), want 0x" << std::hex << std::setw(8) << bits_of(want[first]) << " (" << std::defaultfloat
      << want[first] << ")";
  return ::testing::AssertionFailure() << msg.str();
}

::testing::AssertionResult same_values(std::vector<std::int64_t> const& got, std::vector<std::int64_t> const& want) {
  if (got == want) return ::testing::AssertionSuccess();
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: got " << got.size() << ", want " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return ::testing::AssertionFailure() << "first difference at " << i << ": got " << got[i] << ", want " << want[i];
  return ::testing::AssertionFailure();
}

IdsHolder::IdsHolder(Batch const& b) {
  if (b.as_int32)
    i32.assign(b.ids.begin(), b.ids.end());
  else
    i64 = &b.ids;
}

IdsRef IdsHolder::ref() const {
  if (i64) return IdsRef(i64->data(), Shape{static_cast<std::int64_t>(i64->size())});
  return IdsRef(i32.data(), Shape{static_cast<std::int64_t>(i32.size())});
}

std::vector<float> table_for(std::int64_t rows, std::int64_t dim, std::uint64_t seed) {
  return synthetic::uniform_floats(rows * dim, seed);
}

namespace {

Batch make(std::string name, std::int64_t v, std::int64_t d, std::vector<std::int64_t> ids, std::uint64_t seed) {
  Batch b;
  b.name = std::move(name);
  b.rows = v;
  b.dim = d;
  b.ids = std::move(ids);
  b.dy = synthetic::uniform_floats(b.positions() * d, seed);
  return b;
}

}  // namespace

namespace {

using synthetic::uniform_ids;
using synthetic::zipf_ids;

// Each input's maker, by name, in the catalogue's order.
struct Maker {
  char const* name;
  Batch (*make)(std::string name);
};

Maker const makers[] = {
    {"uniform", [](std::string n) { return make(std::move(n), 1000, 16, uniform_ids(1000, 20000, 1), 101); }},
    {"zipf_s1_1", [](std::string n) { return make(std::move(n), 5000, 32, zipf_ids(5000, 50000, 1.1, 2), 102); }},
    {"zipf_int32_padding",
     [](std::string n) {
       auto b = make(std::move(n), 3000, 24, zipf_ids(3000, 40000, 1.1, 3), 103);
       b.as_int32 = true;
       b.padding_idx = 0;  // the hottest row is the padding row
       return b;
     }},
    {"one_id_everywhere",
     [](std::string n) { return make(std::move(n), 50, 8, std::vector<std::int64_t>(10000, 7), 104); }},
    {"all_on_padding_row",
     [](std::string n) {
       auto b = make(std::move(n), 10, 4, std::vector<std::int64_t>(1000, 3), 105);
       b.padding_idx = -7;  // counts from the end: row 3
       return b;
     }},
    {"negative_zero_only_rows",
     [](std::string n) {
       // Rows 1 and 2 receive only -0.0: torch (and the contract) give +0.0 there.
       auto b = make(std::move(n), 8, 5, uniform_ids(8, 400, 6), 106);
       for (std::int64_t p = 0; p < b.positions(); ++p)
         if (b.ids[p] == 1 || b.ids[p] == 2)
           for (std::int64_t c = 0; c < b.dim; ++c) b.dy[p * b.dim + c] = -0.0f;
       return b;
     }},
    {"subnormal_dy",
     [](std::string n) {
       // Subnormal terms: flush-to-zero would erase them, and their sums stay exact.
       auto b = make(std::move(n), 16, 7, uniform_ids(16, 2000, 7), 107);
       synthetic::Rng rng(8);
       for (auto& x : b.dy) x = from_bits(static_cast<std::uint32_t>(rng.next() & 0x807fffffu));
       return b;
     }},
    {"overflow_to_inf",
     [](std::string n) {
       // Terms near FLT_MAX of mixed sign: the ascending sum overflows to infinity
       // part-way, and the order decides which rows end at +inf, -inf or finite.
       auto b = make(std::move(n), 4, 3, uniform_ids(4, 64, 9), 108);
       for (auto& x : b.dy) x = (x < -0.25f ? -3.0e38f : 3.0e38f) + x * 1.0e37f;
       return b;
     }},
    {"v_equals_1", [](std::string n) { return make(std::move(n), 1, 9, std::vector<std::int64_t>(500, 0), 109); }},
    {"d_equals_1", [](std::string n) { return make(std::move(n), 100, 1, uniform_ids(100, 3000, 10), 110); }},
    {"d_3", [](std::string n) { return make(std::move(n), 200, 3, zipf_ids(200, 5000, 1.1, 11), 111); }},
    {"d_17", [](std::string n) { return make(std::move(n), 200, 17, zipf_ids(200, 5000, 1.1, 12), 112); }},
    {"d_130", [](std::string n) { return make(std::move(n), 200, 130, zipf_ids(200, 5000, 1.1, 13), 113); }},
    {"t_much_larger_than_v", [](std::string n) { return make(std::move(n), 3, 8, uniform_ids(3, 100000, 14), 114); }},
    {"v_much_larger_than_t",
     [](std::string n) { return make(std::move(n), 200000, 4, uniform_ids(200000, 50, 15), 115); }},
    {"many_buckets_zipf_padding",
     [](std::string n) {
       // Plan `bucket` with many buckets (the last one short), hot buckets' rows dealt
       // to several teams, and the padding row inside a bucket.
       auto b = make(std::move(n), 70001, 48, zipf_ids(70001, 60000, 1.1, 17), 117);
       b.padding_idx = 5000;
       return b;
     }},
    {"sparse_buckets_zipf_padding",
     [](std::string n) {
       // Plan `bucket`'s sparse path (a bucket with fewer entries than rows / 8 skips
       // the scratch pad): T much smaller than V; Zipf puts ~90% of the positions in
       // the first bucket, which is then hot and split, with the padding row in it.
       auto b = make(std::move(n), 200003, 3, zipf_ids(200003, 2000, 1.1, 18), 118);
       b.padding_idx = 1;
       return b;
     }},
    {"hot_bucket_columns_padding",
     [](std::string n) {
       // Plan `bucket`'s hot first bucket (~90% of the positions) split by columns:
       // d = 64 is whole cache lines for 2 and 4 parts. The padding row is in it.
       auto b = make(std::move(n), 3000, 64, zipf_ids(3000, 30000, 1.1, 19), 119);
       b.padding_idx = 2;
       return b;
     }},
    // `auto` sorts here with 2-4 threads (64 KiB of gradient, 512 KiB of dy), and
    // past 4 by the contract's rule (V * T = 2^27).
    {"auto_picks_sort", [](std::string n) { return make(std::move(n), 4096, 4, zipf_ids(4096, 32768, 1.1, 16), 116); }},
};

}  // namespace

std::vector<Input> catalogue() {
  std::vector<Input> out;
  for (auto const& m : makers) out.push_back(Input{m.name});
  return out;
}

Batch const& Input::batch() const {
  return catalogue_batch(name);
}

Batch const& catalogue_batch(std::string const& name) {
  // Made once per process, on first use; gtest runs one thread of tests.
  static std::map<std::string, Batch> made;
  if (auto it = made.find(name); it != made.end()) return it->second;
  for (auto const& m : makers)
    if (name == m.name) return made.emplace(name, m.make(name)).first->second;
  throw std::invalid_argument("the catalogue has no input named " + name);
}

std::ostream& operator<<(std::ostream& out, Agreement const& a) {
  return out << a.equal << " equal, largest difference " << a.ulps << " ULP";
}

Agreement agreement(std::vector<float> const& a, std::vector<float> const& b) {
  Agreement r;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    r.equal += bits_of(a[i]) == bits_of(b[i]);
    r.ulps = std::max(r.ulps, ulp_distance(a[i], b[i]));
  }
  return r;
}

std::vector<float> parse_hex(std::string const& line) {
  std::istringstream in(line);
  std::vector<float> out;
  std::string word;
  while (in >> word) out.push_back(from_bits(static_cast<std::uint32_t>(std::stoul(word, nullptr, 16))));
  return out;
}

std::vector<std::int64_t> parse_ints(std::string const& line) {
  std::istringstream in(line);
  std::vector<std::int64_t> out;
  for (std::int64_t x; in >> x;) out.push_back(x);
  return out;
}

}  // namespace kembed::test
