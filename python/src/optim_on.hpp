#pragma once
// python::Optim on one execution space: a kembed::TableOptimizer that a layer on the
// same space steps its table with (LayerOn::step finds it by dynamic_cast).
#include "optim.hpp"

#include <kembed/core/error.hpp>
#include <kembed/optim.hpp>

#include <memory>
#include <string>

namespace kembed::python {

template <class Space>
class OptimOn final : public Optim {
 public:
  OptimOn(char const* name, OptimSettings const& settings, std::int64_t v, std::int64_t d)
      : name_(name), impl(settings, v, d) {}
  char const* backend() const override { return name_; }
  OptimSettings const& settings() const override { return impl.settings(); }
  OptimState state() const override { return impl.state(); }
  void set_state(OptimState const& st) override { impl.set_state(st); }
  void set_settings(OptimSettings const& s) override { impl.set_settings(s); }

 private:
  char const* name_;

 public:
  TableOptimizer<Space> impl;
};

// The layer's optimizer, or InvalidArgument naming both backends.
template <class Space>
TableOptimizer<Space>& optim_on(Optim& o, char const* layer_backend) {
  auto* on = dynamic_cast<OptimOn<Space>*>(&o);
  if (!on)
    throw InvalidArgument("optimizer", std::string("the optimizer runs on backend ") + o.backend() + ", the layer on " +
                                           layer_backend + "; make them on one backend");
  return on->impl;
}

template <class Space>
std::unique_ptr<Optim> make_optim_on(char const* name, OptimSettings const& settings, std::int64_t v, std::int64_t d) {
  return std::make_unique<OptimOn<Space>>(name, settings, v, d);
}

}  // namespace kembed::python
