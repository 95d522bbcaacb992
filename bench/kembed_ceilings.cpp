// kembed-ceilings: how fast this machine runs the memory access patterns that
// kembed's kernels are made of, with no kembed code at all, each as a fraction of
// the same memcpy bound that kembed-bench reports against (a memcpy of half the
// bytes the pattern moves, split over the same threads, measured in the same run).
// A kernel at a pattern's ceiling cannot gain by tuning its loops; only a different
// access pattern could. docs/PERFORMANCE.md reads these next to the grid.
//
//   kembed-ceilings [--threads N] [--row-bytes B] [--mib M] [--csv FILE]
//
// The patterns, over M MiB of rows of B bytes (R rows; "random" is a uniform
// random row for each of R positions, as the forward's ids):
//   read        each thread reads its share of the rows in order (dy in scan)
//   random      reads the rows in random order, fetched 32 rows ahead (the L2
//               prefetch the forward and the bucket fold use), summed in registers
//   gather      random reads as above, each row written out in order with
//               streaming stores (the forward)
//   scatter     the converse: rows read in order, each streamed to a row of a
//               random permutation (no kernel does this; it bounds one that would)
//   bucket      the positions of each 256 KiB bucket of rows in ascending order,
//               buckets shared out (the bucket fold's dy reads), summed in registers
//   bucket+add  the same, each row added into the bucket's 256 KiB slice of sums
//               (the bucket fold itself, without its sort)
#include <kembed/detail/kernel_common.hpp>
#include <kembed/detail/memory.hpp>

#include "bound.hpp"
#include "patterns.hpp"

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using Space = Kokkos::DefaultHostExecutionSpace;
using kembed::bench::fetch_row;
using kembed::bench::stream_fence;
using kembed::bench::stream_row;
using kembed::bench::sum_row;
using Bytes = Kokkos::View<char*, Kokkos::HostSpace>;

