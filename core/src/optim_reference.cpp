#include <kembed/core/optim_reference.hpp>
#include <kembed/core/validate.hpp>

#include <cmath>
#include <vector>

namespace kembed::reference {

namespace {

// g as the optimizer sees it: negated for maximize, then L2 weight decay (not AdamW's).
float gradient(OptimSettings const& s, StepConstants const& k, float w, float g) {
  if (s.maximize) g = -g;
  if (s.weight_decay != 0.0 && !(s.optimizer == Optimizer::adam && s.decoupled_weight_decay))
    g = std::fmaf(w, k.weight_decay, g);
  return g;
}

void sgd(OptimSettings const& s, StepConstants const& k, float& w, float g, float* b) {
  g = gradient(s, k, w, g);
  if (s.momentum != 0.0) {
    *b = k.t == 1 ? g : std::fmaf(g, k.keep_grad, *b * k.momentum);
    g = s.nesterov ? std::fmaf(*b, k.momentum, g) : *b;
  }
  w = std::fmaf(g, k.neg_lr, w);
}

void adagrad(OptimSettings const& s, StepConstants const& k, float& w, float g, float& sum) {
  g = gradient(s, k, w, g);
  sum = std::fmaf(g, g, sum);
  w = w + (k.neg_clr * g) / (std::sqrt(sum) + k.eps);
}

void adam(OptimSettings const& s, StepConstants const& k, float& w, float g, float& m, float& v) {
  if (s.decoupled_weight_decay && s.weight_decay != 0.0) w = w * k.decay;
  g = gradient(s, k, w, g);
  float const diff = g - m;
  m = k.lerp_weight < 0.5f ? std::fmaf(k.lerp_weight, diff, m) : std::fmaf(-(1.0f - k.lerp_weight), diff, g);
  v = std::fmaf(k.keep_square * g, g, v * k.beta2);
  w = w + (k.neg_step * m) / (std::sqrt(v) / k.correction2 + k.eps);
}

// Row-wise Adagrad on one row: the mean of its squared gradient, folded in column order.
void rowwise_adagrad(OptimSettings const& s, StepConstants const& k, float* w, float const* grad, std::int64_t d,
                     float& sum) {
  std::vector<float> g(static_cast<std::size_t>(d));
  float q = 0.0f;
  for (std::int64_t c = 0; c < d; ++c) {
    g[c] = gradient(s, k, w[c], grad[c]);
    q = std::fmaf(g[c], g[c], q);
  }
  sum = sum + q / static_cast<float>(d);
  float const rate = k.lr / (std::sqrt(sum) + k.eps);
  for (std::int64_t c = 0; c < d; ++c) w[c] = std::fmaf(g[c], -rate, w[c]);
}

// Row r of the table takes its gradient row `g`.
void update_row(OptimSettings const& s, StepConstants const& k, float* weight, std::int64_t d, std::int64_t r,
                float const* g, OptimState& st) {
  float* w = weight + r * d;
  if (s.optimizer == Optimizer::rowwise_adagrad) return rowwise_adagrad(s, k, w, g, d, st.first[r]);
  for (std::int64_t c = 0; c < d; ++c) {
    std::int64_t const i = r * d + c;
    switch (s.optimizer) {
      case Optimizer::sgd:
        sgd(s, k, w[c], g[c], st.first.empty() ? nullptr : &st.first[i]);
        break;
      case Optimizer::adagrad:
        adagrad(s, k, w[c], g[c], st.first[i]);
        break;
      case Optimizer::adam:
        adam(s, k, w[c], g[c], st.first[i], st.second[i]);
        break;
      case Optimizer::rowwise_adagrad:
        break;
    }
  }
}

}  // namespace

void optim_step(OptimSettings const& s, float* weight, std::int64_t v, std::int64_t d, float const* grad,
                OptimState& state) {
  check_settings(s);
  check_state(state, s, v, d);
  if (auto const i = first_non_finite(grad, v * d); i < v * d) throw_non_finite("grad", i, grad[i], d, "row");
  auto const k = step_constants(s, state.step + 1);
  for (std::int64_t r = 0; r < v; ++r) update_row(s, k, weight, d, r, grad + r * d, state);
  state.step = k.t;
}

void optim_step(OptimSettings const& s, float* weight, std::int64_t v, std::int64_t d, SparseGradient const& grad,
                OptimState& state) {
  check_settings(s);
  check_state(state, s, v, d);
  check_sparse("grad", grad, v, d);
  auto const k = step_constants(s, state.step + 1);
  for (std::int64_t i = 0; i < grad.size(); ++i) update_row(s, k, weight, d, grad.rows[i], &grad.values[i * d], state);
  state.step = k.t;
}

}  // namespace kembed::reference
