#pragma once
// The bag forward: each bag's rows pooled into one output row, positions ascending
// (docs/CONTRACT.md, "Bags"). Nothing is written unless every id is in [0, V).
#include <kembed/detail/checks.hpp>
#include <kembed/detail/kernel_common.hpp>

#include <cstdint>
#include <kembed/core/bags.hpp>

namespace kembed::detail {

// Bag b holds positions [bounds(b), bounds(b + 1)): `starts` are the call's offsets as
// given (B entries, or B + 1 ending at T), read in place, and T follows the last. A
// copy with T appended cost a fifth of a forward of bags of one (fresh pages per call).
template <class MemorySpace>
struct BagBounds {
  Kokkos::View<std::int64_t const*, MemorySpace> starts;
  std::int64_t positions = 0;
  KOKKOS_INLINE_FUNCTION std::int64_t operator()(std::int64_t i) const {
    return i < std::int64_t(starts.extent(0)) ? starts(i) : positions;
  }
};

// A bag call's inputs in the execution space's memory: B bags, and weights empty or
// T long.
template <class MemorySpace>
struct BagViews {
  BagBounds<MemorySpace> bounds;
  Kokkos::View<float const*, MemorySpace> weights;
  std::int64_t padding = -1;  // the padding row, -1 for none
  Pooling pooling = Pooling::sum;
  std::int64_t bags = 0;
  std::int64_t count() const { return bags; }
};

inline constexpr std::int64_t host_bag_tile = 64;  // columns a host bag's sum keeps in registers
inline constexpr std::int64_t host_bag_run = 64;   // bags a host thread takes at a time

// One team per bag, the columns on its vector lanes (one lane on the host): each
// position's row is read once, in order, into the bag's output row. Host backends run
// loops of their own (below: the same operations in the same order), and the host
// suites check the device's through bag_forward_shaped<false>. With max, `won` (B, d),
// where given, receives each value's position, -1 for an empty bag (the backward's
// argmax).
// A host bag's max with its argmax, 64 columns at a time: the same comparisons as
// pool_bag's (the first position that counts copied, each later one taken where
// strictly greater), the winner kept as an int32 offset in the bag beside each float
// (one width, so the select vectorises; an int64 per column cost 2.7x the max alone).
template <std::int64_t Width, class IdView, class Table>
inline void max_tile_host(std::int64_t begin, std::int64_t end, std::int64_t width, std::int64_t c0, IdView const& ids,
                          Table const& weight, std::int64_t pad, float* const out, std::int64_t* const at) {
  std::int64_t const n_cols = Width > 0 ? Width : width;
  float best[host_bag_tile];
  std::int32_t where[host_bag_tile];
  bool first = true;
  for (std::int64_t p = begin; p < end; ++p) {
    auto const r = static_cast<std::int64_t>(ids(p));
    if (r == pad) continue;
    float const* const row = &weight(r, c0);
    auto const offset = static_cast<std::int32_t>(p - begin);
    if (first) {
      for (std::int64_t k = 0; k < n_cols; ++k) best[k] = row[k], where[k] = offset;
      first = false;
      continue;
    }
    for (std::int64_t k = 0; k < n_cols; ++k) {  // masks, not selects: GCC made those stores branch
      std::int32_t const take = -static_cast<std::int32_t>(row[k] > best[k]);
      best[k] = row[k] > best[k] ? row[k] : best[k];
      where[k] = (offset & take) | (where[k] & ~take);
    }
  }
  for (std::int64_t k = 0; k < n_cols; ++k) {  // no position counts: +0.0, and no argmax
    out[k] = first ? 0.0f : best[k];
    at[k] = first ? -1 : begin + where[k];
  }
}

// A host bag's max: the first position that counts copied, each later one taken where
// strictly greater (the same comparisons as pool_bag's, without a branch per column).
template <class IdView, class Table, class Won>
inline void max_bag_host(std::int64_t b, std::int64_t begin, std::int64_t end, IdView const& ids, Table const& weight,
                         std::int64_t pad, float* const out, Won const& won) {
  std::int64_t const d = weight.extent(1);
  if (won.data() != nullptr && end - begin <= std::int64_t(INT32_MAX)) {
    for (std::int64_t c0 = 0; c0 < d; c0 += host_bag_tile) {
      std::int64_t const width = d - c0 < host_bag_tile ? d - c0 : host_bag_tile;
      if (width == host_bag_tile)
        max_tile_host<host_bag_tile>(begin, end, width, c0, ids, weight, pad, out + c0, &won(b, c0));
      else
        max_tile_host<0>(begin, end, width, c0, ids, weight, pad, out + c0, &won(b, c0));
    }
    return;
  }
  bool const record = won.data() != nullptr;  // a bag of 2^31 positions or more records here
  std::int64_t* const at = record ? &won(b, 0) : nullptr;
  bool first = true;
  for (std::int64_t p = begin; p < end; ++p) {
    auto const r = static_cast<std::int64_t>(ids(p));
    if (r == pad) continue;
    float const* const row = &weight(r, 0);
    if (first) {
      for (std::int64_t c = 0; c < d; ++c) out[c] = row[c];
      if (record)
        for (std::int64_t c = 0; c < d; ++c) at[c] = p;
      first = false;
    } else if (record) {
      for (std::int64_t c = 0; c < d; ++c) {
        bool const take = row[c] > out[c];
        out[c] = take ? row[c] : out[c];
        at[c] = take ? p : at[c];
      }
    } else {
      for (std::int64_t c = 0; c < d; ++c) out[c] = row[c] > out[c] ? row[c] : out[c];
    }
  }
  if (first) {  // no position counts: +0.0, and no argmax
    for (std::int64_t c = 0; c < d; ++c) out[c] = 0.0f;
    if (record)
      for (std::int64_t c = 0; c < d; ++c) at[c] = -1;
  }
}

// Fetches the row prefetch_rows positions past p (its columns c0 .. c0 + n_cols).
template <class IdView, class Table>
inline void fetch_row_ahead(IdView const& ids, Table const& weight, std::int64_t p, std::int64_t c0,
                            std::int64_t n_cols) {
  if (p + prefetch_rows < std::int64_t(ids.extent(0))) {
    float const* ahead = &weight(static_cast<std::int64_t>(ids(p + prefetch_rows)), c0);
    for (std::int64_t k = 0; k < n_cols; k += line_floats) prefetch(ahead + k);
  }
}

// The first position in [p, end) that counts (not the padding row's), fetching rows
// ahead as it goes; end if none does.
template <class IdView, class Table>
inline std::int64_t first_counting(IdView const& ids, Table const& weight, std::int64_t p, std::int64_t end,
                                   std::int64_t pad, std::int64_t c0, std::int64_t n_cols) {
  for (; p < end; ++p) {
    fetch_row_ahead(ids, weight, p, c0, n_cols);
    if (static_cast<std::int64_t>(ids(p)) != pad) break;
  }
  return p;
}

// A host bag's sum, mean or weighted sum, the same operations as pool_bag's in the
// same order, tile by tile of 64 columns held in registers over the whole bag (the
// loop over positions then reads each row once and writes nothing until the end),
// the row `prefetch_rows` positions ahead fetched (the next bags' too: a thread takes
// neighbouring bags). 1 thread, V = 1e5, d = 64, 2,048 bags of 32: 0.53 -> 0.38 ms.
// The fold starts at +0.0; its first step (0 + row, or fma(row, w, 0)) is taken from
// the first row that counts, outside the loop, so the loop's body is one add (or fma)
// per column (a zeroed array's memset was a quarter of a bag of one position's time).
template <std::int64_t Width, bool Weighted, class IdView, class Table, class Weights>
inline std::int64_t sum_tile_host(std::int64_t begin, std::int64_t end, std::int64_t width, std::int64_t c0,
                                  IdView const& ids, Table const& weight, Weights const& w, std::int64_t pad,
                                  float* const out) {
  std::int64_t const n_cols = Width > 0 ? Width : width;
  std::int64_t p = first_counting(ids, weight, begin, end, pad, c0, n_cols);
  if (p == end) {  // no position counts
    for (std::int64_t k = 0; k < n_cols; ++k) out[k] = 0.0f;
    return 0;
  }
  float acc[host_bag_tile];
  float const* row = &weight(static_cast<std::int64_t>(ids(p)), c0);
  if constexpr (Weighted) {
    float const wp = w(p);
    for (std::int64_t k = 0; k < n_cols; ++k) acc[k] = fma_rn(row[k], wp, 0.0f);
  } else {
    for (std::int64_t k = 0; k < n_cols; ++k) acc[k] = 0.0f + row[k];
  }
  std::int64_t n = 1;
  for (++p; p < end; ++p) {
    fetch_row_ahead(ids, weight, p, c0, n_cols);
    auto const r = static_cast<std::int64_t>(ids(p));
    if (r == pad) continue;
    row = &weight(r, c0);
    if constexpr (Weighted) {
      float const wp = w(p);
      for (std::int64_t k = 0; k < n_cols; ++k) acc[k] = fma_rn(row[k], wp, acc[k]);
    } else {
      for (std::int64_t k = 0; k < n_cols; ++k) acc[k] = acc[k] + row[k];
    }
    ++n;
  }
  for (std::int64_t k = 0; k < n_cols; ++k) out[k] = acc[k];
  return n;
}

#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__HIPCC__) && !defined(__SYCL_DEVICE_ONLY__)
#define KEMBED_HOST_VECTOR_TILE 1
// sum_tile_host<64, Weighted> with the tile as vectors of Lanes floats (GCC's vector
// extension: one IEEE addition per lane; 4, 8 or 16 lanes as the copy's registers
// hold), which the compiler keeps in registers: as a float array it lived on the
// stack, stored after each row and copied out 16 bytes at a time.
template <int Lanes>
struct HostVector;  // Lanes floats (GCC takes no vector_size that depends on a parameter)
template <>
struct HostVector<4> {
  typedef float type __attribute__((vector_size(16)));
  typedef float unaligned __attribute__((vector_size(16), aligned(4)));  // a store to any float
};
template <>
struct HostVector<8> {
  typedef float type __attribute__((vector_size(32)));
  typedef float unaligned __attribute__((vector_size(32), aligned(4)));  // a store to any float
};
template <>
struct HostVector<16> {
  typedef float type __attribute__((vector_size(64)));
  typedef float unaligned __attribute__((vector_size(64), aligned(4)));  // a store to any float
};

// A weighted tile's fused multiply-add on each lane: GCC does not vectorise fma_rn over
// a vector's lanes (5x slower than the array), so the x86 instruction is named, in
// functions that target it (the copies of run_wide that use them do too; a build
// with one baseline copy has no such instruction to name).
#if defined(__x86_64__) && !defined(__clang__) && (defined(KEMBED_HOST_AVX2_CLONES) || defined(__AVX2__))
#define KEMBED_HOST_FMA_TILE 1
// (By reference: a vector passed by value to such a function changes the call's ABI.)
__attribute__((target("avx2,fma"))) inline void fma_lanes(HostVector<8>::type const& row, HostVector<8>::type const& w,
                                                          HostVector<8>::type& acc) {
  acc = __builtin_ia32_vfmaddps256(row, w, acc);
}
__attribute__((target("avx512f"))) inline void fma_lanes(HostVector<16>::type const& row, HostVector<16>::type const& w,
                                                         HostVector<16>::type& acc) {
  acc = __builtin_ia32_vfmaddps512_mask(row, w, acc, static_cast<unsigned short>(0xffff), 4);  // 4: current rounding
}
#endif
template <int Lanes, bool Weighted>
inline constexpr bool vector_tile = !Weighted
#ifdef KEMBED_HOST_FMA_TILE
                                    || Lanes >= 8
#endif
    ;

// What a host vector tile reads, as raw pointers and sizes taken once per run of
// bags: read through the views, their fields were loaded again for every bag.
template <class Id>
struct HostTileArrays {
  Id const* ids;
  std::int64_t n_ids;
  float const* table;  // row r at table + r * stride
  std::int64_t stride;
  float const* w;  // per-sample weights, or null
};
template <class IdView, class Table, class Weights>
HostTileArrays<std::remove_const_t<typename IdView::value_type>> host_tile_arrays(IdView const& ids,
                                                                                  Table const& weight,
                                                                                  Weights const& w) {
  static_assert(!std::is_same_v<typename IdView::array_layout, Kokkos::LayoutStride> &&
                    std::is_same_v<typename Table::array_layout, Kokkos::LayoutRight>,
                "contiguous ids and rows");
  return {ids.data(), std::int64_t(ids.extent(0)), weight.data(), std::int64_t(weight.stride(0)), w.data()};
}

// Cols columns of each row in registers (a tile, or a whole row of two tiles), the rows
// ahead fetched into L1 (Near) or L2.
template <int Lanes, bool Weighted, int Cols, bool Near, class Id>
inline std::int64_t sum_tile_vectors(std::int64_t begin, std::int64_t end, std::int64_t c0, HostTileArrays<Id> const& a,
                                     std::int64_t pad, float* const out) {
  using vec = typename HostVector<Lanes>::type;
  static_assert(sizeof(vec) == 4 * Lanes, "a vector of Lanes floats");
  static_assert(vector_tile<Lanes, Weighted>, "a weighted vector tile needs the copy's fused multiply-add");
  static_assert(Cols % Lanes == 0 && Cols % line_floats == 0, "whole vectors and whole lines");
  constexpr int parts = Cols / Lanes;
  // One loop from the fold's +0.0 (its first step takes -0.0 to +0.0, as the fold's
  // does), over raw pointers: through the views, with the first step apart, GCC's
  // loop took 1.12x as long at bags of one position.
  Id const* const id = a.ids;
  std::int64_t const n_ids = a.n_ids, stride = a.stride;
  float const* const rows = a.table + c0;
  vec acc[parts] = {};
  std::int64_t n = 0;
  auto const add = [&](std::int64_t p) {
    auto const r = static_cast<std::int64_t>(id[p]);
    if (r == pad) return;
    float const* const row = rows + r * stride;
    vec wp{};
    // w(p) in every lane as w - 0, w in every bit: 0 + w made a weight of -0.0 +0.0,
    // and fma(x, +0.0, -0.0) is +0.0 where the contract's fma(x, -0.0, -0.0) is -0.0.
    if constexpr (Weighted) wp = a.w[p] - wp;
#pragma GCC unroll 32
    for (int j = 0; j < parts; ++j) {  // acc = acc + row, or fma(row, w, acc)
      vec v;
      __builtin_memcpy(&v, row + Lanes * j, sizeof v);
#ifdef KEMBED_HOST_FMA_TILE
      if constexpr (Weighted)
        fma_lanes(v, wp, acc[j]);
      else
#endif
        acc[j] = acc[j] + v;
    }
    ++n;
  };
  // The positions with a row prefetch_rows ahead in a loop of their own: the id count
  // then bounds the loop instead of being compared, from a register, at each position.
  std::int64_t const ahead_end = n_ids - prefetch_rows < end ? n_ids - prefetch_rows : end;
  std::int64_t p = begin;
  for (; p < ahead_end; ++p) {
    float const* const ahead = rows + static_cast<std::int64_t>(id[p + prefetch_rows]) * stride;
    for (std::int64_t k = 0; k < Cols; k += line_floats) Near ? prefetch_near(ahead + k) : prefetch(ahead + k);
    add(p);
  }
  for (; p < end; ++p) add(p);
    // Stored as float vectors, not by memcpy: a byte copy may alias anything, and the
    // views read for the next bag were loaded again after it.
#pragma GCC unroll 32
  for (int j = 0; j < parts; ++j) *reinterpret_cast<typename HostVector<Lanes>::unaligned*>(out + Lanes * j) = acc[j];
  return n;
}
#endif

// A mean bag's row divided by its count. n = 0 keeps the +0.0 row; n = 1 keeps the
// row too, since x / 1 is x in every bit (the mean bags of one then took 0.72-0.79x).
inline void divide_by_count(float* const out, std::int64_t d, std::int64_t n) {
  if (n > 1)
    for (std::int64_t c = 0; c < d; ++c) out[c] = out[c] / float(n);
}

#ifdef KEMBED_HOST_VECTOR_TILE
// Bags [b0, b1) of a table Tiles tiles wide (d = 64 or 128), in a loop over bags of
// their own with the tiles a constant count: through the general loop, which walks
// any width and a narrower last tile, bags of one position took 1.28x as long at
// d = 64 and 1.07x at d = 128. Whole: both tiles in one walk of each bag.
template <int Lanes, bool Weighted, int Tiles, bool Whole, bool Near, class Bounds, class Id, class Out>
inline void sum_bags_of_tiles(std::int64_t b0, std::int64_t b1, std::int64_t begin, Bounds const& bounds,
                              HostTileArrays<Id> const& arrays, std::int64_t pad, bool mean, Out const& y) {
  constexpr int walks = Whole ? 1 : Tiles, cols = host_bag_tile * Tiles / walks;
  for (std::int64_t b = b0; b < b1; ++b) {
    std::int64_t const end = bounds(b + 1);
    float* const out = &y(b, 0);
    std::int64_t n = 0;
    for (int t = 0; t < walks; ++t)
      n = sum_tile_vectors<Lanes, Weighted, cols, Near>(begin, end, t * cols, arrays, pad, out + t * cols);
    if (mean) divide_by_count(out, Tiles * host_bag_tile, n);
    begin = end;
  }
}

// A 128-column row walked once (eight AVX-512 registers) where a run's bags average
// whole_row_positions or more, or short_bag_positions or fewer: two walks per tile
// only between. At bags of 128 one walk took 0.72-0.94x the time of two, at bags of
// 32 1.01-1.06x (Zen 4 guest); at bags of 1-8 0.86-0.91x, 16 1.01x, 32 1.00-1.03x
// (Zen 5 guest), where a short bag's own steps, done once per walk, are most of its
// time. Rows fetched into L1 from a table of at most near_fetch_bytes
// (kernel_common.hpp), chosen per call (bag_forward_shaped). Issue 37.
inline constexpr std::int64_t whole_row_positions = 64, short_bag_positions = 8;
template <int Lanes, bool Weighted, int Tiles, bool Near, class Bounds, class Id, class Out>
inline void sum_bags_of_width(std::int64_t b0, std::int64_t b1, std::int64_t begin, Bounds const& bounds,
                              HostTileArrays<Id> const& arrays, std::int64_t pad, bool mean, Out const& y) {
  if constexpr (Tiles == 2 && Lanes * 8 >= Tiles * host_bag_tile) {
    std::int64_t const positions = bounds(b1) - begin, bags = b1 - b0;
    if (positions >= whole_row_positions * bags || positions <= short_bag_positions * bags)
      return sum_bags_of_tiles<Lanes, Weighted, Tiles, true, Near>(b0, b1, begin, bounds, arrays, pad, mean, y);
  }
  sum_bags_of_tiles<Lanes, Weighted, Tiles, false, Near>(b0, b1, begin, bounds, arrays, pad, mean, y);
}
#endif

// Bags [b0, b1) summed, averaged or weighted on the host, their starts and ends from
// `bounds`: the pooling and the weights resolved once for the run, as template
// arguments, so that the loop over bags carries no branch of its own (with one per
// bag, and its loads, a bag of one position took 1.3x as long). Full tiles in vectors
// where the copy has them (a weighted one needs the copy's fused multiply-add), the
// rest as float arrays; a table one or two tiles wide (d = 64, 128) has a loop of its
// own (sum_bags_of_tiles), its arrays as raw pointers.
template <int Lanes, bool Weighted, bool Near, class Bounds, class IdView, class Table, class Weights, class Out>
inline void sum_run_host(std::int64_t b0, std::int64_t b1, Bounds const& bounds, IdView const& ids, Table const& weight,
                         Weights const& w, std::int64_t pad, bool mean, Out const& y) {
  std::int64_t const d = weight.extent(1), full = d - d % host_bag_tile;
  std::int64_t begin = bounds(b0);  // then each bag's start is the end before it
#ifdef KEMBED_HOST_VECTOR_TILE
  auto const arrays = host_tile_arrays(ids, weight, w);
  if constexpr (vector_tile<Lanes, Weighted>) {
    if (d == host_bag_tile)
      return sum_bags_of_width<Lanes, Weighted, 1, Near>(b0, b1, begin, bounds, arrays, pad, mean, y);
    if (d == 2 * host_bag_tile)
      return sum_bags_of_width<Lanes, Weighted, 2, Near>(b0, b1, begin, bounds, arrays, pad, mean, y);
  }
#endif
  for (std::int64_t b = b0; b < b1; ++b) {
    std::int64_t const end = bounds(b + 1);
    float* const out = &y(b, 0);
    std::int64_t n = 0;
    for (std::int64_t c0 = 0; c0 < full; c0 += host_bag_tile) {
#ifdef KEMBED_HOST_VECTOR_TILE
      if constexpr (vector_tile<Lanes, Weighted>) {
        n = sum_tile_vectors<Lanes, Weighted, host_bag_tile, false>(begin, end, c0, arrays, pad, out + c0);
        continue;
      }
#endif
      n = sum_tile_host<host_bag_tile, Weighted>(begin, end, host_bag_tile, c0, ids, weight, w, pad, out + c0);
    }
    if (full < d) n = sum_tile_host<0, Weighted>(begin, end, d - full, full, ids, weight, w, pad, out + full);
    if (mean) divide_by_count(out, d, n);
    begin = end;
  }
}

// One bag's output row in the device's shape (`lanes` splits the columns over a team's
// vector lanes; one lane on a host backend, where the host suites run it).
template <class Member, class IdView, class Table, class Weights, class Won>
KOKKOS_INLINE_FUNCTION void pool_bag(Member const& team, std::int64_t b, std::int64_t begin, std::int64_t end,
                                     IdView const& ids, Table const& weight, Weights const& w, std::int64_t pad,
                                     Pooling pooling, float* const out, Won const& won) {
  std::int64_t const d = weight.extent(1);
  bool const record = won.data() != nullptr, weighted = w.extent(0) > 0;
  auto const columns = [&](auto&& f) { Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, d), f); };
  columns([&](std::int64_t c) {
    out[c] = 0.0f;
    if (record) won(b, c) = -1;
  });
  std::int64_t n = 0;  // positions that count so far (the padding row's leave their bag)
  for (std::int64_t p = begin; p < end; ++p) {
    auto const r = static_cast<std::int64_t>(ids(p));
    if (r == pad) continue;
    float const* const row = &weight(r, 0);
    if (pooling == Pooling::max) {  // strictly greater: the lowest position keeps a tie
      columns([&](std::int64_t c) {
        if (n > 0 && !(row[c] > out[c])) return;
        out[c] = row[c];
        if (record) won(b, c) = p;
      });
    } else if (weighted) {
      float const wp = w(p);
      columns([&](std::int64_t c) { out[c] = fma_rn(row[c], wp, out[c]); });
    } else {
      columns([&](std::int64_t c) { out[c] = out[c] + row[c]; });
    }
    ++n;
  }
  if (pooling == Pooling::mean && n > 0) columns([&](std::int64_t c) { out[c] = out[c] / float(n); });
}

