#pragma once
// A bag call's dy seen per position, as every backward plan reads dy: so a bag's
// gradient is folded by the unpooled kernels, plan for plan (docs/CONTRACT.md, "Bags").
#include <kembed/detail/bag_forward.hpp>
#include <kembed/detail/kernel_common.hpp>

namespace kembed::detail {

// Term (p, c): dy(b(p), c), or -0.0 where a max bag's column was taken from another
// position (adding -0.0 changes no value). `scale`, where given, is each position's
// factor s_p (the fold then forms fma(term, s_p, acc), or term * s_p for its tree).
template <class MemorySpace>
struct BagTerms {
  using memory_space = MemorySpace;
  Kokkos::View<float const**, Kokkos::LayoutRight, MemorySpace> dy;          // (B, d)
  Kokkos::View<std::int64_t const*, MemorySpace> bag;                        // (T): b(p), where a plan reads it
  BagBounds<MemorySpace> bounds;                                             // bag b: [bounds(b), bounds(b + 1))
  Kokkos::View<std::int64_t const**, Kokkos::LayoutRight, MemorySpace> won;  // (B, d), max only
  Kokkos::View<float const*, MemorySpace> scale;                             // (T) or empty
  std::int64_t positions = 0;

  KOKKOS_INLINE_FUNCTION std::int64_t extent(int i) const { return i == 0 ? positions : std::int64_t(dy.extent(1)); }
  // By value, the max test a select: a reference picked from two arrays kept the
  // kernels' column loops scalar (the scan plan's fold ran 2x slower than a view's).
  KOKKOS_INLINE_FUNCTION float operator()(std::int64_t p, std::int64_t c) const {
    std::int64_t const b = bag(p);
    float const x = dy(b, c);
    return won.data() == nullptr || won(b, c) == p ? x : -0.0f;
  }
};

template <class M>
KOKKOS_INLINE_FUNCTION void const* term_address(BagTerms<M> const& terms, std::int64_t p, std::int64_t c) {
  return &terms.dy(terms.bag(p), c);
}

template <class M>
KOKKOS_INLINE_FUNCTION float term_scale(BagTerms<M> const& terms, std::int64_t p, float) {
  return terms.scale(p);
}
template <class M>
KOKKOS_INLINE_FUNCTION bool has_term_scales(BagTerms<M> const& terms) {
  return terms.scale.data() != nullptr;
}
template <class M>
struct TermsCarryFactors<BagTerms<M>> : std::true_type {};
template <class M>
struct HasArgmax<BagTerms<M>> : std::true_type {};
template <class M>
struct WalksBags<BagTerms<M>> : std::true_type {};

// max's backward in mode identical, without its -0.0 terms: a fold adds each row's
// terms in ascending position order from the carry, and x + -0.0 = x for every x, so
// only the one winning term of each (bag, column) changes a sum. Bags hold ascending,
// disjoint position ranges: adding the winners bag by bag adds each row's in
// ascending position order, the fold's bits in B x d additions instead of T x d
// terms. Columns are independent: each host thread takes one block of them (16 at
// least), so a bag's winners are added row by row, as torch does; blocks of 16 on one
// thread went back to each gradient row d / 16 times (1.3x torch's time at L = 1,
// V = 1e5, d = 128, 16,384 bags). The padding row
// never wins (the forward skips it) and is +0.0, as the fold leaves it. Host backends
// only (a device would have one thread per column block).
template <class ExecutionSpace, class IdView, class M, class Carry, class Grad>
void backward_argmax(ExecutionSpace const& space, IdView const& ids, BagTerms<M> const& terms, Carry const& carry,
                     Grad const& grad, std::int64_t padding_idx) {
  std::int64_t const v = grad.extent(0), d = grad.extent(1), bags = terms.dy.extent(0);
  bool const in_place = carry.data() != nullptr && carry.data() == grad.data();
  bool const has_carry = carry.data() != nullptr;
  if (!in_place && !start_host_gradient(space, carry, grad))
    Kokkos::parallel_for("kembed::backward_argmax::start", Range<ExecutionSpace>(space, 0, v), [=](std::int64_t r) {
      for (std::int64_t c = 0; c < d; ++c) grad(r, c) = has_carry ? carry(r, c) : 0.0f;
    });
  if (padding_idx >= 0)
    for (std::int64_t c = 0; c < d; ++c) grad(padding_idx, c) = 0.0f;
  std::int64_t const threads = space.concurrency() > 0 ? space.concurrency() : 1;
  std::int64_t const block = ((d + threads - 1) / threads + 15) / 16 * 16;
  auto const won = terms.won;
  auto const dy = terms.dy;
  Kokkos::parallel_for("kembed::backward_argmax::columns", Range<ExecutionSpace>(space, 0, (d + block - 1) / block),
                       [=](std::int64_t k) {
                         std::int64_t const c0 = k * block, n = d - c0 < block ? d - c0 : block;
                         for (std::int64_t b = 0; b < bags; ++b)
                           for (std::int64_t c = c0; c < c0 + n; ++c) {
                             std::int64_t const p = won(b, c);
                             if (p < 0) continue;  // an empty bag
                             std::int64_t const r = ids(p);
                             grad(r, c) = grad(r, c) + dy(b, c);
                           }
                       });
}

// The first (bag, column), as b * d + c, whose argmax is not a position of bag b that
// counts (the padding row's positions do not), nor -1 for a bag with none; -1 if
// every one is. What a caller's argmax is checked for: B x d reads, not the table's
// (a bag's ids are scanned only where a -1 claims it has no position that counts).
template <class ExecutionSpace, class IdView, class Argmax>
std::int64_t first_bad_argmax(ExecutionSpace const& space, IdView const& ids,
                              BagViews<typename ExecutionSpace::memory_space> const& bags, Argmax const& argmax) {
  auto const bounds = bags.bounds;
  std::int64_t const pad = bags.padding, d = argmax.extent(1);
  std::int64_t first = 0;  // Min's identity, the largest int64, where every entry is good
  Kokkos::parallel_reduce(
      "kembed::check_argmax", Range<ExecutionSpace>(space, 0, bags.count()),
      KOKKOS_LAMBDA(std::int64_t b, std::int64_t & lowest) {
        std::int64_t const begin = bounds(b), end = bounds(b + 1);
        int empty = -1;  // not yet known: no -1 seen in this bag
        for (std::int64_t c = 0; c < d; ++c) {
          std::int64_t const p = argmax(b, c);
          bool ok = p >= begin && p < end && static_cast<std::int64_t>(ids(p)) != pad;
          if (p == -1) {
            if (empty < 0) {
              empty = 1;
              for (std::int64_t q = begin; q < end && empty; ++q) empty = static_cast<std::int64_t>(ids(q)) == pad;
            }
            ok = empty == 1;
          }
          if (!ok && b * d + c < lowest) lowest = b * d + c;
        }
      },
      Kokkos::Min<std::int64_t>(first));
  return first < bags.count() * d ? first : -1;
}

// The bag of each position: bag(p) = b for p in [bounds(b), bounds(b + 1)).
template <class ExecutionSpace>
Kokkos::View<std::int64_t*, typename ExecutionSpace::memory_space> bag_of_positions(
    ExecutionSpace const& space, BagViews<typename ExecutionSpace::memory_space> const& bags, std::int64_t t) {
  Kokkos::View<std::int64_t*, typename ExecutionSpace::memory_space> bag(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::bag_of"), t);
  auto const bounds = bags.bounds;
  Kokkos::parallel_for(
      "kembed::bag_of", Range<ExecutionSpace>(space, 0, bags.count()), KOKKOS_LAMBDA(std::int64_t b) {
        for (std::int64_t p = bounds(b); p < bounds(b + 1); ++p) bag(p) = b;
      });
  return bag;
}

// A position's factor (CONTRACT.md, "Bags"), in binary64 and rounded to float once:
// 1 / count (scale_grad_by_freq; `count` 0: not scaled), divided by the bag's n (mean),
// times the weight w. The one formula for a process's own fold (bag_term_scales) and
// for an MPI row owner's, which gets n or w with each position (kembed::mpi).
KOKKOS_INLINE_FUNCTION float bag_factor(std::int64_t count, bool mean, bool weighted, double n_or_w) {
  double f = count > 0 ? 1.0 / static_cast<double>(count) : 1.0;
  if (mean) f = f / n_or_w;
  if (weighted) f = dmul_rn(f, n_or_w);
  return static_cast<float>(f);
}

// A bag's count of positions that count (the padding row's do not): a mean's n.
template <class IdView, class Bounds>
KOKKOS_INLINE_FUNCTION std::int64_t counted_positions(IdView const& ids, Bounds const& bounds, std::int64_t b,
                                                      std::int64_t pad) {
  std::int64_t n = 0;
  for (std::int64_t p = bounds(b); p < bounds(b + 1); ++p) n += static_cast<std::int64_t>(ids(p)) != pad;
  return n;
}

// Each position's factor (bag_factor; `counts`, where given, scale_grad_by_freq's);
// 0 at a padding position, which has no term.
template <class ExecutionSpace, class IdView, class Counts>
Kokkos::View<float*, typename ExecutionSpace::memory_space> bag_term_scales(
    ExecutionSpace const& space, IdView const& ids, BagViews<typename ExecutionSpace::memory_space> const& bags,
    Counts const& counts) {
  Kokkos::View<float*, typename ExecutionSpace::memory_space> s(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::bag_scales"), ids.extent(0));
  auto const bounds = bags.bounds;
  auto const w = bags.weights;
  bool const mean = bags.pooling == Pooling::mean, weighted = w.extent(0) > 0, freq = counts.data() != nullptr;
  std::int64_t const pad = bags.padding;
  Kokkos::parallel_for(
      "kembed::bag_scales", Range<ExecutionSpace>(space, 0, bags.count()), KOKKOS_LAMBDA(std::int64_t b) {
        double const n = mean ? static_cast<double>(counted_positions(ids, bounds, b, pad)) : 0.0;
        for (std::int64_t p = bounds(b); p < bounds(b + 1); ++p) {
          auto const r = static_cast<std::int64_t>(ids(p));
          std::int64_t const count = freq ? static_cast<std::int64_t>(counts(r)) : 0;
          // padding has no term (nor, alone in a bag, a finite 1 / n)
          s(p) = r == pad ? 0.0f : bag_factor(count, mean, weighted, weighted ? static_cast<double>(w(p)) : n);
        }
      });
  return s;
}

// What each position's factor is formed from where its row's owner forms it (MPI):
// its bag's n (mean) or its weight; empty where the call has no factors.
template <class ExecutionSpace, class IdView>
Kokkos::View<double*, typename ExecutionSpace::memory_space> bag_factor_inputs(
    ExecutionSpace const& space, IdView const& ids, BagViews<typename ExecutionSpace::memory_space> const& bags) {
  bool const mean = bags.pooling == Pooling::mean, weighted = bags.weights.extent(0) > 0;
  if (!mean && !weighted) return {};
  Kokkos::View<double*, typename ExecutionSpace::memory_space> in(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::bag_factor_inputs"), ids.extent(0));
  auto const bounds = bags.bounds;
  auto const w = bags.weights;
  std::int64_t const pad = bags.padding;
  Kokkos::parallel_for(
      "kembed::bag_factor_inputs", Range<ExecutionSpace>(space, 0, bags.count()), KOKKOS_LAMBDA(std::int64_t b) {
        double const n = mean ? static_cast<double>(counted_positions(ids, bounds, b, pad)) : 0.0;
        for (std::int64_t p = bounds(b); p < bounds(b + 1); ++p) in(p) = weighted ? static_cast<double>(w(p)) : n;
      });
  return in;
}

// Each position's term row, as a (T, d) matrix (EmbeddingBag::position_terms).
template <class ExecutionSpace, class M, class Out>
void materialize_terms(ExecutionSpace const& space, BagTerms<M> const& terms, Out const& out) {
  std::int64_t const d = out.extent(1);
  Kokkos::parallel_for(
      "kembed::bag_position_terms", Range<ExecutionSpace>(space, 0, terms.positions), KOKKOS_LAMBDA(std::int64_t p) {
        for (std::int64_t c = 0; c < d; ++c) out(p, c) = terms(p, c);
      });
}

// The gradient of per-sample weights: out(p) = +0.0, then for c ascending
// fma(dy(b(p), c), weight(ids(p), c), out(p)); +0.0 where p holds the padding row. One
// thread per position: the columns are one dependent chain, in a fixed order.
template <class ExecutionSpace, class IdView, class Bag, class Table, class Dy, class Out>
void bag_weights_grad(ExecutionSpace const& space, IdView const& ids, Bag const& bag, std::int64_t padding,
                      Table const& weight, Dy const& dy, Out const& out) {
  std::int64_t const d = weight.extent(1);
  Kokkos::parallel_for(
      "kembed::bag_weights_grad", Range<ExecutionSpace>(space, 0, ids.extent(0)), KOKKOS_LAMBDA(std::int64_t p) {
        auto const r = static_cast<std::int64_t>(ids(p));
        float acc = 0.0f;
        if (r != padding)
          for (std::int64_t c = 0; c < d; ++c) acc = fma_rn(dy(bag(p), c), weight(r, c), acc);
        out(p) = acc;
      });
}

// The first row r with low(r) < high(r), or V (their length) where there is none.
template <class ExecutionSpace, class Low, class High>
std::int64_t first_row_below(ExecutionSpace const& space, Low const& low, High const& high) {
  std::int64_t const v = high.extent(0);
  std::int64_t first = v;
  Kokkos::parallel_reduce(
      "kembed::check_batch_counts", Range<ExecutionSpace>(space, 0, v),
      KOKKOS_LAMBDA(std::int64_t r, std::int64_t & lowest) {
        if (low(r) < high(r) && r < lowest) lowest = r;
      },
      Kokkos::Min<std::int64_t>(first));
  return first;
}

}  // namespace kembed::detail
