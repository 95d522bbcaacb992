// kembed._kembed: the nanobind module under the `kembed` package. A thin layer over
// kembed::Embedding and kembed::io; argument checks are the C++ layer's own, and its
// errors become Python's (docs/PYTHON.md, Errors).
#include "arrays.hpp"
#include "bindings.hpp"
#include "layer.hpp"

#include <kembed/core/build_info.hpp>
#include <kembed/core/validate.hpp>
#include <kembed/io/error.hpp>
#include <kembed/io/table_file.hpp>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>

namespace nb = nanobind;
using namespace nb::literals;

namespace kembed::python {
namespace {

// The Layer Python holds. Its table is its own copy, unless `borrowed` (then `keep`
// holds the caller's array while the layer lives).
struct PyLayer {
  std::unique_ptr<Layer> layer;
  nb::object keep;

  std::int64_t v() const { return layer->config().num_embeddings; }
  std::int64_t d() const { return layer->config().embedding_dim; }
  int device() const { return layer->device_type(); }
  FloatsIn dy_for(AnyArray const& dy, IdsIn const& ids) const {
    auto in = take_floats(dy, "dy", layer.get());
    check_dy_shape(Shape(ids.shape), Shape(in.shape), d());
    return in;
  }
  // A new result buffer in the layer's memory (huge pages advised on the host).
  Buffer fresh(std::int64_t rows, std::int64_t cols, std::size_t item = sizeof(float)) const {
    return layer->new_buffer(std::size_t(checked_mul(rows, cols, "result")) * item);
  }
  std::int64_t const* batch_counts(std::optional<AnyArray> const& a, std::vector<std::int64_t>& host,
                                   Buffer& keep) const {
    return batch_counts_in(*layer, v(), a, host, keep);
  }
};

PyLayer make(std::string const& backend, std::int64_t v, std::int64_t d, std::optional<AnyArray> const& weight,
             bool borrowed, std::optional<std::int64_t> padding_idx, std::string const& plan, std::string const& mode,
             std::optional<double> max_norm, double norm_type, std::string const& scale, bool sparse) {
  auto const options = options_from(padding_idx, plan, mode, max_norm, norm_type, scale, sparse);
  return hold_layer<PyLayer>(backend, v, d, weight, borrowed, [&](float* table, bool borrow) {
    return make_layer(backend, v, d, table, borrow, options);
  });
}

nb::object forward(PyLayer const& self, AnyArray const& ids_array, std::optional<nb::ndarray<>> const& out) {
  auto const ids = take_ids(ids_array, self.v(), *self.layer);
  auto shape = ids.shape;
  shape.push_back(self.d());
  check_ids_shape(Shape(ids.shape));
  Buffer fresh;
  float* y = out ? take_out(*out, shape, "out", *self.layer)
                 : static_cast<float*>((fresh = self.fresh(ids.ids.size, self.d())).data);
  {
    nb::gil_scoped_release release;
    self.layer->forward(ids.ids, y);
  }
  return out ? nb::cast(*out) : to_array<float>(std::move(fresh), shape, self.device());
}

nb::object backward(PyLayer const& self, AnyArray const& ids_array, AnyArray const& dy_array,
                    std::optional<AnyArray> const& carry_array, std::optional<AnyArray> const& batch,
                    std::optional<nb::ndarray<>> const& out) {
  auto const ids = take_ids(ids_array, self.v(), *self.layer);
  auto const dy = self.dy_for(dy_array, ids);
  auto const carry = dense_carry_in(*self.layer, self.v(), self.d(), carry_array);
  std::vector<std::int64_t> batch_host;
  Buffer batch_keep;
  auto const* batch_counts = self.batch_counts(batch, batch_host, batch_keep);
  // out= may be the carry itself: the fold then continues in place (only the rows hit are written).
  Buffer fresh;
  float* grad = out ? take_out(*out, {self.v(), self.d()}, "out", *self.layer)
                    : static_cast<float*>((fresh = self.fresh(self.v(), self.d())).data);
  {
    nb::gil_scoped_release release;
    self.layer->backward(ids.ids, dy.data, carry.data, grad, nullptr, batch_counts);
  }
  return out ? nb::cast(*out) : to_array<float>(std::move(fresh), {self.v(), self.d()}, self.device());
}

nb::object backward_sparse(PyLayer const& self, AnyArray const& ids_array, AnyArray const& dy_array,
                           std::optional<AnyArray> const& carry_rows, std::optional<AnyArray> const& carry_values,
                           std::optional<AnyArray> const& carry_counts, std::optional<AnyArray> const& batch) {
  auto const ids = take_ids(ids_array, self.v(), *self.layer);
  auto const dy = self.dy_for(dy_array, ids);
  auto const carry = sparse_carry_in(self.v(), self.d(), carry_rows, carry_values, carry_counts);
  std::vector<std::int64_t> batch_host;
  Buffer batch_keep;
  auto const* batch_counts = self.batch_counts(batch, batch_host, batch_keep);
  SparseGradient g;
  {
    nb::gil_scoped_release release;
    g = self.layer->backward_sparse(ids.ids, dy.data, carry ? &*carry : nullptr, batch_counts);
  }
  return sparse_out(std::move(g));
}

void backward_step(PyLayer& self, AnyArray const& ids_array, AnyArray const& dy_array, PyOptim& optim,
                   std::optional<AnyArray> const& batch) {
  auto const ids = take_ids(ids_array, self.v(), *self.layer);
  auto const dy = self.dy_for(dy_array, ids);
  std::vector<std::int64_t> batch_host;
  Buffer batch_keep;
  auto const* batch_counts = self.batch_counts(batch, batch_host, batch_keep);
  nb::gil_scoped_release release;
  self.layer->backward_step(ids.ids, dy.data, *optim.optim, batch_counts);
}

nb::object counts(PyLayer const& self, AnyArray const& ids_array) {
  auto const ids = take_ids(ids_array, self.v(), *self.layer);
  auto out = self.fresh(self.v(), 1, sizeof(std::int64_t));
  {
    nb::gil_scoped_release release;
    self.layer->counts(ids.ids, static_cast<std::int64_t*>(out.data));
  }
  return to_array<std::int64_t>(std::move(out), {self.v()}, self.device());
}

}  // namespace

Options options_from(std::optional<std::int64_t> padding_idx, std::string const& plan, std::string const& mode,
                     std::optional<double> max_norm, double norm_type, std::string const& scale, bool sparse) {
  Options o;
  o.padding_idx = padding_idx;
  o.plan = parse_plan(plan);
  o.mode = parse_mode(mode);
  o.max_norm = max_norm;
  o.norm_type = norm_type;
  o.scale_grad_by_freq = parse_freq_scale(scale);
  o.sparse = sparse;
  return o;
}

std::int64_t const* batch_counts_in(Place const& layer, std::int64_t v, std::optional<AnyArray> const& a,
                                    std::vector<std::int64_t>& host, Buffer& keep) {
  if (!a) return nullptr;
  host = take_int64s(*a, "batch_counts");
  if (static_cast<std::int64_t>(host.size()) != v)
    throw InvalidArgument("batch_counts", "batch_counts has " + std::to_string(host.size()) + " entries, want " +
                                              std::to_string(v) + " (num_embeddings)");
  if (layer.device_type() == dlpack_cpu) return host.data();
  keep = layer.new_buffer(host.size() * sizeof(std::int64_t));
  layer.upload(keep.data, host.data(), host.size() * sizeof(std::int64_t));
  return static_cast<std::int64_t const*>(keep.data);
}

std::optional<SparseGradient> sparse_carry_in(std::int64_t v, std::int64_t d, std::optional<AnyArray> const& rows,
                                              std::optional<AnyArray> const& values,
                                              std::optional<AnyArray> const& counts) {
  if (!rows && !values) return std::nullopt;
  if (!rows || !values) throw InvalidArgument("grad", "a sparse carry needs both its rows and its values");
  std::optional<SparseGradient> carry(std::in_place);
  carry->num_embeddings = v;
  carry->embedding_dim = d;
  carry->rows = take_int64s(*rows, "grad.rows");
  auto const host = take_floats(*values, "grad.values");        // on the host, as the result
  carry->values.assign(host.data, host.data + values->size());  // checked against rows x d
  carry->counts = counts ? take_int64s(*counts, "grad.counts") : std::vector<std::int64_t>(carry->rows.size(), 0);
  return carry;
}

nb::object sparse_out(SparseGradient&& g) {
  auto const n = g.size(), d = g.embedding_dim;
  return nb::make_tuple(to_numpy(std::move(g.rows), {n}), to_numpy(std::move(g.values), {n, d}),
                        to_numpy(std::move(g.counts), {n}));
}

nb::dict settings(Config const& c) {
  nb::dict s;
  s["num_embeddings"] = c.num_embeddings;
  s["embedding_dim"] = c.embedding_dim;
  s["padding_idx"] = c.has_padding() ? nb::cast(c.padding_idx) : nb::none();
  s["plan"] = std::string(to_string(c.plan));
  s["mode"] = std::string(to_string(c.mode));
  s["max_norm"] = c.renormalises() ? nb::cast(c.max_norm) : nb::none();
  s["norm_type"] = c.norm_type;
  s["scale_grad_by_freq"] = std::string(to_string(c.scale_grad_by_freq));
  s["sparse"] = c.sparse;
  return s;
}

namespace {

void save(PyLayer const& self, std::string const& path, std::string const& created_by) {
  std::vector<float> w(static_cast<std::size_t>(self.v() * self.d()));
  self.layer->weight(w.data());
  io::SaveOptions options;
  options.created_by = created_by;
  nb::gil_scoped_release release;
  io::save_table(path, w.data(), self.layer->config(), options);
}

nb::tuple load(std::string const& path) {
  io::TableFile file;
  {
    nb::gil_scoped_release release;
    file = io::load_table(path);
  }
  auto const v = file.config.num_embeddings, d = file.config.embedding_dim;
  return nb::make_tuple(to_numpy(std::move(file.weight), {v, d}), settings(file.config));
}

void translate_errors() {
  // Most specific first: nanobind tries translators from the last registered.
  nb::register_exception_translator([](std::exception_ptr const& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (io::FileError const& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    } catch (io::IoFailure const& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    } catch (IdOutOfRange const& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (Error const& e) {  // InvalidArgument, NonFinite, Unsupported
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
}

}  // namespace
}  // namespace kembed::python

NB_MODULE(_kembed, m) {
  using namespace kembed::python;
  m.doc() = "kembed's C++ layer (use the kembed package, not this module)";
  translate_errors();
  nb::class_<PyLayer>(m, "Layer")
      .def(nb::new_(&make), "backend"_a, "num_embeddings"_a, "embedding_dim"_a, "weight"_a.none(), "borrowed"_a,
           "padding_idx"_a.none(), "plan"_a, "mode"_a, "max_norm"_a.none(), "norm_type"_a, "scale_grad_by_freq"_a,
           "sparse"_a)
      .def("forward", &forward, "ids"_a, "out"_a.none() = nb::none())
      .def("backward", &backward, "ids"_a, "dy"_a, "grad"_a.none() = nb::none(), "batch_counts"_a.none() = nb::none(),
           "out"_a.none() = nb::none())
      .def("backward_sparse", &backward_sparse, "ids"_a, "dy"_a, "rows"_a.none() = nb::none(),
           "values"_a.none() = nb::none(), "counts"_a.none() = nb::none(), "batch_counts"_a.none() = nb::none())
      .def("counts", &counts, "ids"_a)
      .def("weight", &weight_of<PyLayer>)
      .def("set_weight", &set_weight_of<PyLayer>, "weight"_a)
      .def("settings", [](PyLayer const& l) { return settings(l.layer->config()); })
      .def("backend", [](PyLayer const& l) { return std::string(l.layer->backend()); })
      .def("plan_for",
           [](PyLayer const& l, std::int64_t t) { return std::string(kembed::to_string(l.layer->plan_for(t))); })
      .def("save", &save, "path"_a, "created_by"_a)
      .def("step", &step_layer<PyLayer>, "optimizer"_a, "grad"_a)
      .def("step_sparse", &step_layer_sparse<PyLayer>, "optimizer"_a, "rows"_a, "values"_a)
      .def("backward_step", &backward_step, "ids"_a, "dy"_a, "optimizer"_a, "batch_counts"_a.none() = nb::none());
  m.def("load", &load, "path"_a);
  bind_optim(m);  // before the layers' step methods are called, and its type known to them
  bind_bags(m);
  m.def(
      "empty",
      [](std::vector<std::int64_t> const& shape) {
        if (shape.empty()) throw kembed::InvalidArgument("shape", "empty() wants at least one dimension");
        std::int64_t rows = 1;
        for (size_t i = 0; i + 1 < shape.size(); ++i) rows = kembed::checked_mul(rows, shape[i], "shape");
        if (rows < 0 || shape.back() < 0) throw kembed::InvalidArgument("shape", "empty(): a negative dimension");
        return to_array<float>(new_host_floats(rows, shape.back()), shape, dlpack_cpu);
      },
      "shape"_a);
  m.def("set_num_threads", &set_num_threads, "threads"_a);
  m.def("num_threads", &num_threads);
  m.def("backends", &backends);
  m.def("input_copies", &input_copies);
  m.def("build_info", [] {
    auto const b = kembed::build_info();
    nb::dict d;
    d["version"] = std::string(b.version);
    d["fast_math"] = b.fast_math;
    d["subnormals_kept"] = b.subnormals_kept;
    d["additions_unfused"] = b.additions_unfused;
    return d;
  });
}
