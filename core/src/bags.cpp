#include <kembed/core/bags.hpp>
#include <kembed/core/error.hpp>
#include <kembed/core/validate.hpp>

#include <string>
#include <type_traits>

namespace kembed {

std::string_view to_string(Pooling pooling) noexcept {
  switch (pooling) {
    case Pooling::sum:
      return "sum";
    case Pooling::mean:
      return "mean";
    case Pooling::max:
      return "max";
  }
  return "?";
}

Pooling parse_pooling(std::string_view text) {
  for (auto pooling : {Pooling::sum, Pooling::mean, Pooling::max})
    if (text == to_string(pooling)) return pooling;
  throw InvalidArgument("mode", "mode must be 'sum', 'mean' or 'max', got '" + std::string(text) + "'");
}

BagConfig make_bag_config(std::int64_t num_embeddings, std::int64_t embedding_dim, BagOptions const& options) {
  BagConfig config;
  config.embedding = make_config(num_embeddings, embedding_dim, options.embedding);
  config.pooling = options.pooling;
  config.include_last_offset = options.include_last_offset;
  // torch refuses it too: a max's gradient has one term per bag and column, which a
  // row's frequency does not describe.
  if (config.pooling == Pooling::max && config.embedding.scales())
    throw InvalidArgument("scale_grad_by_freq", "scale_grad_by_freq is '" +
                                                    std::string(to_string(config.embedding.scale_grad_by_freq)) +
                                                    "' but mode is 'max', which takes no frequency scaling");
  return config;
}

namespace {

[[noreturn]] void bad_offsets(std::string const& what) {
  throw InvalidArgument("offsets", "offsets " + what);
}

// Entry i holds o, after `before`: the first rule it breaks, by name.
[[noreturn]] void bad_offset(std::int64_t i, std::int64_t o, std::int64_t before, std::int64_t t) {
  auto const at = " at entry " + std::to_string(i);
  if (i == 0 && o != 0) bad_offsets("start at " + std::to_string(o) + "; the first bag must start at 0");
  if (o < before)
    bad_offsets("decrease" + at + " (" + std::to_string(before) + " then " + std::to_string(o) +
                "); each bag starts where the one before it ends or later");
  bad_offsets("hold " + std::to_string(o) + at + ", past the " + std::to_string(t) + " ids");
}

// Whether entries o[0..n) keep the rules (the first 0, none lower than the one
// before, none past t), in one pass without a branch per entry, so that it vectorises:
// a loop stopping at the first bad entry was 7% of a forward of bags of one position.
// A drop shows in the top bit of the unsigned difference unless it is 2^63 or more,
// which makes the entry negative (its own top bit); with none, the last bounds all.
// (Compares of 64-bit entries did not vectorise: 0.5 ns an entry, now 0.24.)
template <class T>
bool keep_the_rules(T const* o, std::int64_t n, std::int64_t t) {
  using U = std::make_unsigned_t<T>;
  U sign = 0;
  for (std::int64_t i = 1; i < n; ++i) sign |= (U(o[i]) - U(o[i - 1])) | U(o[i]);
  return o[0] == 0 && (sign >> (8 * sizeof(U) - 1)) == 0 && static_cast<std::int64_t>(o[n - 1]) <= t;
}

}  // namespace

std::int64_t check_offsets(IdsRef const& offsets, std::int64_t t, bool include_last_offset) {
  if (offsets.shape().rank() != 1)
    bad_offsets("has shape " + offsets.shape().str() + "; want a 1-D array of where each bag starts");
  auto const n = offsets.shape()[0];
  std::int64_t const least = include_last_offset ? 2 : 1;
  if (n < least)
    bad_offsets("has " + std::to_string(n) + " entries; want at least " + std::to_string(least) +
                (include_last_offset ? " with include_last_offset (each bag's start, then T)" : " (one per bag)"));
  if (offsets.data() == nullptr) bad_offsets("has no data (a null pointer)");
  bool const good = offsets.type() == IdType::int32
                        ? keep_the_rules(static_cast<std::int32_t const*>(offsets.data()), n, t)
                        : keep_the_rules(static_cast<std::int64_t const*>(offsets.data()), n, t);
  // No text formed unless an entry is bad: at one position a bag, a string per entry
  // (and a vector grown at the end) made this loop a third of a forward call.
  for (std::int64_t i = 0, before = 0; !good && i < n; before = offsets.at(i), ++i) {
    auto const o = offsets.at(i);
    if (o < before || o > t || (i == 0 && o != 0)) bad_offset(i, o, before, t);
  }
  std::int64_t const last = offsets.at(n - 1);
  if (include_last_offset && last != t)
    bad_offsets("end at " + std::to_string(last) + " but there are " + std::to_string(t) +
                " ids; with include_last_offset the last entry is the number of ids");
  return include_last_offset ? n - 1 : n;
}

namespace {

Bags bags_of_offsets(IdsRef const& offsets, std::int64_t t, bool include_last_offset) {
  auto const count = check_offsets(offsets, t, include_last_offset);
  Bags bags;
  bags.bounds.resize(std::size_t(count) + 1);
  for (std::int64_t i = 0; i < count; ++i) bags.bounds[std::size_t(i)] = offsets.at(i);
  bags.bounds.back() = t;
  return bags;
}

}  // namespace

Bags make_bags(Shape const& ids_shape, IdsRef const* offsets, bool include_last_offset) {
  if (ids_shape.rank() == 2) {
    if (offsets)
      throw InvalidArgument("offsets", "ids are 2-D " + ids_shape.str() +
                                           ", one bag per row, and take no offsets; pass 1-D ids with offsets, or "
                                           "no offsets");
    auto const b = ids_shape[0], l = ids_shape[1];
    ids_shape.numel("ids");
    if (b < 1) throw InvalidArgument("ids", "ids has shape " + ids_shape.str() + " with no bags; want at least one");
    Bags bags;
    bags.bounds.resize(std::size_t(b) + 1);
    for (std::int64_t i = 0; i <= b; ++i) bags.bounds[std::size_t(i)] = i * l;
    return bags;
  }
  if (ids_shape.rank() != 1)
    throw InvalidArgument("ids", "ids has shape " + ids_shape.str() +
                                     "; a bag call wants 1-D ids with offsets, or 2-D ids (bags, length)");
  if (!offsets)
    throw InvalidArgument("offsets", "ids are 1-D " + ids_shape.str() +
                                         " and need offsets (where each bag starts); or pass 2-D ids, one bag per row");
  return bags_of_offsets(*offsets, ids_shape[0], include_last_offset);
}

void check_bag_weights(BagConfig const& config, Shape const& ids_shape, FloatsRef const& weights) {
  if (weights.data == nullptr && weights.shape.rank() == 0) return;
  if (config.pooling != Pooling::sum)
    throw InvalidArgument("per_sample_weights", "per_sample_weights are given but mode is '" +
                                                    std::string(to_string(config.pooling)) +
                                                    "'; only mode 'sum' weighs its positions");
  if (weights.shape != ids_shape)
    throw InvalidArgument("per_sample_weights", "per_sample_weights has shape " + weights.shape.str() + ", want " +
                                                    ids_shape.str() + " (the ids' shape)");
  auto const t = ids_shape.numel("ids");
  if (weights.data == nullptr && t > 0)
    throw InvalidArgument("per_sample_weights", "per_sample_weights has no data (a null pointer)");
  auto const bad = first_non_finite(weights.data, t);
  if (bad < t) throw_non_finite("per_sample_weights", bad, weights.data[bad], 0, "");
}

void check_bag_dy(Shape const& dy_shape, std::int64_t bags, std::int64_t embedding_dim) {
  Shape const want{bags, embedding_dim};
  if (dy_shape != want)
    throw InvalidArgument("dy", "dy has shape " + dy_shape.str() + ", want " + want.str() + " (bags, embedding_dim)");
}

}  // namespace kembed
