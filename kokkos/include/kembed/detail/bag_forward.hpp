#pragma once
// The bag forward: each bag's rows pooled into one output row, positions ascending
// (docs/CONTRACT.md, "Bags"). Nothing is written unless every id is in [0, V).
#include <kembed/detail/checks.hpp>
#include <kembed/detail/kernel_common.hpp>

#include <kembed/core/bags.hpp>

namespace kembed::detail {

// A bag call's inputs in the execution space's memory: bounds has B + 1 entries
// (bag b holds positions [bounds(b), bounds(b + 1))); weights is empty or T long.
template <class MemorySpace>
struct BagViews {
  Kokkos::View<std::int64_t const*, MemorySpace> bounds;
  Kokkos::View<float const*, MemorySpace> weights;
  std::int64_t padding = -1;  // the padding row, -1 for none
  Pooling pooling = Pooling::sum;
  std::int64_t count() const { return std::int64_t(bounds.extent(0)) - 1; }
};

// One team per bag, the columns on its vector lanes (one lane on the host): each
// position's row is read once, in order, into the bag's output row. The same code on
// every backend, so the host suites check the device's bits. With max, `won` (B, d),
// where given, receives each value's position, -1 for an empty bag (the backward's
// argmax).
// A host bag's max: the first position that counts copied, each later one taken where
// strictly greater (the same comparisons as pool_bag's, without a branch per column).
template <class IdView, class Table, class Won>
inline void max_bag_host(std::int64_t b, std::int64_t begin, std::int64_t end, IdView const& ids, Table const& weight,
                         std::int64_t pad, float* const out, Won const& won) {
  std::int64_t const d = weight.extent(1);
  bool const record = won.data() != nullptr;
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

// One bag's output row (`lanes` splits the columns over a device team's vector lanes;
// the host has one, and its plain loops are vectorised by the compiler).
template <bool Host, class Member, class IdView, class Table, class Weights, class Won>
KOKKOS_INLINE_FUNCTION void pool_bag(Member const& team, std::int64_t b, std::int64_t begin, std::int64_t end,
                                     IdView const& ids, Table const& weight, Weights const& w, std::int64_t pad,
                                     Pooling pooling, float* const out, Won const& won) {
  std::int64_t const d = weight.extent(1);
  bool const record = won.data() != nullptr, weighted = w.extent(0) > 0;
  auto const columns = [&](auto&& f) { Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, d), f); };
  if constexpr (Host) {  // branch-free max, which the compiler vectorises (a compare and a blend)
    if (pooling == Pooling::max) {
      max_bag_host(b, begin, end, ids, weight, pad, out, won);
      return;
    }
  }
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

template <class ExecutionSpace, class IdView, class Table, class Out>
void bag_forward(
    ExecutionSpace const& space, IdView const& ids, BagViews<typename ExecutionSpace::memory_space> const& bags,
    Table const& weight, Out const& y,
    Kokkos::View<std::int64_t**, Kokkos::LayoutRight, typename ExecutionSpace::memory_space> const& won = {}) {
  check_ids(space, ids, std::int64_t(weight.extent(0)));
  using Policy = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
  int const lanes = Tiles<ExecutionSpace>::host ? 1 : 32;
  auto const bounds = bags.bounds;
  auto const w = bags.weights;
  Pooling const pooling = bags.pooling;
  std::int64_t const pad = bags.padding;
  HostIsa const isa = Tiles<ExecutionSpace>::host ? host_isa() : HostIsa::baseline;
  Kokkos::parallel_for(
      "kembed::bag_forward", Policy(space, bags.count(), 1, lanes),
      KOKKOS_LAMBDA(typename Policy::member_type const& team) {
        std::int64_t const b = team.league_rank();
        run_for(isa, [&] {
          pool_bag<Tiles<ExecutionSpace>::host>(team, b, bounds(b), bounds(b + 1), ids, weight, w, pad, pooling,
                                                &y(b, 0), won);
        });
      });
}

}  // namespace kembed::detail
