#include <kembed/core/error.hpp>
#include <kembed/core/options.hpp>
#include <kembed/core/shape.hpp>

#include <cmath>
#include <sstream>

namespace kembed {

std::string_view to_string(Plan plan) noexcept {
  switch (plan) {
    case Plan::scan:
      return "scan";
    case Plan::sort:
      return "sort";
    case Plan::bucket:
      return "bucket";
    case Plan::automatic:
      return "auto";
  }
  return "?";
}

std::string_view to_string(Mode mode) noexcept {
  switch (mode) {
    case Mode::identical:
      return "identical";
    case Mode::deterministic:
      return "deterministic";
    case Mode::fast:
      return "fast";
  }
  return "?";
}

std::string_view to_string(FreqScale scale) noexcept {
  switch (scale) {
    case FreqScale::none:
      return "none";
    case FreqScale::call:
      return "call";
    case FreqScale::batch:
      return "batch";
  }
  return "?";
}

FreqScale parse_freq_scale(std::string_view text) {
  for (auto scale : {FreqScale::none, FreqScale::call, FreqScale::batch})
    if (text == to_string(scale)) return scale;
  throw InvalidArgument("scale_grad_by_freq",
                        "scale_grad_by_freq must be 'none', 'call' or 'batch', got '" + std::string(text) + "'");
}

Plan parse_plan(std::string_view text) {
  for (auto plan : {Plan::scan, Plan::sort, Plan::bucket, Plan::automatic})
    if (text == to_string(plan)) return plan;
  throw InvalidArgument("plan", "plan must be 'auto', 'scan', 'sort' or 'bucket', got '" + std::string(text) + "'");
}

Mode parse_mode(std::string_view text) {
  for (auto mode : {Mode::identical, Mode::deterministic, Mode::fast})
    if (text == to_string(mode)) return mode;
  throw InvalidArgument("mode", "mode must be 'identical', 'deterministic' or 'fast', got '" + std::string(text) + "'");
}

Config make_config(std::int64_t num_embeddings, std::int64_t embedding_dim, Options const& options) {
  if (num_embeddings < 1)
    throw InvalidArgument("num_embeddings", "num_embeddings must be at least 1, got " + std::to_string(num_embeddings));
  if (embedding_dim < 1)
    throw InvalidArgument("embedding_dim", "embedding_dim must be at least 1, got " + std::to_string(embedding_dim));
  checked_mul(num_embeddings, embedding_dim, "weight");
  if (options.max_norm) {
    double const m = *options.max_norm;
    if (!(m > 0) || !std::isfinite(m)) {
      std::ostringstream msg;
      msg << "max_norm must be a finite number > 0, got " << m;
      throw InvalidArgument("max_norm", msg.str());
    }
    double const p = options.norm_type;
    if (!(p > 0)) {  // NaN too
      std::ostringstream msg;
      msg << "norm_type must be > 0 (or inf), got " << p;
      throw InvalidArgument("norm_type", msg.str());
    }
  } else if (options.norm_type != 2.0) {
    std::ostringstream msg;
    msg << "norm_type is " << options.norm_type << " but has no effect without max_norm; give max_norm too";
    throw InvalidArgument("norm_type", msg.str());
  }
  Config config;
  config.num_embeddings = num_embeddings;
  config.embedding_dim = embedding_dim;
  config.plan = options.plan;
  config.mode = options.mode;
  config.max_norm = options.max_norm ? *options.max_norm : 0.0;
  config.norm_type = options.norm_type;
  config.scale_grad_by_freq = options.scale_grad_by_freq;
  config.sparse = options.sparse;
  if (options.padding_idx) {
    auto pad = *options.padding_idx;
    if (pad < -num_embeddings || pad >= num_embeddings) {
      throw InvalidArgument("padding_idx", "padding_idx must be within [" + std::to_string(-num_embeddings) + ", " +
                                               std::to_string(num_embeddings) + "), got " + std::to_string(pad));
    }
    config.padding_idx = pad < 0 ? num_embeddings + pad : pad;
  }
  return config;
}

Plan resolve_plan(Plan plan, std::int64_t num_embeddings, std::int64_t positions) noexcept {
  if (plan != Plan::automatic) return plan;
  // V * T compared without overflow: V >= threshold / T  <=>  V * T >= threshold.
  auto const need = (auto_sort_threshold + positions - 1) / positions;
  return num_embeddings >= need ? Plan::sort : Plan::scan;
}

Options options_of(Config const& config) {
  Options o;
  if (config.has_padding()) o.padding_idx = config.padding_idx;
  o.plan = config.plan;
  o.mode = config.mode;
  if (config.renormalises()) o.max_norm = config.max_norm;
  o.norm_type = config.norm_type;
  o.scale_grad_by_freq = config.scale_grad_by_freq;
  o.sparse = config.sparse;
  return o;
}

namespace {

std::string number_text(double x) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  std::ostringstream out;
  out.precision(17);  // round-trips a double; 0.5 stays "0.5"
  out << x;
  return out.str();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> settings_text(Config const& c, Settings which) {
  bool const all = which == Settings::all;
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("padding_idx", c.has_padding() ? std::to_string(c.padding_idx) : "none");
  if (all) out.emplace_back("plan", to_string(c.plan));
  out.emplace_back("mode", to_string(c.mode));
  if (all) out.emplace_back("max_norm", c.renormalises() ? number_text(c.max_norm) : "none");
  if (all) out.emplace_back("norm_type", number_text(c.norm_type));
  out.emplace_back("scale_grad_by_freq", to_string(c.scale_grad_by_freq));
  if (all) out.emplace_back("sparse", c.sparse ? "true" : "false");
  return out;
}

std::vector<SettingDifference> differences(Config const& a, Config const& b, Settings which) {
  auto const x = settings_text(a, which), y = settings_text(b, which);  // the same names in the same order
  std::vector<SettingDifference> out;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (x[i].second != y[i].second) out.push_back({x[i].first, x[i].second, y[i].second});
  return out;
}

}  // namespace kembed
