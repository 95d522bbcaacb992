// kembed._kembed.Optimizer: kembed::TableOptimizer for Python (kembed.optim), and the
// layers' step, which applies it to their own table. Settings travel by torch's
// argument names (io::set_setting), the state by torch's state names.
#include "optim.hpp"
#include "arrays.hpp"
#include "bindings.hpp"

#include <kembed/core/error.hpp>
#include <kembed/io/optim_file.hpp>

#include <nanobind/stl/string.h>

#include <string>
#include <vector>

namespace kembed::python {
namespace {

using namespace nb::literals;

// torch's keyword arguments (a dict of numbers and bools) over torch's defaults.
OptimSettings settings_from(std::string const& optimizer, nb::dict const& given) {
  auto s = optim_defaults(parse_optimizer(optimizer));
  for (auto [key, value] : given) {
    auto const name = nb::cast<std::string>(key);
    double const x = nb::isinstance<nb::bool_>(value) ? (nb::cast<bool>(value) ? 1.0 : 0.0) : nb::cast<double>(value);
    io::set_setting(s, name, x);
  }
  return s;
}

PyOptim make(std::string const& backend, std::string const& optimizer, nb::dict const& given, std::int64_t v,
             std::int64_t d) {
  PyOptim out;
  out.optim = make_optim(backend, settings_from(optimizer, given), v, d);
  out.v = v, out.d = d;
  return out;
}

// The state as torch's state_dict names it: step, and each array (V, d) or (V,).
nb::dict state_of(PyOptim const& self) {
  auto st = self.optim->state();
  auto const w = state_widths(self.optim->settings(), self.d);
  auto const names = io::state_dataset_names(st.optimizer);
  nb::dict out;
  out["step"] = st.step;
  std::vector<float>* arrays[2] = {&st.first, &st.second};
  std::int64_t const widths[2] = {w.first, w.second};
  for (int k = 0; k < 2; ++k) {
    if (widths[k] == 0) continue;
    std::vector<std::int64_t> shape{self.v};
    if (widths[k] > 1) shape.push_back(widths[k]);
    out[names[std::size_t(k)]] = to_numpy(std::move(*arrays[k]), shape);
  }
  return out;
}

void set_state_of(PyOptim& self, nb::dict const& state) {
  OptimState st;
  st.optimizer = self.optim->settings().optimizer;
  st.num_embeddings = self.v, st.embedding_dim = self.d;
  if (!state.contains("step")) throw InvalidArgument("state", "state has no 'step'");
  st.step = nb::cast<std::int64_t>(state["step"]);
  auto const w = state_widths(self.optim->settings(), self.d);
  auto const names = io::state_dataset_names(st.optimizer);
  std::vector<float>* arrays[2] = {&st.first, &st.second};
  std::int64_t const widths[2] = {w.first, w.second};
  for (int k = 0; k < 2; ++k) {
    if (widths[k] == 0) continue;
    char const* name = names[std::size_t(k)];
    if (!state.contains(name)) throw InvalidArgument("state", std::string("state has no '") + name + "'");
    auto const in = take_floats(nb::cast<AnyArray>(state[name]), name);
    arrays[k]->assign(in.data, in.data + std::size_t(self.v * widths[k]));
    std::int64_t n = 1;
    for (auto x : in.shape) n *= x;
    if (n != self.v * widths[k])
      throw InvalidArgument("state", std::string("state['") + name + "'] holds " + std::to_string(n) +
                                         " values, want " + std::to_string(self.v * widths[k]));
  }
  nb::gil_scoped_release release;
  self.optim->set_state(st);
}

}  // namespace

void bind_optim(nb::module_& m) {
  nb::class_<PyOptim>(m, "Optimizer")
      .def(nb::new_(&make), "backend"_a, "optimizer"_a, "settings"_a, "num_embeddings"_a, "embedding_dim"_a)
      .def("settings_json", [](PyOptim const& o) { return io::settings_json(o.optim->settings()); })
      .def("backend", [](PyOptim const& o) { return std::string(o.optim->backend()); })
      .def("state", &state_of)
      .def("set_state", &set_state_of, "state"_a)
      .def(
          "set_settings",
          [](PyOptim& o, nb::dict const& given) {
            o.optim->set_settings(settings_from(std::string(to_string(o.optim->settings().optimizer)), given));
          },
          "settings"_a);
}

}  // namespace kembed::python
