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
  std::vector<std::int64_t> owned;  // the copy, when one was needed
};
struct FloatsIn {
  float const* data = nullptr;
  std::vector<std::int64_t> shape;
  std::vector<float> owned;
};

// ids of any integer dtype and shape; `v` names the range for ids past int64.
IdsIn take_ids(AnyArray const& a, std::int64_t v);
// float32 of any shape; `name` is the argument in messages.
FloatsIn take_floats(AnyArray const& a, char const* name);
// A 1-D int64-valued array (counts, sparse rows) of any integer dtype.
std::vector<std::int64_t> take_int64s(AnyArray const& a, char const* name);
// An `out=` array: writable, host, C-order float32 of exactly `shape`; else TypeError
// or ValueError (it is never converted: the result would go to a copy).
float* take_out(nb::ndarray<> const& a, std::vector<std::int64_t> const& shape, char const* name);
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

// A numpy array over a Kokkos host buffer: handed over, not copied.
inline nb::object to_numpy(HostFloats&& buffer, std::vector<std::int64_t> const& shape) {
  auto* owner = new std::shared_ptr<void>(std::move(buffer.owner));
  nb::capsule keep(owner, [](void* p) noexcept { delete static_cast<std::shared_ptr<void>*>(p); });
  std::vector<size_t> dims(shape.begin(), shape.end());
  return nb::cast(nb::ndarray<nb::numpy, float>(buffer.data, dims.size(), dims.data(), keep));
}

}  // namespace kembed::python
