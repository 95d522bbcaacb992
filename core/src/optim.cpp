#include <kembed/core/error.hpp>
#include <kembed/core/optim.hpp>
#include <kembed/core/validate.hpp>

#include <cmath>
#include <cstdio>
#include <string>

namespace kembed {

namespace {

std::string number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", x);
  return text;
}

void want_rate(char const* name, double x) {
  if (!std::isfinite(x) || x < 0.0)
    throw InvalidArgument(name, std::string(name) + " = " + number(x) + ": want a finite number >= 0");
}

void want_beta(char const* name, double x) {
  if (!(x >= 0.0 && x < 1.0))
    throw InvalidArgument("betas", std::string(name) + " = " + number(x) + ": want a number in [0, 1)");
}

std::size_t floats(std::int64_t n) {
  return static_cast<std::size_t>(n);
}

}  // namespace

std::string_view to_string(Optimizer optimizer) noexcept {
  switch (optimizer) {
    case Optimizer::sgd:
      return "sgd";
    case Optimizer::adagrad:
      return "adagrad";
    case Optimizer::rowwise_adagrad:
      return "rowwise_adagrad";
    case Optimizer::adam:
      return "adam";
  }
  return "?";
}

Optimizer parse_optimizer(std::string_view text) {
  for (auto o : {Optimizer::sgd, Optimizer::adagrad, Optimizer::rowwise_adagrad, Optimizer::adam})
    if (text == to_string(o)) return o;
  throw InvalidArgument("optimizer",
                        "optimizer '" + std::string(text) + "' is not one of sgd, adagrad, rowwise_adagrad, adam");
}

OptimSettings optim_defaults(Optimizer optimizer) {
  OptimSettings s;
  s.optimizer = optimizer;
  if (optimizer == Optimizer::adagrad || optimizer == Optimizer::rowwise_adagrad) s.lr = 1e-2;
  if (optimizer == Optimizer::adam) s.eps = 1e-8;
  return s;
}

void check_settings(OptimSettings const& s) {
  want_rate("lr", s.lr);
  want_rate("weight_decay", s.weight_decay);
  want_rate("momentum", s.momentum);
  want_rate("dampening", s.dampening);
  want_rate("lr_decay", s.lr_decay);
  want_rate("initial_accumulator_value", s.initial_accumulator_value);
  want_rate("eps", s.eps);
  want_beta("beta1", s.beta1);
  want_beta("beta2", s.beta2);
  if (s.optimizer == Optimizer::sgd && s.nesterov && (s.momentum <= 0.0 || s.dampening != 0.0))
    throw InvalidArgument("nesterov", "nesterov needs momentum > 0 and dampening 0 (as torch); have momentum " +
                                          number(s.momentum) + ", dampening " + number(s.dampening));
}

double power(double beta, std::int64_t t) {
  double r = 1.0;
  for (int bit = 62; bit >= 0; --bit) {
    r = r * r;
    if ((t >> bit) & 1) r = r * beta;
  }
  return r;
}

StepConstants step_constants(OptimSettings const& s, std::int64_t t) {
  StepConstants k;
  k.t = t;
  k.weight_decay = static_cast<float>(s.weight_decay);
  k.neg_lr = static_cast<float>(-s.lr);
  k.momentum = static_cast<float>(s.momentum);
  k.keep_grad = static_cast<float>(1.0 - s.dampening);
  k.neg_clr = static_cast<float>(-(s.lr / (1.0 + static_cast<double>(t - 1) * s.lr_decay)));
  k.lr = static_cast<float>(s.lr);
  k.eps = static_cast<float>(s.eps);
  k.lerp_weight = static_cast<float>(1.0 - s.beta1);
  k.beta2 = static_cast<float>(s.beta2);
  k.keep_square = static_cast<float>(1.0 - s.beta2);
  k.correction2 = static_cast<float>(std::sqrt(1.0 - power(s.beta2, t)));
  k.neg_step = static_cast<float>(-(s.lr / (1.0 - power(s.beta1, t))));
  k.decay = s.decoupled_weight_decay ? static_cast<float>(1.0 - s.lr * s.weight_decay) : 1.0f;
  return k;
}

StateWidths state_widths(OptimSettings const& s, std::int64_t d) {
  switch (s.optimizer) {
    case Optimizer::sgd:
      return {s.momentum != 0.0 ? d : 0, 0};
    case Optimizer::rowwise_adagrad:
      return {1, 0};
    case Optimizer::adam:
      return {d, d};
    default:
      return {d, 0};
  }
}

// Sizes of `first` and `second` for a (V, d) table.
static std::int64_t first_size(OptimSettings const& s, std::int64_t v, std::int64_t d) {
  return v * state_widths(s, d).first;
}
static std::int64_t second_size(OptimSettings const& s, std::int64_t v, std::int64_t d) {
  return v * state_widths(s, d).second;
}

OptimState initial_state(OptimSettings const& s, std::int64_t v, std::int64_t d) {
  OptimState st;
  st.optimizer = s.optimizer;
  st.num_embeddings = v, st.embedding_dim = d;
  bool const adagrad = s.optimizer == Optimizer::adagrad || s.optimizer == Optimizer::rowwise_adagrad;
  float const start = adagrad ? static_cast<float>(s.initial_accumulator_value) : 0.0f;
  st.first.assign(floats(first_size(s, v, d)), start);
  st.second.assign(floats(second_size(s, v, d)), 0.0f);
  return st;
}

static void check_optimizer(OptimState const& st, OptimSettings const& s) {
  if (st.optimizer != s.optimizer)
    throw InvalidArgument("state", "state is " + std::string(to_string(st.optimizer)) + "'s, the step is " +
                                       std::string(to_string(s.optimizer)) + "'s");
}

void check_state(OptimState const& st, OptimSettings const& s, std::int64_t v, std::int64_t d) {
  check_optimizer(st, s);
  if (st.num_embeddings != v || st.embedding_dim != d)
    throw InvalidArgument("state", "state is for a (" + std::to_string(st.num_embeddings) + ", " +
                                       std::to_string(st.embedding_dim) + ") table, want (" + std::to_string(v) + ", " +
                                       std::to_string(d) + ")");
  check_state_rows(st, s, v, 0);
}

void check_state_rows(OptimState const& st, OptimSettings const& s, std::int64_t rows, std::int64_t first_row) {
  check_optimizer(st, s);
  auto const d = st.embedding_dim;
  auto const a = first_size(s, rows, d), b = second_size(s, rows, d);
  if (std::int64_t(st.first.size()) != a || std::int64_t(st.second.size()) != b)
    throw InvalidArgument("state", "state holds " + std::to_string(st.first.size()) + " + " +
                                       std::to_string(st.second.size()) + " values, " +
                                       std::string(to_string(s.optimizer)) + " with these settings keeps " +
                                       std::to_string(a) + " + " + std::to_string(b));
  if (st.step < 0) throw InvalidArgument("state", "state.step = " + std::to_string(st.step) + ": want >= 0");
  auto const w = state_widths(s, d);
  if (auto const i = first_non_finite(st.first.data(), a); i < a)
    throw_non_finite("state", first_row * w.first + i, st.first[floats(i)],
                     s.optimizer == Optimizer::rowwise_adagrad ? 0 : d, "row");
  if (auto const i = first_non_finite(st.second.data(), b); i < b)
    throw_non_finite("state", first_row * w.second + i, st.second[floats(i)], d, "row");
}

}  // namespace kembed
