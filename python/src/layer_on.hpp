#pragma once
// python::Layer on one execution space: the view overloads of kembed::Embedding on
// unmanaged views of the caller's arrays, so no call copies its inputs or outputs.
// On a device the arrays are device memory (DLPack); counts and backward_sparse go
// through the host overloads there (their ids and dy are copied to the host first).
#include "layer.hpp"
#include "optim_on.hpp"

#include <kembed/detail/memory.hpp>
#include <kembed/embedding.hpp>

#include <algorithm>
#include <type_traits>
#include <vector>

namespace kembed::python {

// Place's calls on one execution space, for a layer interface `Base`.
template <class Space, class Base>
class PlaceOn : public Base {
 protected:
  using Memory = typename Space::memory_space;
  static constexpr bool on_host = std::is_same<Memory, Kokkos::HostSpace>::value;
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Memory, Unmanaged>;
  using ConstMatrix = Kokkos::View<float const**, Kokkos::LayoutRight, Memory, Unmanaged>;
  using Counts = Kokkos::View<std::int64_t*, Memory, Unmanaged>;
  using ConstCounts = Kokkos::View<std::int64_t const*, Memory, Unmanaged>;
  using Bytes = Kokkos::View<char*, Memory, Unmanaged>;
  using HostBytes = Kokkos::View<char*, Kokkos::HostSpace, Unmanaged>;

  explicit PlaceOn(char const* name) : name_(name) {}

 public:
  char const* backend() const override { return name_; }
  int device_type() const override { return on_host ? dlpack_cpu : dlpack_cuda; }

  Buffer new_buffer(std::size_t bytes) const override {
    Kokkos::View<char*, Memory> b(Kokkos::view_alloc(space_, Kokkos::WithoutInitializing, "kembed::python::buffer"),
                                  bytes);
    if constexpr (on_host) detail::advise_huge_pages(b.data(), bytes);
    Buffer out;
    out.data = b.data();
    out.owner = std::make_shared<decltype(b)>(std::move(b));
    return out;
  }
  void upload(void* to, void const* host, std::size_t bytes) const override {
    Kokkos::deep_copy(space_, Bytes(static_cast<char*>(to), bytes),
                      HostBytes(static_cast<char*>(const_cast<void*>(host)), bytes));
    space_.fence();
  }
  void download(void* host, void const* from, std::size_t bytes) const override {
    Kokkos::deep_copy(space_, HostBytes(static_cast<char*>(host), bytes),
                      Bytes(static_cast<char*>(const_cast<void*>(from)), bytes));
    space_.fence();
  }

 protected:
  char const* name_;
  Space space_;
};

template <class Space>
class LayerOn final : public PlaceOn<Space, Layer> {
  using Base = PlaceOn<Space, Layer>;
  using Base::on_host;
  using Base::space_;
  using typename Base::ConstCounts;
  using typename Base::ConstMatrix;
  using typename Base::Counts;
  using typename Base::Matrix;
  using typename Base::Memory;
  using typename Base::Unmanaged;

 public:
  LayerOn(char const* name, std::int64_t v, std::int64_t d, float* weight, bool borrowed, Options const& options)
      : Base(name), layer_(make(v, d, weight, borrowed, options)) {}

  Config const& config() const override { return layer_.config(); }
  Plan plan_for(std::int64_t positions) const override { return layer_.plan_for(positions); }

