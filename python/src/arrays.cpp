#include "arrays.hpp"

#include <kembed/core/error.hpp>
#include <kembed/core/validate.hpp>

#include <atomic>
#include <limits>
#include <string>

namespace kembed::python {
namespace {

std::atomic<long> copies{0};
using Code = nb::dlpack::dtype_code;

std::string dtype_name(nb::dlpack::dtype t) {
  switch (static_cast<Code>(t.code)) {
    case Code::Int: return "int" + std::to_string(t.bits);
    case Code::UInt: return "uint" + std::to_string(t.bits);
    case Code::Float: return "float" + std::to_string(t.bits);
    case Code::Bfloat: return "bfloat" + std::to_string(t.bits);
    case Code::Bool: return "bool";
    case Code::Complex: return "complex" + std::to_string(t.bits);
    default: return "an unusual dtype (DLPack code " + std::to_string(t.code) + ")";
  }
}

bool on_cpu(AnyArray const& a) {
  return a.device_type() == nb::device::cpu::value || a.device_type() == nb::device::cuda_host::value;
}

std::string device_name(int type) {
  return type == nb::device::cuda::value           ? "cuda"
         : type == nb::device::rocm::value         ? "rocm"
         : type == nb::device::cuda_managed::value ? "cuda (managed)"
                                                   : "device type " + std::to_string(type);
}

std::string host_backends() {
  std::string names;
  bool device = false;
  for (auto const& n : backends()) {
    if (n == "serial" || n == "openmp")
      names += (names.empty() ? "" : ", ") + n;
    else
      device = true;
  }
  return device ? "" : names;  // empty: the build has a device backend
}

std::vector<std::int64_t> shape_of(AnyArray const& a) {
  std::vector<std::int64_t> s(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) s[i] = static_cast<std::int64_t>(a.shape(i));
  return s;
}

bool c_contiguous(AnyArray const& a) {
  std::int64_t expected = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected) return false;
    expected *= static_cast<std::int64_t>(a.shape(i));
  }
  return true;
}

// Calls f(element, flat C-order index) for every element, at any strides.
template <class T, class F>
void visit(AnyArray const& a, F&& f) {
  auto const n = static_cast<std::int64_t>(a.size());
  auto const* base = static_cast<T const*>(a.data());
  std::vector<std::int64_t> index(a.ndim(), 0);
  for (std::int64_t flat = 0; flat < n; ++flat) {
    std::int64_t offset = 0;
    for (size_t i = 0; i < a.ndim(); ++i) offset += index[i] * a.stride(i);
    f(base[offset], flat);
    for (size_t i = a.ndim(); i-- > 0;) {
      if (++index[i] < static_cast<std::int64_t>(a.shape(i))) break;
      index[i] = 0;
    }
  }
}

// Any integer dtype widened to int64; a uint64 past int64 is out of range by position.
std::vector<std::int64_t> widen(AnyArray const& a, std::int64_t v, char const* name) {
  std::vector<std::int64_t> out(a.size());
  auto put = [&](auto x, std::int64_t p) { out[p] = static_cast<std::int64_t>(x); };
  auto const t = a.dtype();
  bool const is_signed = t.code == static_cast<std::uint8_t>(Code::Int);
  switch (t.bits) {
    case 8: is_signed ? visit<std::int8_t>(a, put) : visit<std::uint8_t>(a, put); break;
    case 16: is_signed ? visit<std::int16_t>(a, put) : visit<std::uint16_t>(a, put); break;
    case 32: is_signed ? visit<std::int32_t>(a, put) : visit<std::uint32_t>(a, put); break;
    case 64:
      if (is_signed) {
        visit<std::int64_t>(a, put);
      } else {
        visit<std::uint64_t>(a, [&](std::uint64_t x, std::int64_t p) {
          if (x > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            throw IdOutOfRange(name, std::string(name) + " holds " + std::to_string(x) + " at position " +
                                         std::to_string(p) + ", outside [0, " + std::to_string(v) +
                                         ") (num_embeddings = " + std::to_string(v) + "); ids are never clamped",
                               p, -1);
          out[p] = static_cast<std::int64_t>(x);
        });
      }
      break;
    default: throw nb::type_error(("kembed: " + std::string(name) + " has dtype " + dtype_name(t)).c_str());
  }
  return out;
}

void require_integers(AnyArray const& a, char const* name) {
  auto const t = a.dtype();
  bool const integer = (t.code == static_cast<std::uint8_t>(Code::Int) || t.code == static_cast<std::uint8_t>(Code::UInt)) &&
                       t.lanes == 1;
  if (integer) return;
  std::string const why = t.code == static_cast<std::uint8_t>(Code::Float) || t.code == static_cast<std::uint8_t>(Code::Bfloat)
                              ? "; an id is a row number, so a float id is refused rather than truncated"
                              : "";
  throw nb::type_error(
      ("kembed: " + std::string(name) + " must hold integers, got dtype " + dtype_name(t) + why).c_str());
}

}  // namespace

