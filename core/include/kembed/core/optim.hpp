#pragma once
// The update step's rules (docs/CONTRACT.md, "Updates"): torch.optim's settings and
// their checks, the binary32 constants each step forms from them, and the state an
// optimizer keeps. The sequential reference that applies them is in
// optim_reference.hpp; kernels take a step's constants, never the settings, so every
// backend multiplies by the same floats.
#include <cstdint>
#include <string_view>
#include <vector>

namespace kembed {

enum class Optimizer { sgd, adagrad, rowwise_adagrad, adam };
std::string_view to_string(Optimizer optimizer) noexcept;  // "sgd", "adagrad", "rowwise_adagrad", "adam"
Optimizer parse_optimizer(std::string_view text);          // throws InvalidArgument naming "optimizer"

// torch.optim's constructor arguments, binary64 as Python holds them. Each optimizer
// reads its own; optim_defaults() gives torch's defaults (lr and eps differ).
struct OptimSettings {
  Optimizer optimizer = Optimizer::sgd;
  double lr = 1e-3;
  double weight_decay = 0.0;
  bool maximize = false;
  double momentum = 0.0, dampening = 0.0;  // SGD
  bool nesterov = false;                   // SGD
  double lr_decay = 0.0;                   // Adagrad
  double initial_accumulator_value = 0.0;  // Adagrad, row-wise Adagrad
  double eps = 1e-10;                      // Adagrad, row-wise Adagrad; Adam's default is 1e-8
  double beta1 = 0.9, beta2 = 0.999;       // Adam
  bool decoupled_weight_decay = false;     // Adam: true is AdamW
};

// torch's defaults: SGD lr 1e-3; Adagrad lr 1e-2, eps 1e-10; Adam lr 1e-3, eps 1e-8,
// betas (0.9, 0.999); row-wise Adagrad as Adagrad.
OptimSettings optim_defaults(Optimizer optimizer);

// Throws InvalidArgument naming the setting: a rate, decay or epsilon that is
// negative or not finite, betas outside [0, 1), nesterov without momentum or with
// dampening (as torch).
void check_settings(OptimSettings const& settings);

// beta^t in binary64 by square-and-multiply over t's bits from the highest: the same
// operations on every machine (pow differs between math libraries).
double power(double beta, std::int64_t t);

// One step's constants: binary64 expressions of the settings and the step count t
// (1 at the first step), each rounded once to binary32. Names say what they are.
struct StepConstants {
  std::int64_t t = 0;
  float weight_decay = 0.0f;  // f(weight_decay)
  float neg_lr = 0.0f;        // SGD: f(-lr)
  float momentum = 0.0f;      // SGD: f(momentum)
  float keep_grad = 0.0f;     // SGD: f(1 - dampening)
  float neg_clr = 0.0f;       // Adagrad: f(-lr / (1 + (t - 1) lr_decay))
  float lr = 0.0f;            // row-wise Adagrad: f(lr)
  float eps = 0.0f;           // f(eps)
  float lerp_weight = 0.0f;   // Adam: w = f(1 - beta1)
  float beta2 = 0.0f;         // Adam: f(beta2)
  float keep_square = 0.0f;   // Adam: f(1 - beta2)
  float correction2 = 0.0f;   // Adam: f(sqrt(1 - beta2^t))
  float neg_step = 0.0f;      // Adam: f(-lr / (1 - beta1^t))
  float decay = 1.0f;         // AdamW: f(1 - lr weight_decay)
};
StepConstants step_constants(OptimSettings const& settings, std::int64_t t);

// What an optimizer keeps between steps, for a (V, d) table: `first` is SGD's
// momentum buffer, Adagrad's sum or Adam's m, (V, d); row-wise Adagrad's one sum per
// row, (V); `second` is Adam's v, (V, d). Empty where unused (SGD without momentum).
// `step` counts the steps taken.
struct OptimState {
  Optimizer optimizer = Optimizer::sgd;
  std::int64_t num_embeddings = 0, embedding_dim = 0;
  std::int64_t step = 0;
  std::vector<float> first, second;
};

// Values per table row of `first` and `second` (d, 1 or 0) for a table of d columns.
struct StateWidths {
  std::int64_t first = 0, second = 0;
};
StateWidths state_widths(OptimSettings const& settings, std::int64_t embedding_dim);

// The state before the first step: +0.0, or f(initial_accumulator_value) for Adagrad.
OptimState initial_state(OptimSettings const& settings, std::int64_t num_embeddings, std::int64_t embedding_dim);

// Throws InvalidArgument naming "state" unless `state` is what `settings` keeps for a
// (V, d) table: the same optimizer, arrays of the right sizes, step >= 0, finite.
void check_state(OptimState const& state, OptimSettings const& settings, std::int64_t num_embeddings,
                 std::int64_t embedding_dim);
// The same for a row slab of a state (an MPI rank's, or a state file's rows): arrays
// of `rows` rows of the state's embedding_dim, messages naming rows from `first_row`.
void check_state_rows(OptimState const& state, OptimSettings const& settings, std::int64_t rows,
                      std::int64_t first_row);

}  // namespace kembed
