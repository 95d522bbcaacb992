#pragma once
// Plan `scan`: the rows are cut into blocks, and each block walks every position
// in ascending order, folding the ones whose row it owns. A block owns its rows
// outright, so each (row, column) sum is one thread's ascending loop, whatever
// the number of blocks.
#include <kembed/detail/kernel_common.hpp>

namespace kembed::detail {

template <class ExecutionSpace, class IdView, class Dy, class Carry, class Grad, class Counts>
void backward_scan(ExecutionSpace const& space, IdView const& ids, Dy const& dy, Carry const& carry, Grad const& grad,
                   Counts const& counts, std::int64_t padding_idx, std::int64_t blocks) {
  std::int64_t const v = grad.extent(0);
  std::int64_t const d = grad.extent(1);
  std::int64_t const t = ids.extent(0);
  bool const has_carry = carry.data() != nullptr;
  bool const has_counts = counts.data() != nullptr;
  bool const in_place = has_carry && carry.data() == grad.data();
  Kokkos::parallel_for(
      "kembed::backward_scan", Range<ExecutionSpace>(space, 0, blocks), KOKKOS_LAMBDA(std::int64_t b) {
        std::int64_t const lo = part_begin(v, blocks, b);
        std::int64_t const hi = part_begin(v, blocks, b + 1);
        // In place, the rows already hold the carry; else each element is read
        // (from carry) before this thread writes it.
        for (std::int64_t r = lo; r < hi; ++r) {
          if (!in_place)
            for (std::int64_t c = 0; c < d; ++c) grad(r, c) = has_carry ? carry(r, c) : 0.0f;
          if (has_counts) counts(r) = 0;
        }
        for (std::int64_t p = 0; p < t; ++p) {
          auto const r = static_cast<std::int64_t>(ids(p));
          if (r < lo || r >= hi) continue;
          if (has_counts) counts(r) += 1;
          if (r == padding_idx) continue;
          for (std::int64_t c = 0; c < d; ++c) grad(r, c) = grad(r, c) + dy(p, c);
        }
        if (padding_idx >= lo && padding_idx < hi)
          for (std::int64_t c = 0; c < d; ++c) grad(padding_idx, c) = 0.0f;
      });
}

}  // namespace kembed::detail
