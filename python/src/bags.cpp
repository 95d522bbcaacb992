// kembed._kembed.BagLayer: kembed::EmbeddingBag for the kembed package. A bag call's
// ids, offsets and weights are checked here by torch's rules (make_bags), the rest by
// the C++ layer; its errors become Python's as Layer's do.
#include "bindings.hpp"

#include <kembed/core/error.hpp>
#include <kembed/core/validate.hpp>

namespace kembed::python {
namespace {

using namespace nb::literals;

// The bag layer Python holds; `keep` holds a borrowed table (kembed.torch's Parameter).
struct PyBagLayer {
  std::unique_ptr<BagLayer> layer;
  nb::object keep;

  std::int64_t v() const { return layer->config().embedding.num_embeddings; }
  std::int64_t d() const { return layer->config().embedding.embedding_dim; }
  Buffer fresh(std::int64_t rows, std::int64_t cols) const {
    return layer->new_buffer(std::size_t(checked_mul(rows, cols, "result")) * sizeof(float));
  }
};

// A call's arrays where the layer computes, its bags by torch's rules.
struct BagIn {
  IdsIn ids;
  std::vector<std::int64_t> bounds;
  FloatsIn weights;
  std::int64_t* argmax = nullptr;
  BagCall call() const { return BagCall{ids.ids, &bounds, weights.data, argmax}; }
  std::int64_t count() const { return std::int64_t(bounds.size()) - 1; }
};

BagIn take_bag(PyBagLayer const& self, AnyArray const& ids, std::optional<AnyArray> const& offsets,
               std::optional<AnyArray> const& weights) {
  BagIn in;
  in.ids = take_ids(ids, self.v(), *self.layer);
  std::vector<std::int64_t> starts;
  if (offsets) starts = take_int64s(*offsets, "offsets");
  IdsRef const ref(starts.data(), Shape{std::int64_t(starts.size())});
  in.bounds = make_bags(Shape(in.ids.shape), offsets ? &ref : nullptr, self.layer->config().include_last_offset).bounds;
  if (weights) {  // the rest (finite, mode sum) is the layer's to check
    in.weights = take_floats(*weights, "per_sample_weights", self.layer.get());
    if (in.weights.shape != in.ids.shape)
      throw InvalidArgument("per_sample_weights", "per_sample_weights has shape " + Shape(in.weights.shape).str() +
                                                      ", want the ids' shape " + Shape(in.ids.shape).str());
  }
  return in;
}

// max's argmax, (B, d) int64 in the layer's memory, where given.
void take_argmax(PyBagLayer const& self, std::optional<nb::ndarray<>> const& argmax, BagIn& bag) {
  if (argmax) bag.argmax = take_int64_in_place(*argmax, {bag.count(), self.d()}, "argmax", *self.layer);
}

FloatsIn take_dy(PyBagLayer const& self, AnyArray const& dy, BagIn const& bag) {
  auto in = take_floats(dy, "dy", self.layer.get());
  check_bag_dy(Shape(in.shape), bag.count(), self.d());
  return in;
}

PyBagLayer make(std::string const& backend, std::int64_t v, std::int64_t d, std::optional<AnyArray> const& weight,
                bool borrowed, std::string const& pooling, bool include_last_offset,
                std::optional<std::int64_t> padding_idx, std::string const& plan, std::string const& mode,
                std::optional<double> max_norm, double norm_type, std::string const& scale, bool sparse) {
  BagOptions options;
  options.embedding = options_from(padding_idx, plan, mode, max_norm, norm_type, scale, sparse);
  options.pooling = parse_pooling(pooling);
  options.include_last_offset = include_last_offset;
  return hold_layer<PyBagLayer>(backend, v, d, weight, borrowed, [&](float* table, bool borrow) {
    return make_bag_layer(backend, v, d, table, borrow, options);
  });
}

nb::object forward(PyBagLayer const& self, AnyArray const& ids, std::optional<AnyArray> const& offsets,
                   std::optional<AnyArray> const& weights, std::optional<nb::ndarray<>> const& out,
                   std::optional<nb::ndarray<>> const& argmax) {
  auto bag = take_bag(self, ids, offsets, weights);
  take_argmax(self, argmax, bag);
  std::vector<std::int64_t> const shape{bag.count(), self.d()};
  Buffer fresh;
  float* y = out ? take_out(*out, shape, "out", *self.layer)
                 : static_cast<float*>((fresh = self.fresh(bag.count(), self.d())).data);
  {
    nb::gil_scoped_release release;
    self.layer->forward(bag.call(), y);
  }
  return out ? nb::cast(*out) : to_array<float>(std::move(fresh), shape, self.layer->device_type());
}

nb::object backward(PyBagLayer const& self, AnyArray const& ids, std::optional<AnyArray> const& offsets,
                    AnyArray const& dy_array, std::optional<AnyArray> const& carry_array,
                    std::optional<AnyArray> const& weights, std::optional<AnyArray> const& batch,
                    std::optional<nb::ndarray<>> const& out, std::optional<nb::ndarray<>> const& argmax) {
  auto bag = take_bag(self, ids, offsets, weights);
  take_argmax(self, argmax, bag);
  auto const dy = take_dy(self, dy_array, bag);
  auto const carry = dense_carry_in(*self.layer, self.v(), self.d(), carry_array);
  std::vector<std::int64_t> batch_host;
  Buffer batch_keep;
  auto const* batch_counts = batch_counts_in(*self.layer, self.v(), batch, batch_host, batch_keep);
  Buffer fresh;  // out= may be the carry itself: the fold continues in place
  float* grad = out ? take_out(*out, {self.v(), self.d()}, "out", *self.layer)
                    : static_cast<float*>((fresh = self.fresh(self.v(), self.d())).data);
  {
    nb::gil_scoped_release release;
    self.layer->backward(bag.call(), dy.data, carry.data, grad, batch_counts);
  }
  return out ? nb::cast(*out) : to_array<float>(std::move(fresh), {self.v(), self.d()}, self.layer->device_type());
}

nb::object backward_sparse(PyBagLayer const& self, AnyArray const& ids, std::optional<AnyArray> const& offsets,
                           AnyArray const& dy_array, std::optional<AnyArray> const& rows,
                           std::optional<AnyArray> const& values, std::optional<AnyArray> const& counts,
                           std::optional<AnyArray> const& weights, std::optional<AnyArray> const& batch,
                           std::optional<nb::ndarray<>> const& argmax) {
  auto bag = take_bag(self, ids, offsets, weights);
  take_argmax(self, argmax, bag);
  auto const dy = take_dy(self, dy_array, bag);
  auto const carry = sparse_carry_in(self.v(), self.d(), rows, values, counts);
  std::vector<std::int64_t> batch_host;
  Buffer batch_keep;
  auto const* batch_counts = batch_counts_in(*self.layer, self.v(), batch, batch_host, batch_keep);
  SparseGradient g;
  {
    nb::gil_scoped_release release;
    g = self.layer->backward_sparse(bag.call(), dy.data, carry ? &*carry : nullptr, batch_counts);
  }
  return sparse_out(std::move(g));
}

nb::object weights_backward(PyBagLayer const& self, AnyArray const& ids, std::optional<AnyArray> const& offsets,
                            AnyArray const& dy_array) {
  auto const bag = take_bag(self, ids, offsets, std::nullopt);
  auto const dy = take_dy(self, dy_array, bag);
  auto out = self.fresh(bag.ids.ids.size, 1);
  {
    nb::gil_scoped_release release;
    self.layer->weights_backward(bag.call(), dy.data, static_cast<float*>(out.data));
  }
  return to_array<float>(std::move(out), bag.ids.shape, self.layer->device_type());
}

nb::dict bag_settings(BagConfig const& c) {
  auto s = settings(c.embedding);
  s["pooling"] = std::string(to_string(c.pooling));
  s["include_last_offset"] = c.include_last_offset;
  return s;
}

}  // namespace

void bind_bags(nb::module_& m) {
  nb::class_<PyBagLayer>(m, "BagLayer")
      .def(nb::new_(&make), "backend"_a, "num_embeddings"_a, "embedding_dim"_a, "weight"_a.none(), "borrowed"_a,
           "pooling"_a, "include_last_offset"_a, "padding_idx"_a.none(), "plan"_a, "mode"_a, "max_norm"_a.none(),
           "norm_type"_a, "scale_grad_by_freq"_a, "sparse"_a)
      .def("forward", &forward, "ids"_a, "offsets"_a.none(), "per_sample_weights"_a.none(), "out"_a.none(),
           "argmax"_a.none() = nb::none())
      .def("backward", &backward, "ids"_a, "offsets"_a.none(), "dy"_a, "grad"_a.none(), "per_sample_weights"_a.none(),
           "batch_counts"_a.none(), "out"_a.none(), "argmax"_a.none() = nb::none())
      .def("backward_sparse", &backward_sparse, "ids"_a, "offsets"_a.none(), "dy"_a, "rows"_a.none(), "values"_a.none(),
           "counts"_a.none(), "per_sample_weights"_a.none(), "batch_counts"_a.none(), "argmax"_a.none() = nb::none())
      .def("per_sample_weights_backward", &weights_backward, "ids"_a, "offsets"_a.none(), "dy"_a)
      .def("weight", &weight_of<PyBagLayer>)
      .def("set_weight", &set_weight_of<PyBagLayer>, "weight"_a)
      .def("step", &step_layer<PyBagLayer>, "optimizer"_a, "grad"_a)
      .def("step_sparse", &step_layer_sparse<PyBagLayer>, "optimizer"_a, "rows"_a, "values"_a)
      .def("settings", [](PyBagLayer const& l) { return bag_settings(l.layer->config()); })
      .def("backend", [](PyBagLayer const& l) { return std::string(l.layer->backend()); });
}

}  // namespace kembed::python
