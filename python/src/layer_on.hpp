#pragma once
// python::Layer on one execution space: the view overloads of kembed::Embedding on
// unmanaged views of the caller's host arrays, so no call copies its inputs or outputs.
#include "layer.hpp"

#include <kembed/embedding.hpp>

namespace kembed::python {

template <class Space>
class LayerOn final : public Layer {
  static_assert(std::is_same<typename Space::memory_space, Kokkos::HostSpace>::value,
                "kembed::python::LayerOn: host backends only (a device layer needs device arrays)");
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged>;
  using ConstMatrix = Kokkos::View<float const**, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged>;
  using Counts = Kokkos::View<std::int64_t*, Kokkos::HostSpace, Unmanaged>;
  using ConstCounts = Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Unmanaged>;

 public:
  LayerOn(char const* name, std::int64_t v, std::int64_t d, float* weight, bool borrowed, Options const& options)
      : name_(name), layer_(make(v, d, weight, borrowed, options)) {}

  Config const& config() const override { return layer_.config(); }
  char const* backend() const override { return name_; }
  Plan plan_for(std::int64_t positions) const override { return layer_.plan_for(positions); }

  void forward(Ids const& ids, float* y) const override {
    with_ids(ids, [&](auto const& view) { layer_.forward(space_, view, Matrix(y, ids.size, d())); });
  }
  void backward(Ids const& ids, float const* dy, float const* carry, float* grad, std::int64_t* counts,
                std::int64_t const* batch_counts) const override {
    auto const v = layer_.num_embeddings();
    with_ids(ids, [&](auto const& view) {
      layer_.backward(space_, view, ConstMatrix(dy, ids.size, d()), Matrix(grad, v, d()),
                      carry ? ConstMatrix(carry, v, d()) : ConstMatrix(), counts ? Counts(counts, v) : Counts(),
                      batch_counts ? ConstCounts(batch_counts, v) : ConstCounts());
    });
  }
  SparseGradient backward_sparse(Ids const& ids, float const* dy, SparseGradient const* carry,
                                 std::int64_t const* batch_counts) const override {
    FloatsRef const g(dy, Shape{ids.size, d()});
    return ids.wide ? layer_.backward_sparse(IdsRef(static_cast<std::int64_t const*>(ids.data), Shape{ids.size}), g,
                                             carry, batch_counts)
                    : layer_.backward_sparse(IdsRef(static_cast<std::int32_t const*>(ids.data), Shape{ids.size}), g,
                                             carry, batch_counts);
  }
  void counts(Ids const& ids, std::int64_t* out) const override {
    auto const c = ids.wide ? layer_.counts(IdsRef(static_cast<std::int64_t const*>(ids.data), Shape{ids.size}))
                            : layer_.counts(IdsRef(static_cast<std::int32_t const*>(ids.data), Shape{ids.size}));
    std::copy(c.begin(), c.end(), out);
  }
  void weight(float* out) const override {
    Kokkos::deep_copy(space_, Matrix(out, layer_.num_embeddings(), d()), layer_.weight());
    space_.fence();
  }
  void set_weight(float const* w) override {
    layer_.set_weight(FloatsRef(w, Shape{layer_.num_embeddings(), d()}));
  }

 private:
  std::int64_t d() const { return layer_.embedding_dim(); }

  static Embedding<Space> make(std::int64_t v, std::int64_t d, float* weight, bool borrowed, Options const& options) {
    if (borrowed) return Embedding<Space>::over(Space(), Matrix(weight, v, d), options);
    if (!weight) return Embedding<Space>::backward_only(Space(), v, d, options);
    return Embedding<Space>(Space(), v, d, FloatsRef(weight, Shape{v, d}), options);
  }

  template <class F>
  void with_ids(Ids const& ids, F&& f) const {
    if (ids.wide)
      f(Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Unmanaged>(static_cast<std::int64_t const*>(ids.data),
                                                                        ids.size));
    else
      f(Kokkos::View<std::int32_t const*, Kokkos::HostSpace, Unmanaged>(static_cast<std::int32_t const*>(ids.data),
                                                                        ids.size));
  }

  char const* name_;
  Space space_;
  Embedding<Space> layer_;
};

template <class Space>
std::unique_ptr<Layer> make_layer_on(char const* name, std::int64_t v, std::int64_t d, float* weight, bool borrowed,
                                     Options const& options) {
  return std::make_unique<LayerOn<Space>>(name, v, d, weight, borrowed, options);
}

}  // namespace kembed::python
