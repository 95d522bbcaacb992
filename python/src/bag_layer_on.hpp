#pragma once
// python::BagLayer on one execution space: kembed::EmbeddingBag's view overloads on
// unmanaged views of the caller's arrays (ids, dy, weights, results); the bag bounds,
// B + 1 values already checked on the host, are copied in.
#include "layer_on.hpp"

#include <kembed/embedding_bag.hpp>

namespace kembed::python {

// int32 ids as a new int64 view (a free function: nvcc takes no device lambda in a
// private member function).
template <class Space, class Narrow>
Kokkos::View<std::int64_t*, typename Space::memory_space> widened(Space const& space, Narrow const& narrow) {
  Kokkos::View<std::int64_t*, typename Space::memory_space> wide(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "kembed::python::ids64"), narrow.extent(0));
  Kokkos::parallel_for(
      "kembed::python::widen_ids", Kokkos::RangePolicy<Space>(space, 0, narrow.extent(0)),
      KOKKOS_LAMBDA(std::int64_t p) { wide(p) = narrow(p); });
  return wide;
}

template <class Space>
class BagLayerOn final : public PlaceOn<Space, BagLayer> {
  using Base = PlaceOn<Space, BagLayer>;
  using Base::space_;
  using typename Base::ConstCounts;
  using typename Base::ConstMatrix;
  using typename Base::Matrix;
  using typename Base::Memory;
  using typename Base::Unmanaged;
  using Layer = EmbeddingBag<Space>;
  using Floats = Kokkos::View<float const*, Memory, Unmanaged>;

 public:
  BagLayerOn(char const* name, std::int64_t v, std::int64_t d, float* weight, bool borrowed, BagOptions const& options)
      : Base(name), layer_(make(v, d, weight, borrowed, options)) {}

  BagConfig const& config() const override { return layer_.config(); }

  void forward(BagCall const& call, float* y) const override {
    layer_.forward(space_, ids_of(call), offsets_of(call), Matrix(y, call.count(), d()), weights_of(call),
                   argmax_of(call));
    space_.fence();
  }
  void backward(BagCall const& call, float const* dy, float const* carry, float* grad,
                std::int64_t const* batch_counts) const override {
    auto const v = layer_.num_embeddings();
    layer_.backward(space_, ids_of(call), offsets_of(call), ConstMatrix(dy, call.count(), d()), Matrix(grad, v, d()),
                    carry ? ConstMatrix(carry, v, d()) : ConstMatrix(), {}, weights_of(call), counts_of(batch_counts),
                    argmax_of(call));
    space_.fence();
  }
  SparseGradient backward_sparse(BagCall const& call, float const* dy, SparseGradient const* carry,
                                 std::int64_t const* batch_counts) const override {
    auto const v = layer_.num_embeddings();
    if (carry) check_sparse("grad", *carry, v, d());
    auto const from = carry ? Layer::embedding_type::upload_sparse(space_, *carry) : typename Layer::sparse_type{};
    auto const g = layer_.backward_sparse(space_, ids_of(call), offsets_of(call), ConstMatrix(dy, call.count(), d()),
                                          from, weights_of(call), counts_of(batch_counts), argmax_of(call));
    return Layer::embedding_type::to_host(space_, g, v);
  }
  void weights_backward(BagCall const& call, float const* dy, float* out) const override {
    layer_.per_sample_weights_backward(space_, ids_of(call), offsets_of(call), ConstMatrix(dy, call.count(), d()),
                                       Kokkos::View<float*, Memory, Unmanaged>(out, call.ids.size));
    space_.fence();
  }
  void weight(float* out) const override {
    Kokkos::deep_copy(
        space_,
        Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged>(out, layer_.num_embeddings(), d()),
        layer_.embedding().weight());
    space_.fence();
  }
  void set_weight(float const* w) override { layer_.set_weight(FloatsRef(w, Shape{layer_.num_embeddings(), d()})); }
  void step(Optim& optimizer, float const* grad) override {
    layer_.step(space_, optim_on<Space>(optimizer, this->name_),
                typename EmbeddingBag<Space>::const_matrix_type(ConstMatrix(grad, layer_.num_embeddings(), d())));
    space_.fence();
  }
  void step(Optim& optimizer, SparseGradient const& grad) override {
    layer_.step(optim_on<Space>(optimizer, this->name_), grad);
  }

 private:
  std::int64_t d() const { return layer_.embedding_dim(); }

  // The ids as int64 in the layer's memory: int32 ids widened into a new view, as the
  // bag kernels are compiled for one id type.
  typename Layer::ids64_type ids_of(BagCall const& call) const {
    auto const n = call.ids.size;
    if (call.ids.wide)
      return Kokkos::View<std::int64_t const*, Memory, Unmanaged>(static_cast<std::int64_t const*>(call.ids.data), n);
    return widened(space_, Kokkos::View<std::int32_t const*, Memory, Unmanaged>(
                               static_cast<std::int32_t const*>(call.ids.data), n));
  }
  // torch's offsets, as the layer's include_last_offset wants them, in its memory.
  typename Layer::offsets_type offsets_of(BagCall const& call) const {
    auto const n = call.count() + (layer_.config().include_last_offset ? 1 : 0);
    Kokkos::View<std::int64_t const*, Kokkos::HostSpace, Unmanaged> const host(call.bounds->data(), n);
    return Kokkos::create_mirror_view_and_copy(Memory(), host);
  }
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Memory, Unmanaged> argmax_of(BagCall const& call) const {
    return call.argmax
               ? Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Memory, Unmanaged>(call.argmax, call.count(), d())
               : Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Memory, Unmanaged>();
  }
  typename Layer::weights_type weights_of(BagCall const& call) const {
    return call.weights ? Floats(call.weights, call.ids.size) : Floats();
  }
  static ConstCounts counts_of(std::int64_t const* batch_counts, std::int64_t v) {
    return batch_counts ? ConstCounts(batch_counts, v) : ConstCounts();
  }
  ConstCounts counts_of(std::int64_t const* batch_counts) const {
    return counts_of(batch_counts, layer_.num_embeddings());
  }

  static Layer make(std::int64_t v, std::int64_t d, float* weight, bool borrowed, BagOptions const& options) {
    if (borrowed) return Layer::over(Space(), Matrix(weight, v, d), options);
    if (!weight) return Layer::backward_only(Space(), v, d, options);
    return Layer(Space(), v, d, FloatsRef(weight, Shape{v, d}), options);  // a host table, copied
  }

  Layer layer_;
};

template <class Space>
std::unique_ptr<BagLayer> make_bag_layer_on(char const* name, std::int64_t v, std::int64_t d, float* weight,
                                            bool borrowed, BagOptions const& options) {
  return std::make_unique<BagLayerOn<Space>>(name, v, d, weight, borrowed, options);
}

}  // namespace kembed::python