void require_place(AnyArray const& a, char const* name, Place const* layer) {
  if (on_cpu(a) || (layer && a.device_type() == layer->device_type())) return;
  std::string const where = device_name(a.device_type()) + ":" + std::to_string(a.device_id());
  std::string const host_only = host_backends();
  std::string const why =
      !host_only.empty() ? "this kembed module has host backends only (" + host_only + "); move it to the CPU first "
                                                                                        "(tensor.cpu())"
      : layer            ? std::string("this layer runs on ") + layer->backend() +
                    "; make the layer on that device's backend, or move the array"
                         : std::string("it must be a host array (numpy, tensor.cpu())");
  throw nb::type_error(("kembed: " + std::string(name) + " is on " + where + ", but " + why).c_str());
}

namespace {

bool is_int(nb::dlpack::dtype t, int bits) {
  return t.code == static_cast<std::uint8_t>(Code::Int) && t.bits == bits && t.lanes == 1;
}
bool is_float32(nb::dlpack::dtype t) {
  return t.code == static_cast<std::uint8_t>(Code::Float) && t.bits == 32 && t.lanes == 1;
}

// A device array must already be what the kernels read: nothing converts it there.
void require_direct_on_device(AnyArray const& a, char const* name, bool ok) {
  if (on_cpu(a) || ok) return;
  throw nb::type_error(("kembed: " + std::string(name) + " on a device must be a C-order " +
                        (is_float32(a.dtype()) || a.dtype().code == static_cast<std::uint8_t>(Code::Float)
                             ? "float32"
                             : "int32 or int64") +
                        " array (got " + dtype_name(a.dtype()) + "); convert it on the device first")
                           .c_str());
}

// Host bytes into the layer's memory, when the layer is on a device.
Buffer upload_for(Place const& layer, void const* host, std::size_t bytes) {
  auto b = layer.new_buffer(bytes);
  layer.upload(b.data, host, bytes);
  ++copies;
  return b;
}

}  // namespace

IdsIn take_ids(AnyArray const& a, std::int64_t v, Place const& layer) {
  require_place(a, "ids", &layer);
  require_integers(a, "ids");
  IdsIn in;
  in.shape = shape_of(a);
  in.ids.size = static_cast<std::int64_t>(a.size());
  auto const t = a.dtype();
  bool const direct = (is_int(t, 32) || is_int(t, 64)) && c_contiguous(a);
  require_direct_on_device(a, "ids", direct);
  if (direct) {
    in.ids.data = a.data();
    in.ids.wide = t.bits == 64;
  } else {
    in.owned = widen(a, v, "ids");
    ++copies;
    in.ids.data = in.owned.data();
    in.ids.wide = true;
  }
  if (on_cpu(a) && layer.device_type() != dlpack_cpu) {
    in.uploaded = upload_for(layer, in.ids.data, std::size_t(in.ids.size) * (in.ids.wide ? 8 : 4));
    in.ids.data = in.uploaded.data;
  }
  return in;
}

