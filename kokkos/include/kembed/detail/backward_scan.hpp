#pragma once
// Plan `scan`: the rows are dealt to blocks (row r to block r mod B, so that the
// hot low ids of Zipf-shaped data spread over all blocks), and each block walks
// every position in ascending order, folding the ones whose row it owns. A block
// owns its rows outright, so each (row, column) sum is one thread's ascending loop,
// whatever the number of blocks.
#include <kembed/detail/kernel_common.hpp>

namespace kembed::detail {

// Returns whether any dy term was NaN or +-inf (see fold_identical).
template <class ExecutionSpace, class IdView, class Dy, class Carry, class Grad, class Counts>
bool backward_scan(ExecutionSpace const& space, IdView const& ids, Dy const& dy, Carry const& carry, Grad const& grad,
                   Counts const& counts, std::int64_t padding_idx, std::int64_t blocks) {
  std::int64_t const v = grad.extent(0);
  std::int64_t const d = grad.extent(1);
  std::int64_t const t = ids.extent(0);
  bool const has_carry = carry.data() != nullptr;
  bool const has_counts = counts.data() != nullptr;
  bool const in_place = has_carry && carry.data() == grad.data();
  bool const pow2 = (blocks & (blocks - 1)) == 0;
  std::int64_t const mask = blocks - 1;
  int bad = 0;
  Kokkos::parallel_reduce(
      "kembed::backward_scan", Range<ExecutionSpace>(space, 0, blocks),
      KOKKOS_LAMBDA(std::int64_t b, int& saw) {
        // In place, the rows already hold the carry; else each element is read
        // (from carry) before this thread writes it.
        for (std::int64_t r = b; r < v; r += blocks) {
          if (!in_place)
            for (std::int64_t c = 0; c < d; ++c) grad(r, c) = has_carry ? carry(r, c) : 0.0f;
          if (has_counts) counts(r) = 0;
        }
        int flag = 0;
        for (std::int64_t p = 0; p < t; ++p) {
          auto const r = static_cast<std::int64_t>(ids(p));
          if ((pow2 ? (r & mask) : (r % blocks)) != b) continue;  // a division costs more than the fold
          if (has_counts) counts(r) += 1;
          if (r == padding_idx) {
            for (std::int64_t c = 0; c < d; ++c) flag |= non_finite(dy(p, c));
            continue;
          }
          for (std::int64_t c = 0; c < d; ++c) {
            float const x = dy(p, c);
            flag |= non_finite(x);
            grad(r, c) = grad(r, c) + x;
          }
        }
        if (padding_idx >= 0 && padding_idx % blocks == b)
          for (std::int64_t c = 0; c < d; ++c) grad(padding_idx, c) = 0.0f;
        saw |= flag;
      },
      Kokkos::BOr<int>(bad));
  return bad != 0;
}

}  // namespace kembed::detail
