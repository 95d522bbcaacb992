#pragma once
// The Python module's view of kembed::Embedding: one interface over the layer on each
// host backend the build has, so that module.cpp binds it once. Every array is the
// caller's memory (numpy's, torch's); nothing here copies what a kernel can read.
#include <kembed/core/bags.hpp>
#include <kembed/core/options.hpp>
#include <kembed/core/sparse.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kembed::python {

class Optim;  // optim.hpp

// Ids as the kernels take them: int32 or int64, C order, `size` positions.
struct Ids {
  void const* data = nullptr;
  bool wide = true;  // int64; else int32
  std::int64_t size = 0;
};

// A new buffer in some memory, not written; `owner` keeps it.
struct Buffer {
  void* data = nullptr;
  std::shared_ptr<void> owner;
};

// DLPack's device types for where a layer's arrays live.
inline constexpr int dlpack_cpu = 1, dlpack_cuda = 2;

// Where a layer computes: its backend and memory, which the arrays it takes must share.
class Place {
 public:
  virtual ~Place() = default;
  virtual char const* backend() const = 0;
  // The layer's memory: dlpack_cpu, or the device's (every pointer a layer takes is
  // there, except weight() and set_weight(), which take host memory).
  virtual int device_type() const = 0;
  virtual Buffer new_buffer(std::size_t bytes) const = 0;                   // in the layer's memory
  virtual void upload(void* to, void const* host, std::size_t bytes) const = 0;  // host -> layer's memory
  virtual void download(void* host, void const* from, std::size_t bytes) const = 0;
};

class Layer : public Place {
 public:
  virtual Config const& config() const = 0;
  virtual Plan plan_for(std::int64_t positions) const = 0;
  // y: size x d. With max_norm this writes the table (the layer's, or the borrowed one).
  virtual void forward(Ids const& ids, float* y) const = 0;
  // grad: V x d, all written. carry, counts and batch_counts may be null.
  virtual void backward(Ids const& ids, float const* dy, float const* carry, float* grad, std::int64_t* counts,
                        std::int64_t const* batch_counts) const = 0;
  virtual SparseGradient backward_sparse(Ids const& ids, float const* dy, SparseGradient const* carry,
                                         std::int64_t const* batch_counts) const = 0;
  virtual void counts(Ids const& ids, std::int64_t* out) const = 0;  // V entries
  virtual void weight(float* out) const = 0;                         // the table, V x d
  virtual void set_weight(float const* weight) = 0;                  // V x d; on error the old table stays
  // One step of `optimizer` (on this layer's backend) on the layer's own table: a
  // dense gradient (V x d, the layer's memory) or a row-sparse one (host).
  virtual void step(Optim& optimizer, float const* grad) = 0;
  virtual void step(Optim& optimizer, SparseGradient const& grad) = 0;
  // backward_sparse and step in one pass (Embedding::backward_step); batch_counts may be null.
  virtual void backward_step(Ids const& ids, float const* dy, Optim& optimizer, std::int64_t const* batch_counts) = 0;
};

// A bag call: 1-D ids in the layer's memory, where each bag starts and ends (B + 1
// host values from make_bags: the checked offsets) and per-sample weights (T values in
// the layer's memory, or null).
struct BagCall {
  Ids ids;
  std::vector<std::int64_t> const* bounds = nullptr;
  float const* weights = nullptr;
  std::int64_t* argmax = nullptr;  // max's (B, d) in the layer's memory: forward writes it, a backward reads it
  std::int64_t count() const { return std::int64_t(bounds->size()) - 1; }
};

// kembed::EmbeddingBag on one backend: the same calls as Layer's, per bag.
class BagLayer : public Place {
 public:
  virtual BagConfig const& config() const = 0;
  virtual void forward(BagCall const& call, float* y) const = 0;  // y: B x d
  virtual void backward(BagCall const& call, float const* dy, float const* carry, float* grad,
                        std::int64_t const* batch_counts) const = 0;
  virtual SparseGradient backward_sparse(BagCall const& call, float const* dy, SparseGradient const* carry,
                                         std::int64_t const* batch_counts) const = 0;
  virtual void weights_backward(BagCall const& call, float const* dy, float* out) const = 0;  // T values
  virtual void weight(float* out) const = 0;
  virtual void set_weight(float const* weight) = 0;
  virtual void step(Optim& optimizer, float const* grad) = 0;  // as Layer's
  virtual void step(Optim& optimizer, SparseGradient const& grad) = 0;
};

// The layer on one execution space; layer_on.hpp defines it, and each backend's
// translation unit instantiates it (layer_serial.cpp, layer_openmp.cpp, layer_cuda.cpp).
template <class Space>
std::unique_ptr<Layer> make_layer_on(char const* name, std::int64_t v, std::int64_t d, float* weight, bool borrowed,
                                     Options const& options);

template <class Space>
std::unique_ptr<BagLayer> make_bag_layer_on(char const* name, std::int64_t v, std::int64_t d, float* weight,
                                            bool borrowed, BagOptions const& options);

// A layer on `backend` ("serial", "openmp", "cuda"; "default": the build's default host space).
// Without `borrowed` it copies and checks `weight` (null: a layer for the backward only);
// with, it works on the caller's table in place (kembed.torch's Parameter).
std::unique_ptr<Layer> make_layer(std::string const& backend, std::int64_t v, std::int64_t d, float* weight,
                                  bool borrowed, Options const& options);
std::unique_ptr<BagLayer> make_bag_layer(std::string const& backend, std::int64_t v, std::int64_t d, float* weight,
                                         bool borrowed, BagOptions const& options);

// A new host float buffer, not written, with huge pages advised (as kembed's own
// buffers: docs/PERFORMANCE.md).
Buffer new_host_floats(std::int64_t rows, std::int64_t cols);

// Kokkos starts on the first layer, with set_num_threads' count (or KEMBED_NUM_THREADS,
// else the OpenMP runtime's); after that the count is fixed for the process.
void start_kokkos();
int num_threads();
void set_num_threads(int threads);
std::vector<std::string> backends();

}  // namespace kembed::python
