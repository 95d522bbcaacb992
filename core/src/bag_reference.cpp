#include <kembed/core/bag_reference.hpp>
#include <kembed/core/error.hpp>
#include <kembed/core/reference.hpp>
#include <kembed/core/validate.hpp>

#include <cmath>
#include <cstring>

namespace kembed::reference {
namespace {

using Index = std::int64_t;

void check_call(BagConfig const& config, BagCall const& call) {
  auto const t = call.ids.size();
  if (call.bags.positions() != t)
    throw InvalidArgument("offsets", "the bags cover " + std::to_string(call.bags.positions()) +
                                         " positions, the ids " + std::to_string(t));
  auto const bad = first_id_out_of_range(call.ids, config.embedding.num_embeddings);
  if (bad < t) throw_id_out_of_range("ids", bad, call.ids.at(bad), config.embedding.num_embeddings);
}

bool left_out(BagConfig const& config, BagCall const& call, Index p) {
  return config.embedding.has_padding() && call.ids.at(p) == config.embedding.padding_idx;
}

// The bag each position belongs to.
std::vector<Index> bag_of(BagCall const& call) {
  std::vector<Index> out(std::size_t(call.ids.size()));
  for (Index b = 0; b < call.bags.count(); ++b)
    for (Index p = call.bags.begin(b); p < call.bags.end(b); ++p) out[std::size_t(p)] = b;
  return out;
}

// Positions of bag b left after the padding row's leave.
Index bag_size(BagConfig const& config, BagCall const& call, Index b) {
  Index n = 0;
  for (Index p = call.bags.begin(b); p < call.bags.end(b); ++p) n += left_out(config, call, p) ? 0 : 1;
  return n;
}

// Term (p, c) of the backward: dy[b(p), c], or -0.0 in a column a max position did
// not win (adding -0.0 changes no value, so mode identical skips it; mode
// deterministic keeps it as a leaf of its tree, so the tree's shape is the row's).
struct Terms {
  BagConfig const& config;
  BagCall const& call;
  float const* dy;
  std::vector<Index> bag, argmax;
  std::vector<float> scale;
  float dy_of(Index p, Index c) const {
    auto const b = bag[std::size_t(p)], d = config.embedding.embedding_dim;
    if (config.pooling == Pooling::max && argmax[std::size_t(b * d + c)] != p) return -0.0f;
    return dy[b * d + c];
  }
};

Terms terms_of(float const* weight, BagConfig const& config, BagCall const& call, float const* dy,
               std::int64_t const* batch_counts) {
  check_call(config, call);
  Terms terms{config, call, dy, bag_of(call), {}, bag_term_scales(config, call, batch_counts)};
  if (config.pooling == Pooling::max) terms.argmax = bag_argmax(weight, config, call);
  return terms;
}

std::vector<float> start(Config const& config, float const* carry) {
  std::vector<float> g(std::size_t(config.num_embeddings * config.embedding_dim), 0.0f);
  if (carry) std::memcpy(g.data(), carry, g.size() * sizeof(float));
  return g;
}

void zero_padding_row(Config const& config, std::vector<float>& g) {
  if (!config.has_padding()) return;
  for (Index c = 0; c < config.embedding_dim; ++c) g[std::size_t(config.padding_idx * config.embedding_dim + c)] = 0.0f;
}

}  // namespace

std::vector<float> bag_forward(float const* weight, BagConfig const& config, BagCall const& call) {
  check_call(config, call);
  auto const d = config.embedding.embedding_dim;
  std::vector<float> y(std::size_t(call.bags.count() * d), 0.0f);
  if (config.pooling == Pooling::max) {
    auto const from = bag_argmax(weight, config, call);
    for (std::size_t i = 0; i < y.size(); ++i)
      if (from[i] >= 0) y[i] = weight[call.ids.at(from[i]) * d + Index(i) % d];
    return y;
  }
  for (Index b = 0; b < call.bags.count(); ++b) {
    float* const out = &y[std::size_t(b * d)];
    for (Index p = call.bags.begin(b); p < call.bags.end(b); ++p) {
      if (left_out(config, call, p)) continue;
      float const* const row = weight + call.ids.at(p) * d;
      for (Index c = 0; c < d; ++c)
        out[c] = call.weights ? std::fmaf(row[c], call.weights[p], out[c]) : out[c] + row[c];
    }
    auto const n = bag_size(config, call, b);
    if (config.pooling == Pooling::mean && n > 0)
      for (Index c = 0; c < d; ++c) out[c] = out[c] / float(n);
  }
  return y;
}

std::vector<std::int64_t> bag_argmax(float const* weight, BagConfig const& config, BagCall const& call) {
  check_call(config, call);
  auto const d = config.embedding.embedding_dim;
  std::vector<std::int64_t> from(std::size_t(call.bags.count() * d), -1);
  for (Index b = 0; b < call.bags.count(); ++b)
    for (Index p = call.bags.begin(b); p < call.bags.end(b); ++p) {
      if (left_out(config, call, p)) continue;
      float const* const row = weight + call.ids.at(p) * d;
      for (Index c = 0; c < d; ++c) {
        auto& f = from[std::size_t(b * d + c)];
        if (f < 0 || row[c] > weight[call.ids.at(f) * d + c]) f = p;
      }
    }
  return from;
}

std::vector<float> bag_term_scales(BagConfig const& config, BagCall const& call, std::int64_t const* batch_counts) {
  bool const freq = config.embedding.scales();
  if (!freq && config.pooling != Pooling::mean && !call.weights) return {};
  auto const t = call.ids.size();
  std::vector<std::int64_t> counts;
  if (freq && !batch_counts) counts = reference::counts(config.embedding.num_embeddings, call.ids);
  std::vector<float> s(std::size_t(t), 0.0f);
  for (Index b = 0; b < call.bags.count(); ++b) {
    auto const n = bag_size(config, call, b);
    for (Index p = call.bags.begin(b); p < call.bags.end(b); ++p) {
      auto const r = call.ids.at(p);
      double f = freq ? 1.0 / double(batch_counts ? batch_counts[r] : counts[std::size_t(r)]) : 1.0;
      if (config.pooling == Pooling::mean) f /= double(n);
      if (call.weights) f *= double(call.weights[p]);
      s[std::size_t(p)] = float(f);
    }
  }
  return s;
}

std::vector<float> bag_backward_identical(float const* weight, BagConfig const& config, BagCall const& call,
                                          float const* dy, float const* carry, std::int64_t const* batch_counts) {
  auto const terms = terms_of(weight, config, call, dy, batch_counts);
  auto const d = config.embedding.embedding_dim;
  auto g = start(config.embedding, carry);
  for (Index p = 0; p < call.ids.size(); ++p) {
    if (left_out(config, call, p)) continue;
    float* const out = &g[std::size_t(call.ids.at(p) * d)];
    for (Index c = 0; c < d; ++c)
      out[c] = terms.scale.empty() ? out[c] + terms.dy_of(p, c) : std::fmaf(terms.dy_of(p, c), terms.scale[p], out[c]);
  }
  zero_padding_row(config.embedding, g);
  return g;
}

std::vector<float> bag_backward_deterministic(float const* weight, BagConfig const& config, BagCall const& call,
                                              float const* dy, float const* carry, std::int64_t const* batch_counts) {
  auto const terms = terms_of(weight, config, call, dy, batch_counts);
  auto const v = config.embedding.num_embeddings, d = config.embedding.embedding_dim;
  std::vector<std::vector<Index>> positions(static_cast<std::size_t>(v));
  for (Index p = 0; p < call.ids.size(); ++p)
    if (!left_out(config, call, p)) positions[std::size_t(call.ids.at(p))].push_back(p);
  auto g = start(config.embedding, carry);
  std::vector<float> list;
  for (Index r = 0; r < v; ++r) {
    if (positions[std::size_t(r)].empty()) continue;
    for (Index c = 0; c < d; ++c) {
      list.clear();
      for (auto p : positions[std::size_t(r)])
        list.push_back(terms.scale.empty() ? terms.dy_of(p, c) : terms.dy_of(p, c) * terms.scale[p]);
      auto& out = g[std::size_t(r * d + c)];
      out = out + pairwise_sum(list.data(), Index(list.size()));
    }
  }
  zero_padding_row(config.embedding, g);
  return g;
}

std::vector<float> bag_weights_grad(float const* weight, BagConfig const& config, BagCall const& call,
                                    float const* dy) {
  check_call(config, call);
  auto const d = config.embedding.embedding_dim;
  auto const bag = bag_of(call);
  std::vector<float> out(std::size_t(call.ids.size()), 0.0f);
  for (Index p = 0; p < call.ids.size(); ++p) {
    if (left_out(config, call, p)) continue;
    float const* const row = weight + call.ids.at(p) * d;
    float const* const grad = dy + bag[std::size_t(p)] * d;
    float acc = 0.0f;
    for (Index c = 0; c < d; ++c) acc = std::fmaf(grad[c], row[c], acc);
    out[std::size_t(p)] = acc;
  }
  return out;
}

}  // namespace kembed::reference
