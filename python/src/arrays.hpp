#pragma once
// Arrays from Python (numpy, torch, anything with DLPack or the buffer protocol)
// taken as kembed's kernels want them: read in place when the dtype and layout
// already are (C order, float32, int32/int64 ids), else copied once and counted, so
// a test can see which inputs were copied. A wrong dtype is refused, never converted.
#include "layer.hpp"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <vector>

namespace kembed::python {

namespace nb = nanobind;
using AnyArray = nb::ndarray<nb::ro>;  // no constraints: nanobind converts nothing itself

struct IdsIn {
  Ids ids;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> owned;  // the host copy, when one was needed
  Buffer uploaded;                  // the device copy of host ids, for a device layer
};
struct FloatsIn {
  float const* data = nullptr;
  std::vector<std::int64_t> shape;
  std::vector<float> owned;
  Buffer uploaded;
};

// Inputs go where `layer` computes: host arrays are read in place by a host layer and
// uploaded (once, counted) for a device layer; device arrays are read in place by a
// layer on their device and refused by name anywhere else. Without a layer: host only.
// ids of any integer dtype and shape on the host (C-order int32/int64 on a device);
// `v` names the range for ids past int64.
IdsIn take_ids(AnyArray const& a, std::int64_t v, Place const& layer);
// float32 of any shape; `name` is the argument in messages.
FloatsIn take_floats(AnyArray const& a, char const* name, Place const* layer = nullptr);
// A borrowed table (kembed.torch's Parameter): C-order float32, host or device, in place.
float* take_borrowed(AnyArray const& a, std::vector<std::int64_t>& shape);
// A 1-D int64-valued host array (counts, sparse rows) of any integer dtype.
std::vector<std::int64_t> take_int64s(AnyArray const& a, char const* name);
// An `out=` array: writable, C-order float32 of exactly `shape`, in the layer's memory;
// else TypeError or ValueError (never converted: the result would go to a copy).
float* take_out(nb::ndarray<> const& a, std::vector<std::int64_t> const& shape, char const* name, Place const& layer);
// An int64 array used in place (max's argmax: written by a forward, read by a
// backward): C order, exactly `shape`, in the layer's memory.
std::int64_t* take_int64_in_place(nb::ndarray<> const& a, std::vector<std::int64_t> const& shape, char const* name,
                                  Place const& layer);
// The layer's device type, if the array is somewhere else: TypeError naming both.
void require_place(AnyArray const& a, char const* name, Place const* layer);
// How many inputs were copied since the module loaded.
long input_copies();

// A new C-order numpy array that owns its memory: the vector's buffer, not a copy.
template <class T>
nb::object to_numpy(std::vector<T>&& values, std::vector<std::int64_t> const& shape) {
  auto* owned = new std::vector<T>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  std::vector<size_t> dims(shape.begin(), shape.end());
  return nb::cast(nb::ndarray<nb::numpy, T>(owned->data(), dims.size(), dims.data(), owner));
}

// The result array over a buffer: handed over, not copied. On the host a numpy array;
// on a device an array that DLPack consumers take (torch.from_dlpack, cupy.from_dlpack).
template <class T>
nb::object to_array(Buffer&& buffer, std::vector<std::int64_t> const& shape, int device_type) {
  auto* owner = new std::shared_ptr<void>(std::move(buffer.owner));
  nb::capsule keep(owner, [](void* p) noexcept { delete static_cast<std::shared_ptr<void>*>(p); });
  std::vector<size_t> dims(shape.begin(), shape.end());
  if (device_type == dlpack_cpu)
    return nb::cast(nb::ndarray<nb::numpy, T>(buffer.data, dims.size(), dims.data(), keep));
  return nb::cast(nb::ndarray<T>(buffer.data, dims.size(), dims.data(), keep, nullptr, nb::dtype<T>(), device_type, 0));
}

}  // namespace kembed::python
