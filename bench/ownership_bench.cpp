// How evenly kembed's ownership rules (kembed/core/ownership.hpp, the functions the
// MPI layer runs) spread a run's fold terms over P ranks, from its /counts: the
// busiest owner's terms over the mean (T / P), the most slots any rank holds over an
// even share (V / P), and the least any assignment reaches, max(1, hottest row x P / T).
//   kembed-ownership-bench RUN.h5 [--ranks 2,3,4,8,...]
// bench/ownership_balance.py compares other rules (row mod P, hashes, greedy).
#include "args.hpp"

#include <kembed/core/ownership.hpp>
#include <kembed/io/run_file.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <numeric>
#include <string>
#include <vector>

namespace {

struct Balance {
  double busiest = 0, slots = 0;
};

Balance balance_of(kembed::Ownership const& o, std::vector<std::int64_t> const& counts, std::int64_t total) {
  int const p = o.ranks();
  std::vector<std::int64_t> terms(std::size_t(p), 0);
  for (std::size_t row = 0; row < counts.size(); ++row)
    terms[std::size_t(o.owner_of(std::int64_t(row)))] += counts[row];
  std::int64_t most_slots = 0;
  for (int r = 0; r < p; ++r) most_slots = std::max(most_slots, o.slots(r));
  double const v = double(counts.size());
  return {double(*std::max_element(terms.begin(), terms.end())) * p / double(total), double(most_slots) * p / v};
}

}  // namespace

int main(int argc, char** argv) {
  std::string run;
  std::vector<long long> ranks{2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  try {
    if (argc < 2 || argv[1][0] == '-') throw std::invalid_argument("give a run file first");
    run = argv[1];
    kembed::bench::for_each_option(argc - 1, argv + 1, [&](std::string const& a, auto&& value) {
      if (a == "--ranks")
        ranks = kembed::bench::parse_list(value(), "--ranks");
      else
        throw std::invalid_argument("unknown option " + a + " (use RUN.h5 --ranks LIST)");
    });
    auto const counts = kembed::io::read_run(run, false).counts;
    std::int64_t const total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
    if (total == 0) throw std::invalid_argument(run + ": no terms (every count is 0)");
    auto const hottest = *std::max_element(counts.begin(), counts.end());
    std::printf("%s: V = %zu, T = %lld, the hottest row %.2f %% of the terms\n", run.c_str(), counts.size(),
                static_cast<long long>(total), 100.0 * double(hottest) / double(total));
    std::printf("| P | ranges: terms | spread: terms | spread: slots | spread: hot rows | least possible |\n");
    std::printf("| --- | --- | --- | --- | --- | --- |\n");
    for (long long p : ranks) {
      auto const ranges = balance_of(kembed::Ownership::ranges(std::int64_t(counts.size()), int(p)), counts, total);
      auto const own = kembed::Ownership::spread(counts, int(p));
      auto const spread = balance_of(own, counts, total);
      std::printf("| %lld | %.2fx | %.2fx | %.2fx | %zu | %.2fx |\n", p, ranges.busiest, spread.busiest, spread.slots,
                  own.hot_rows().size(), std::max(1.0, double(hottest) * double(p) / double(total)));
    }
  } catch (std::exception const& e) {
    std::fprintf(stderr, "kembed-ownership-bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
