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
template <class ExecutionSpace, class IdView, class Table, class Out>
void bag_forward(
    ExecutionSpace const& space, IdView const& ids, BagViews<typename ExecutionSpace::memory_space> const& bags,
    Table const& weight, Out const& y,
    Kokkos::View<std::int64_t**, Kokkos::LayoutRight, typename ExecutionSpace::memory_space> const& won = {}) {
  std::int64_t const d = weight.extent(1);
  check_ids(space, ids, std::int64_t(weight.extent(0)));
  using Policy = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>;
  int const lanes = Tiles<ExecutionSpace>::host ? 1 : 32;
  auto const bounds = bags.bounds;
  auto const w = bags.weights;
  bool const weighted = w.extent(0) > 0, max = bags.pooling == Pooling::max, mean = bags.pooling == Pooling::mean;
  std::int64_t const pad = bags.padding;
  Kokkos::parallel_for(
      "kembed::bag_forward", Policy(space, bags.count(), 1, lanes),
      KOKKOS_LAMBDA(typename Policy::member_type const& team) {
        std::int64_t const b = team.league_rank();
        float* const out = &y(b, 0);
        bool const record = won.data() != nullptr;
        Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, d), [&](std::int64_t c) {
          out[c] = 0.0f;
          if (record) won(b, c) = -1;
        });
        std::int64_t n = 0;  // positions that count so far (the padding row's leave their bag)
        for (std::int64_t p = bounds(b); p < bounds(b + 1); ++p) {
          auto const r = static_cast<std::int64_t>(ids(p));
          if (r == pad) continue;
          float const* const row = &weight(r, 0);
          if (max)  // strictly greater: the lowest position keeps a tie
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, d), [&](std::int64_t c) {
              if (n > 0 && !(row[c] > out[c])) return;
              out[c] = row[c];
              if (record) won(b, c) = p;
            });
          else if (weighted)
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, d),
                                 [&](std::int64_t c) { out[c] = fma_rn(row[c], w(p), out[c]); });
          else
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, d), [&](std::int64_t c) { out[c] = out[c] + row[c]; });
          ++n;
        }
        if (mean && n > 0)
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, d), [&](std::int64_t c) { out[c] = out[c] / float(n); });
      });
}

}  // namespace kembed::detail
