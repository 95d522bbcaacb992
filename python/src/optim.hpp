#pragma once
// The Python module's view of kembed::TableOptimizer: one interface over the optimizer
// on each backend the build has (as layer.hpp's Layer), so that module.cpp binds it
// once. A layer steps its own table with it (Layer::step).
#include <kembed/core/optim.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace kembed::python {

class Optim {
 public:
  virtual ~Optim() = default;
  virtual char const* backend() const = 0;
  virtual OptimSettings const& settings() const = 0;
  virtual OptimState state() const = 0;              // a host copy
  virtual void set_state(OptimState const& st) = 0;  // checked; nothing changes on a refusal
  virtual void set_settings(OptimSettings const& s) = 0;  // the state kept (TableOptimizer::set_settings)
};

// The Optimizer Python holds, for a (v, d) table.
struct PyOptim {
  std::unique_ptr<Optim> optim;
  std::int64_t v = 0, d = 0;
};

// The optimizer on one execution space (optim_on.hpp; each backend's translation unit
// instantiates it, as make_layer_on).
template <class Space>
std::unique_ptr<Optim> make_optim_on(char const* name, OptimSettings const& settings, std::int64_t v, std::int64_t d);

// The optimizer on `backend` ("serial", "openmp", "cuda"; "default": the build's
// default host space), for a (V, d) table; checks the settings.
std::unique_ptr<Optim> make_optim(std::string const& backend, OptimSettings const& settings, std::int64_t v,
                                  std::int64_t d);

}  // namespace kembed::python
