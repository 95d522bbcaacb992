#pragma once
// The update step's element arithmetic (docs/CONTRACT.md, "Updates"), each operation
// one rounding on every backend (kernel_common's *_rn: nvcc would fuse a * b + c).
// The constants come from core's step_constants(), made once on the host per step.
#include <kembed/core/optim.hpp>
#include <kembed/detail/kernel_common.hpp>

namespace kembed::detail {

// What a step does, in a form a kernel can copy: the settings' switches and the
// step's binary32 constants.
struct StepRule {
  Optimizer optimizer = Optimizer::sgd;
  bool maximize = false, l2_decay = false, decoupled_decay = false, momentum = false, nesterov = false;
  StepConstants k;
};

inline StepRule step_rule(OptimSettings const& s, std::int64_t t) {
  StepRule rule;
  rule.optimizer = s.optimizer;
  rule.maximize = s.maximize;
  bool const decoupled = s.optimizer == Optimizer::adam && s.decoupled_weight_decay;
  rule.l2_decay = s.weight_decay != 0.0 && !decoupled;
  rule.decoupled_decay = s.weight_decay != 0.0 && decoupled;
  rule.momentum = s.optimizer == Optimizer::sgd && s.momentum != 0.0;
  rule.nesterov = s.nesterov;
  rule.k = step_constants(s, t);
  return rule;
}

// g as the optimizer sees it: negated for maximize, then L2 weight decay.
KOKKOS_INLINE_FUNCTION float seen_gradient(StepRule const& r, float w, float g) {
  if (r.maximize) g = -g;
  return r.l2_decay ? fma_rn(w, r.k.weight_decay, g) : g;
}

KOKKOS_INLINE_FUNCTION void sgd_element(StepRule const& r, float& w, float g, float* buffer) {
  g = seen_gradient(r, w, g);
  if (r.momentum) {
    *buffer = r.k.t == 1 ? g : fma_rn(g, r.k.keep_grad, mul_rn(*buffer, r.k.momentum));
    g = r.nesterov ? fma_rn(*buffer, r.k.momentum, g) : *buffer;
  }
  w = fma_rn(g, r.k.neg_lr, w);
}

KOKKOS_INLINE_FUNCTION void adagrad_element(StepRule const& r, float& w, float g, float& sum) {
  g = seen_gradient(r, w, g);
  sum = fma_rn(g, g, sum);
  w = w + div_rn(mul_rn(r.k.neg_clr, g), sqrt_rn(sum) + r.k.eps);
}

KOKKOS_INLINE_FUNCTION void adam_element(StepRule const& r, float& w, float g, float& m, float& v) {
  if (r.decoupled_decay) w = mul_rn(w, r.k.decay);
  g = seen_gradient(r, w, g);
  float const diff = g - m;
  float const lw = r.k.lerp_weight;
  m = lw < 0.5f ? fma_rn(lw, diff, m) : fma_rn(-(1.0f - lw), diff, g);  // torch's lerp, either form
  v = fma_rn(mul_rn(r.k.keep_square, g), g, mul_rn(v, r.k.beta2));
  w = w + div_rn(mul_rn(r.k.neg_step, m), div_rn(sqrt_rn(v), r.k.correction2) + r.k.eps);
}

// Row-wise Adagrad on one row of d columns (w, g: the row's values, strided by 1):
// the mean square folded in column order, one sum per row, one rate for the row.
template <class Row, class GradRow>
KOKKOS_INLINE_FUNCTION void rowwise_adagrad_row(StepRule const& r, Row const& w, GradRow const& grad, std::int64_t d,
                                                float& sum) {
  float q = 0.0f;
  for (std::int64_t c = 0; c < d; ++c) {
    float const g = seen_gradient(r, w(c), grad(c));
    q = fma_rn(g, g, q);
  }
  sum = sum + div_rn(q, static_cast<float>(d));
  float const rate = div_rn(r.k.lr, sqrt_rn(sum) + r.k.eps);
  for (std::int64_t c = 0; c < d; ++c) {
    float const g = seen_gradient(r, w(c), grad(c));
    w(c) = fma_rn(g, -rate, w(c));
  }
}

// One table row r stepped by its gradient grad(c), c in [0, d): row-wise Adagrad
// folds the row's columns in order; the others go element by element. `first`,
// `second`: the state (core's OptimState layout). The unfused step and the fused
// backward (fused_step.hpp) both run this, so their bits are one.
template <class Weight, class GradOf, class State>
KOKKOS_INLINE_FUNCTION void step_row(StepRule const& rule, Weight const& weight, std::int64_t r, GradOf const& grad,
                                     std::int64_t d, State const& first, State const& second) {
  if (rule.optimizer == Optimizer::rowwise_adagrad) {
    rowwise_adagrad_row(
        rule, [&](std::int64_t c) -> float& { return weight(r, c); }, grad, d, first(r));
    return;
  }
  for (std::int64_t c = 0; c < d; ++c) {
    std::int64_t const e = r * d + c;
    if (rule.optimizer == Optimizer::sgd)
      sgd_element(rule, weight(r, c), grad(c), rule.momentum ? &first(e) : nullptr);
    else if (rule.optimizer == Optimizer::adagrad)
      adagrad_element(rule, weight(r, c), grad(c), first(e));
    else
      adam_element(rule, weight(r, c), grad(c), first(e), second(e));
  }
}

// Table row row_of(i) takes gradient row i, for i in the policy's range: one thread
// per row.
template <class Policy, class Weight, class Grad, class RowOf, class State>
void optim_rows(char const* label, Policy const& policy, StepRule const& rule, Weight const& weight, Grad const& grad,
                RowOf const& row_of, State const& first, State const& second) {
  std::int64_t const d = weight.extent(1);
  Kokkos::parallel_for(
      label, policy, KOKKOS_LAMBDA(std::int64_t i) {
        step_row(
            rule, weight, row_of(i), [&](std::int64_t c) { return grad(i, c); }, d, first, second);
      });
}

}  // namespace kembed::detail