// HostShape false runs the device's loops (one lane on a host backend): the host
// suites check the device's arithmetic through it (test_bags.cpp).
template <bool HostShape, class ExecutionSpace, class IdView, class Table, class Out>
void bag_forward_shaped(
    ExecutionSpace const& space, IdView const& ids, BagViews<typename ExecutionSpace::memory_space> const& bags,
    Table const& weight, Out const& y,
    Kokkos::View<std::int64_t**, Kokkos::LayoutRight, typename ExecutionSpace::memory_space> const& won = {}) {
  check_ids(space, ids, std::int64_t(weight.extent(0)));
  auto const bounds = bags.bounds;
  auto const w = bags.weights;
  Pooling const pooling = bags.pooling;
  std::int64_t const pad = bags.padding;
  HostIsa const isa = Tiles<ExecutionSpace>::host ? host_isa() : HostIsa::baseline;
  if constexpr (HostShape) {  // a range of bags, not a league of one-thread teams: 7-9% at L = 1
    // Bags in runs of host_bag_run per call into the ISA's copy: a call per bag was
    // a fifth of a bag of one position's time.
    // The fetch hint resolved per call, each in a copy of its own: resolved per run
    // inside one copy, GCC spilled the row stride in every loop (1.11x at bags of 32).
    std::int64_t const count = bags.count(), runs = (count + host_bag_run - 1) / host_bag_run;
    bool const near = weight.span() <= std::size_t(near_fetch_bytes) / sizeof(float);
    Kokkos::parallel_for("kembed::bag_forward", Range<ExecutionSpace>(space, 0, runs), [=](std::int64_t k) {
      std::int64_t const first = k * host_bag_run;
      std::int64_t const last = first + host_bag_run < count ? first + host_bag_run : count;
      auto const run = [&](auto near_c) {
        run_wide(isa, [&](auto lanes) {
          constexpr int lanes_v = decltype(lanes)::value;
          constexpr bool near_v = decltype(near_c)::value;
          if (pooling == Pooling::max) {
            std::int64_t begin = bounds(first);
            for (std::int64_t b = first; b < last; ++b) {
              std::int64_t const end = bounds(b + 1);
              max_bag_host(b, begin, end, ids, weight, pad, &y(b, 0), won);
              begin = end;
            }
          } else if (w.extent(0) > 0) {
            sum_run_host<lanes_v, true, near_v>(first, last, bounds, ids, weight, w, pad, false, y);
          } else {
            sum_run_host<lanes_v, false, near_v>(first, last, bounds, ids, weight, w, pad, pooling == Pooling::mean, y);
          }
        });
      };
      near ? run(std::true_type{}) : run(std::false_type{});
    });
  } else {
    using Policy = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
    int const lanes = Tiles<ExecutionSpace>::host ? 1 : 32;
    Kokkos::parallel_for(
        "kembed::bag_forward", Policy(space, bags.count(), 1, lanes),
        KOKKOS_LAMBDA(typename Policy::member_type const& team) {
          std::int64_t const b = team.league_rank();
          pool_bag(team, b, bounds(b), bounds(b + 1), ids, weight, w, pad, pooling, &y(b, 0), won);
        });
  }
}

template <class ExecutionSpace, class IdView, class Table, class Out>
void bag_forward(
    ExecutionSpace const& space, IdView const& ids, BagViews<typename ExecutionSpace::memory_space> const& bags,
    Table const& weight, Out const& y,
    Kokkos::View<std::int64_t**, Kokkos::LayoutRight, typename ExecutionSpace::memory_space> const& won = {}) {
  bag_forward_shaped<Tiles<ExecutionSpace>::host>(space, ids, bags, weight, y, won);
}

}  // namespace kembed::detail