  void forward(Ids const& ids, float* y) const override {
    with_ids(ids, [&](auto const& view) { layer_.forward(space_, view, Matrix(y, ids.size, d())); });
    space_.fence();
  }
  void backward(Ids const& ids, float const* dy, float const* carry, float* grad, std::int64_t* counts,
                std::int64_t const* batch_counts) const override {
    auto const v = layer_.num_embeddings();
    with_ids(ids, [&](auto const& view) {
      layer_.backward(space_, view, ConstMatrix(dy, ids.size, d()), Matrix(grad, v, d()),
                      carry ? ConstMatrix(carry, v, d()) : ConstMatrix(), counts ? Counts(counts, v) : Counts(),
                      batch_counts ? ConstCounts(batch_counts, v) : ConstCounts());
    });
    space_.fence();
  }
  SparseGradient backward_sparse(Ids const& ids, float const* dy, SparseGradient const* carry,
                                 std::int64_t const* batch_counts) const override {
    HostCopy const h(*this, ids, dy, batch_counts, layer_.num_embeddings(), d());
    FloatsRef const g(h.dy, Shape{ids.size, d()});
    return h.wide ? layer_.backward_sparse(IdsRef(h.ids64, Shape{ids.size}), g, carry, h.batch_counts)
                  : layer_.backward_sparse(IdsRef(h.ids32, Shape{ids.size}), g, carry, h.batch_counts);
  }
  void counts(Ids const& ids, std::int64_t* out) const override {
    HostCopy const h(*this, ids, nullptr, nullptr, layer_.num_embeddings(), d());
    auto const c = h.wide ? layer_.counts(IdsRef(h.ids64, Shape{ids.size}))
                          : layer_.counts(IdsRef(h.ids32, Shape{ids.size}));
    if constexpr (on_host)
      std::copy(c.begin(), c.end(), out);
    else
      this->upload(out, c.data(), c.size() * sizeof(std::int64_t));
  }
  void weight(float* out) const override {
    Kokkos::deep_copy(space_, Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged>(
                                  out, layer_.num_embeddings(), d()),
                      layer_.weight());
    space_.fence();
  }
  void set_weight(float const* w) override { layer_.set_weight(FloatsRef(w, Shape{layer_.num_embeddings(), d()})); }
  void step(Optim& optimizer, float const* grad) override {
    layer_.step(space_, optim_on<Space>(optimizer, this->name_), ConstMatrix(grad, layer_.num_embeddings(), d()));
    space_.fence();
  }
  void step(Optim& optimizer, SparseGradient const& grad) override {
    layer_.step(optim_on<Space>(optimizer, this->name_), grad);
  }
  void backward_step(Ids const& ids, float const* dy, Optim& optimizer, std::int64_t const* batch_counts) override {
    auto& o = optim_on<Space>(optimizer, this->name_);
    HostCopy const h(*this, ids, dy, batch_counts, layer_.num_embeddings(), d());
    FloatsRef const g(h.dy, Shape{ids.size, d()});
    if (h.wide)
      layer_.backward_step(IdsRef(h.ids64, Shape{ids.size}), g, o, h.batch_counts);
    else
      layer_.backward_step(IdsRef(h.ids32, Shape{ids.size}), g, o, h.batch_counts);
  }

 private:
  std::int64_t d() const { return layer_.embedding_dim(); }

  // The host overloads' inputs: the caller's arrays on the host, copies of them from a device.
  struct HostCopy {
    bool wide = true;
    std::int64_t const* ids64 = nullptr;
    std::int32_t const* ids32 = nullptr;
    float const* dy = nullptr;
    std::int64_t const* batch_counts = nullptr;
    std::vector<char> ids_bytes, dy_bytes, batch_bytes;

    HostCopy(LayerOn const& l, Ids const& ids, float const* dy_in, std::int64_t const* batch, std::int64_t v,
             std::int64_t d)
        : wide(ids.wide) {
      void const* i = ids.data;
      dy = dy_in;
      batch_counts = batch;
      if constexpr (!on_host) {
        i = fetch(l, ids_bytes, ids.data, std::size_t(ids.size) * (ids.wide ? 8 : 4));
        if (dy_in) dy = static_cast<float const*>(fetch(l, dy_bytes, dy_in, std::size_t(ids.size * d) * 4));
        if (batch)
          batch_counts = static_cast<std::int64_t const*>(fetch(l, batch_bytes, batch, std::size_t(v) * 8));
      }
      ids64 = static_cast<std::int64_t const*>(i);
      ids32 = static_cast<std::int32_t const*>(i);
    }
    static void const* fetch(LayerOn const& l, std::vector<char>& to, void const* from, std::size_t bytes) {
      to.resize(bytes);
      l.download(to.data(), from, bytes);
      return to.data();
    }
  };

  static Embedding<Space> make(std::int64_t v, std::int64_t d, float* weight, bool borrowed, Options const& options) {
    if (borrowed) return Embedding<Space>::over(Space(), Matrix(weight, v, d), options);
    if (!weight) return Embedding<Space>::backward_only(Space(), v, d, options);
    return Embedding<Space>(Space(), v, d, FloatsRef(weight, Shape{v, d}), options);  // a host table, copied
  }

  template <class F>
  void with_ids(Ids const& ids, F&& f) const {
    if (ids.wide)
      f(Kokkos::View<std::int64_t const*, Memory, Unmanaged>(static_cast<std::int64_t const*>(ids.data), ids.size));
    else
      f(Kokkos::View<std::int32_t const*, Memory, Unmanaged>(static_cast<std::int32_t const*>(ids.data), ids.size));
  }

  Embedding<Space> layer_;
};

template <class Space>
std::unique_ptr<Layer> make_layer_on(char const* name, std::int64_t v, std::int64_t d, float* weight, bool borrowed,
                                     Options const& options) {
  return std::make_unique<LayerOn<Space>>(name, v, d, weight, borrowed, options);
}

}  // namespace kembed::python