FloatsIn take_floats(AnyArray const& a, char const* name, Place const* layer) {
  require_place(a, name, layer);
  auto const t = a.dtype();
  if (!is_float32(t))
    throw nb::type_error(("kembed: " + std::string(name) + " must be float32, got " + dtype_name(t) +
                          "; kembed never rounds silently: convert it first (x.astype(numpy.float32), "
                          "tensor.float())")
                             .c_str());
  FloatsIn in;
  in.shape = shape_of(a);
  bool const direct = c_contiguous(a);
  require_direct_on_device(a, name, direct);
  if (direct) {
    in.data = static_cast<float const*>(a.data());
  } else {
    in.owned.resize(a.size());
    visit<float>(a, [&](float x, std::int64_t p) { in.owned[p] = x; });
    ++copies;
    in.data = in.owned.data();
  }
  if (layer && on_cpu(a) && layer->device_type() != dlpack_cpu) {
    in.uploaded = upload_for(*layer, in.data, a.size() * sizeof(float));
    in.data = static_cast<float const*>(in.uploaded.data);
  }
  return in;
}

float* take_borrowed(AnyArray const& a, std::vector<std::int64_t>& shape) {
  if (!is_float32(a.dtype()) || !c_contiguous(a))
    throw nb::type_error("kembed: a borrowed table must be a writable C-order float32 array");
  shape = shape_of(a);
  return static_cast<float*>(const_cast<void*>(a.data()));
}

std::vector<std::int64_t> take_int64s(AnyArray const& a, char const* name) {
  require_place(a, name, nullptr);
  require_integers(a, name);
  if (a.ndim() != 1)
    throw InvalidArgument(name, std::string(name) + " must be 1-D, got " + std::to_string(a.ndim()) + " dimensions");
  return widen(a, std::numeric_limits<std::int64_t>::max(), name);
}

namespace {
// An array written or read in place: in the layer's memory, `shape`, C order; the
// dtype is the caller's to check.
void* take_in_place(nb::ndarray<> const& a, std::vector<std::int64_t> const& shape, char const* name,
                    Place const& layer) {
  AnyArray const view(a);
  bool const here = layer.device_type() == dlpack_cpu ? on_cpu(view) : view.device_type() == layer.device_type();
  if (!here) {
    require_place(view, name, &layer);  // a device array for a host layer
    throw nb::type_error(("kembed: " + std::string(name) + " must be on the layer's device (" + layer.backend() +
                          "): it is written or read in place")
                             .c_str());
  }
  if (shape_of(view) != shape)
    throw InvalidArgument(name, std::string(name) + " has shape " + Shape(shape_of(view)).str() + ", want " +
                                    Shape(shape).str());
  if (!c_contiguous(view))
    throw InvalidArgument(name, std::string(name) + " must be C-contiguous: it is written or read in place");
  return a.data();
}
}  // namespace

std::int64_t* take_int64_in_place(nb::ndarray<> const& a, std::vector<std::int64_t> const& shape, char const* name,
                                  Place const& layer) {
  if (!is_int(a.dtype(), 64))
    throw nb::type_error(("kembed: " + std::string(name) + " must be int64, got " + dtype_name(a.dtype())).c_str());
  return static_cast<std::int64_t*>(take_in_place(a, shape, name, layer));
}

float* take_out(nb::ndarray<> const& a, std::vector<std::int64_t> const& shape, char const* name, Place const& layer) {
  if (!is_float32(a.dtype()))
    throw nb::type_error(("kembed: " + std::string(name) + " must be float32, got " + dtype_name(a.dtype())).c_str());
  return static_cast<float*>(take_in_place(a, shape, name, layer));
}

long input_copies() { return copies.load(); }

}  // namespace kembed::python
