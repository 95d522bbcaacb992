#pragma once
// What the module's bindings share (module.cpp for Embedding, bags.cpp for EmbeddingBag).
#include "arrays.hpp"
#include "optim.hpp"

#include <kembed/core/validate.hpp>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>
#include <vector>

namespace kembed::python {

// Embedding's settings from Python's values (the C++ layer checks them).
Options options_from(std::optional<std::int64_t> padding_idx, std::string const& plan, std::string const& mode,
                     std::optional<double> max_norm, double norm_type, std::string const& scale, bool sparse);
// Every setting of a layer, by the names Python uses.
nb::dict settings(Config const& config);
// batch_counts (V entries) in the layer's memory, or null; `keep` holds them for the call.
std::int64_t const* batch_counts_in(Place const& layer, std::int64_t v, std::optional<AnyArray> const& a,
                                    std::vector<std::int64_t>& host, Buffer& keep);
// A dense carry (V, d) where the layer computes, or none (null data).
inline FloatsIn dense_carry_in(Place const& layer, std::int64_t v, std::int64_t d,
                               std::optional<AnyArray> const& carry) {
  if (!carry) return {};
  auto in = take_floats(*carry, "grad", &layer);
  check_table_shape("grad", Shape(in.shape), v, d);
  return in;
}
// A sparse carry from its arrays (host), or none when neither rows nor values are given.
std::optional<SparseGradient> sparse_carry_in(std::int64_t v, std::int64_t d, std::optional<AnyArray> const& rows,
                                              std::optional<AnyArray> const& values,
                                              std::optional<AnyArray> const& counts);
// (rows, values, counts) as numpy arrays, handed over.
nb::object sparse_out(SparseGradient&& g);

// A layer Python holds (PyLayer, PyBagLayer) over `weight`: none (for the backward
// alone), the caller's own (borrowed: kembed.torch's Parameter, on the host or the
// backend's device; `keep` holds it), or a host table the layer copies.
// `make(table, borrowed)` makes the C++ layer.
template <class Held, class Make>
Held hold_layer(std::string const& backend, std::int64_t v, std::int64_t d, std::optional<AnyArray> const& weight,
                bool borrowed, Make&& make) {
  Held out;
  if (!weight) {
    out.layer = make(nullptr, false);
    return out;
  }
  if (borrowed) {
    std::vector<std::int64_t> shape;
    float* table = take_borrowed(*weight, shape);
    check_table_shape("weight", Shape(shape), v, d);
    {
      nb::gil_scoped_release release;
      out.layer = make(table, true);
    }
    require_place(*weight, "weight", out.layer.get());
    bool const host_table = weight->device_type() == nb::device::cpu::value;
    if (host_table != (out.layer->device_type() == dlpack_cpu))
      throw nb::type_error(("kembed: the table is on the host but backend " + backend + " runs on a device").c_str());
    out.keep = nb::cast(*weight);
    return out;
  }
  auto const w = take_floats(*weight, "weight");  // a host table, copied by the layer
  check_table_shape("weight", Shape(w.shape), v, d);
  nb::gil_scoped_release release;
  out.layer = make(const_cast<float*>(w.data), false);
  return out;
}

// A copy of a layer's table (a Python-held layer: PyLayer, PyBagLayer), and a new one.
template <class Held>
nb::object weight_of(Held const& self) {
  std::vector<float> out(static_cast<std::size_t>(self.v() * self.d()));
  self.layer->weight(out.data());
  return to_numpy(std::move(out), {self.v(), self.d()});
}
template <class Held>
void set_weight_of(Held& self, AnyArray const& table) {
  auto const w = take_floats(table, "weight");
  check_table_shape("weight", Shape(w.shape), self.v(), self.d());
  nb::gil_scoped_release release;
  self.layer->set_weight(w.data);
}

// Layer.step / BagLayer.step: a dense gradient (the layer's memory, (V, d)), or a
// sparse one as (rows, values) host arrays.
template <class Held>
void step_layer(Held& self, PyOptim& optim, AnyArray const& grad) {
  auto const g = take_floats(grad, "grad", self.layer.get());
  check_table_shape("grad", Shape(g.shape), self.v(), self.d());
  nb::gil_scoped_release release;
  self.layer->step(*optim.optim, g.data);
}
template <class Held>
void step_layer_sparse(Held& self, PyOptim& optim, AnyArray const& rows, AnyArray const& values) {
  auto const g = sparse_carry_in(self.v(), self.d(), rows, values, std::nullopt);
  nb::gil_scoped_release release;
  self.layer->step(*optim.optim, *g);
}

// kembed._kembed.BagLayer (bags.cpp), kembed._kembed.Optimizer (optim.cpp).
void bind_bags(nb::module_& m);
void bind_optim(nb::module_& m);

}  // namespace kembed::python
