#pragma once
// Plan `scan`: each block owns a set of (row, column) sums outright and walks every
// position in ascending order, folding the terms it owns; so each sum is one
// thread's ascending loop, whatever the blocks. Blocks split the columns when the
// rows are wide (each thread then streams its own slice of dy, and no dy byte is
// read twice), and deal the rows round-robin otherwise (row r to row block
// r mod R, so that the hot low ids of Zipf-shaped data spread over the threads).
#include <kembed/detail/kernel_common.hpp>

namespace kembed::detail {

// How `blocks` threads share a (V, d) gradient: column slices of 16 to 128 floats
// (at least a 64-byte line, so no two threads write one line; wider slices of one
// dy row measured slower on 2 cores, d = 512: the hardware prefetcher pulls in the
// neighbour's half), and row blocks for the rest.
struct ScanSplit {
  std::int64_t row_blocks = 1, col_blocks = 1;
};

inline ScanSplit scan_split(std::int64_t blocks, std::int64_t v, std::int64_t d) {
  ScanSplit s;
  for (std::int64_t c = blocks; c >= 1; --c)
    if (blocks % c == 0 && d >= 16 * c && (c == 1 || d <= 128 * c)) {
      s.col_blocks = c;
      break;
    }
  s.row_blocks = blocks / s.col_blocks;
  if (s.row_blocks > v) s.row_blocks = v;
  return s;
}

// Returns whether any dy term was NaN or +-inf (see fold_identical).
template <class ExecutionSpace, class IdView, class Dy, class Carry, class Grad, class Counts>
bool backward_scan(ExecutionSpace const& space, IdView const& ids, Dy const& dy, Carry const& carry, Grad const& grad,
                   Counts const& counts, std::int64_t padding_idx, ScanSplit split, HostIsa isa) {
  std::int64_t const v = grad.extent(0);
  std::int64_t const d = grad.extent(1);
  std::int64_t const t = ids.extent(0);
  bool const has_carry = carry.data() != nullptr;
  bool const has_counts = counts.data() != nullptr;
  bool const in_place = has_carry && carry.data() == grad.data();
  std::int64_t const rows_b = split.row_blocks, cols_b = split.col_blocks;
  bool const pow2 = (rows_b & (rows_b - 1)) == 0;
  std::int64_t const mask = rows_b - 1;
  int bad = 0;
  Kokkos::parallel_reduce(
      "kembed::backward_scan", Range<ExecutionSpace>(space, 0, rows_b * cols_b),
      KOKKOS_LAMBDA(std::int64_t b, int& saw) { run_for(isa, [&] {
        std::int64_t const rb = b / cols_b, cb = b % cols_b;
        // Column slices start on 16-float boundaries (the last one takes the rest).
        std::int64_t const c0 = (d / cols_b / 16 * 16) * cb;
        std::int64_t const c1 = cb == cols_b - 1 ? d : (d / cols_b / 16 * 16) * (cb + 1);
        bool const counter = has_counts && cb == 0;  // one block per row counts it
        // In place, the rows already hold the carry; else each element is read
        // (from carry) before this thread writes it.
        for (std::int64_t r = rb; r < v; r += rows_b) {
          if (!in_place)
            for (std::int64_t c = c0; c < c1; ++c) grad(r, c) = has_carry ? carry(r, c) : 0.0f;
          if (counter) counts(r) = 0;
        }
        int flag = 0;
        for (std::int64_t p = 0; p < t; ++p) {
          auto const r = static_cast<std::int64_t>(ids(p));
          if ((pow2 ? (r & mask) : (r % rows_b)) != rb) continue;  // a division costs more than the fold
          if (counter) counts(r) += 1;
          if (r == padding_idx) {
            for (std::int64_t c = c0; c < c1; ++c) flag |= non_finite(dy(p, c));
            continue;
          }
          for (std::int64_t c = c0; c < c1; ++c) {
            float const x = dy(p, c);
            flag |= non_finite(x);
            grad(r, c) = grad(r, c) + x;
          }
        }
        if (padding_idx >= 0 && (pow2 ? (padding_idx & mask) : (padding_idx % rows_b)) == rb)
          for (std::int64_t c = c0; c < c1; ++c) grad(padding_idx, c) = 0.0f;
        saw |= flag;
      }); },
      Kokkos::BOr<int>(bad));
  return bad != 0;
}

}  // namespace kembed::detail