template <class F>
double best_of(int reps, F const& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto const t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

Bytes buffer(char const* label, std::size_t bytes, char fill) {
  Bytes b(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), bytes);
  kembed::detail::advise_huge_pages(b.data(), bytes);
  std::memset(b.data(), fill, bytes);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  std::int64_t row_bytes = 512, mib = 512;
  std::string csv;
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    auto const value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kembed-ceilings: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads")
      threads = std::stoi(value());
    else if (a == "--row-bytes")
      row_bytes = std::stoll(value());
    else if (a == "--mib")
      mib = std::stoll(value());
    else if (a == "--csv")
      csv = value();
    else {
      std::fprintf(stderr, "usage: kembed-ceilings [--threads N] [--row-bytes B] [--mib M] [--csv FILE]\n");
      return 2;
    }
  }
  if (threads < 1 || row_bytes < 128 || row_bytes % 128 != 0 || mib < 1) {
    std::fprintf(stderr, "kembed-ceilings: need --threads >= 1, --row-bytes a multiple of 128, --mib >= 1\n");
    return 2;
  }
  setenv("KOKKOS_NUM_THREADS", std::to_string(threads).c_str(), 1);  // as kembed-bench: any Kokkos version
  setenv("KOKKOS_DISABLE_WARNINGS", "1", 0);
  int one = 1;
  char name[] = "kembed-ceilings";
  char* args[] = {name, nullptr};
  Kokkos::ScopeGuard guard(one, args);
  threads = Space().concurrency();

  std::size_t const bytes = std::size_t(mib) << 20;
  std::int64_t const w = row_bytes / 4, rows = std::int64_t(bytes / std::size_t(row_bytes));
  std::int64_t const bucket_rows = std::max<std::int64_t>(1, (256 << 10) / row_bytes), ahead = kembed::bench::fetch_ahead;
  Bytes const src = buffer("kembed::ceilings::rows", bytes, 1), dst = buffer("kembed::ceilings::out", bytes, 0);
  auto const* in = reinterpret_cast<float const*>(src.data());
  auto* out = reinterpret_cast<float*>(dst.data());

  std::mt19937_64 rng(42);
  std::vector<std::int64_t> random(rows), bucketed(rows), shuffled(rows);
  for (auto& r : random) r = std::int64_t(rng() % std::uint64_t(rows));
  for (std::int64_t j = 0; j < rows; ++j) shuffled[j] = j;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  {  // positions by bucket of their row, ascending within each: a stable counting sort
    std::int64_t const buckets = (rows + bucket_rows - 1) / bucket_rows;
    std::vector<std::int64_t> start(buckets + 1, 0);
    for (auto r : random) ++start[r / bucket_rows + 1];
    for (std::int64_t k = 0; k < buckets; ++k) start[k + 1] += start[k];
    for (std::int64_t p = 0; p < rows; ++p) bucketed[start[random[p] / bucket_rows]++] = p;
  }
  // Each listed position's row within its bucket, beside it (kembed packs the two).
  std::vector<std::int64_t> slot(rows);
  for (std::int64_t j = 0; j < rows; ++j) slot[j] = random[bucketed[j]] % bucket_rows;
  auto const* rnd = random.data();
  auto const* bkt = bucketed.data();
  auto const* perm = shuffled.data();
  auto const* in_bucket = slot.data();
  std::vector<float> sink(std::size_t(threads) * 16, 0.0f);
  float* sums = sink.data();
  int const reps = 5;

  kembed::bench::Memcpy<Space> memcpy_bound;  // kembed-bench's own, timed as it times it
  // Reads rows list[lo, hi) (or lo..hi in order when list is null) into sums.
  auto const read_rows = [=](std::int64_t const* list, bool fetch) {
    return [=](int i, std::int64_t lo, std::int64_t hi) {
      float s[32] = {};
      for (std::int64_t j = lo; j < hi; ++j) {
        if (fetch && j + ahead < hi) fetch_row(in + list[j + ahead] * w, w);
        sum_row(in + (list ? list[j] : j) * w, w, s);
      }
      for (int k = 0; k < 16; ++k) sums[16 * i + k] += s[k];
    };
  };

  struct Row {
    char const* pattern;
    double moved, seconds, bound;
  };
  std::vector<Row> results;
  auto const run = [&](char const* pattern, double moved, auto const& body) {
    double const s = best_of(reps, [&] { kembed::bench::per_thread<Space>("kembed::ceilings::pattern", threads, rows, body); });
    results.push_back({pattern, moved, s, memcpy_bound.seconds(std::size_t(moved))});
  };
  double const n = double(bytes);
  run("read", n, read_rows(nullptr, false));
  run("random", n, read_rows(rnd, true));
  run("gather", 2 * n, [=](int, std::int64_t lo, std::int64_t hi) {
    for (std::int64_t j = lo; j < hi; ++j) {
      if (j + ahead < hi) fetch_row(in + rnd[j + ahead] * w, w);
      stream_row(out + j * w, in + rnd[j] * w, w);
    }
    stream_fence();
  });
  run("scatter", 2 * n, [=](int, std::int64_t lo, std::int64_t hi) {
    for (std::int64_t j = lo; j < hi; ++j) stream_row(out + perm[j] * w, in + j * w, w);
    stream_fence();
  });
  run("bucket", n, read_rows(bkt, true));
  run("bucket+add", n, [=](int i, std::int64_t lo, std::int64_t hi) {
    std::vector<float> slice(std::size_t(bucket_rows * w), 0.0f);
    for (std::int64_t j = lo; j < hi; ++j) {
      if (j + ahead < hi) fetch_row(in + bkt[j + ahead] * w, w);
      float* acc = slice.data() + in_bucket[j] * w;
      float const* row = in + bkt[j] * w;
      for (std::int64_t c = 0; c < w; ++c) acc[c] += row[c];
    }
    sums[16 * i] += slice[0];
  });

  std::printf("kembed-ceilings: %d thread(s), %lld MiB of %lld-byte rows\n", threads, (long long)mib,
              (long long)row_bytes);
  std::printf("| pattern | ms | GB/s moved | of the memcpy bound |\n| --- | --- | --- | --- |\n");
  for (auto const& r : results)
    std::printf("| %s | %.2f | %.1f | %.0f%% |\n", r.pattern, r.seconds * 1e3, r.moved / r.seconds / 1e9,
                100 * r.bound / r.seconds);
  if (!csv.empty()) {
    FILE* f = std::fopen(csv.c_str(), "a");
    if (f == nullptr) {
      std::fprintf(stderr, "kembed-ceilings: cannot write %s\n", csv.c_str());
      return 1;
    }
    std::fseek(f, 0, SEEK_END);
    if (std::ftell(f) == 0) std::fprintf(f, "threads,row_bytes,mib,pattern,bytes_moved,seconds,memcpy_seconds,fraction_of_bound\n");
    for (auto const& r : results)
      std::fprintf(f, "%d,%lld,%lld,%s,%.6g,%.6g,%.6g,%.4f\n", threads, (long long)row_bytes, (long long)mib, r.pattern,
                   r.moved, r.seconds, r.bound, r.bound / r.seconds);
    std::fclose(f);
  }
  double keep = 0;
  for (float x : sink) keep += x;
  return keep == -1.0 ? 3 : 0;  // the sums are used, so no pattern is optimised away
}
