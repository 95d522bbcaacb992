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

// A device array is refused by name: this module runs on host backends only.
void require_host(AnyArray const& a, char const* name) {
  int const type = a.device_type();
  if (type == nb::device::cpu::value || type == nb::device::cuda_host::value) return;
  std::string const where = type == nb::device::cuda::value       ? "cuda"
                            : type == nb::device::rocm::value     ? "rocm"
                            : type == nb::device::cuda_managed::value ? "cuda (managed)"
                                                                  : "device type " + std::to_string(type);
  throw nb::type_error(("kembed: " + std::string(name) + " is on " + where + ":" + std::to_string(a.device_id()) +
                        ", but this kembed module has host backends only (" + "serial, openmp" +
                        "); move it to the CPU first (tensor.cpu())")
                           .c_str());
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

IdsIn take_ids(AnyArray const& a, std::int64_t v) {
  require_host(a, "ids");
  require_integers(a, "ids");
  IdsIn in;
  in.shape = shape_of(a);
  in.ids.size = static_cast<std::int64_t>(a.size());
  auto const t = a.dtype();
  bool const direct = t.code == static_cast<std::uint8_t>(Code::Int) && (t.bits == 32 || t.bits == 64) && c_contiguous(a);
  if (direct) {
    in.ids.data = a.data();
    in.ids.wide = t.bits == 64;
    return in;
  }
  in.owned = widen(a, v, "ids");
  ++copies;
  in.ids.data = in.owned.data();
  in.ids.wide = true;
  return in;
}

FloatsIn take_floats(AnyArray const& a, char const* name) {
  require_host(a, name);
  auto const t = a.dtype();
  if (t.code != static_cast<std::uint8_t>(Code::Float) || t.bits != 32 || t.lanes != 1)
    throw nb::type_error(("kembed: " + std::string(name) + " must be float32, got " + dtype_name(t) +
                          "; kembed never rounds silently: convert it first (x.astype(numpy.float32), "
                          "tensor.float())")
                             .c_str());
  FloatsIn in;
  in.shape = shape_of(a);
  if (c_contiguous(a)) {
    in.data = static_cast<float const*>(a.data());
    return in;
  }
  in.owned.resize(a.size());
  visit<float>(a, [&](float x, std::int64_t p) { in.owned[p] = x; });
  ++copies;
  in.data = in.owned.data();
  return in;
}

std::vector<std::int64_t> take_int64s(AnyArray const& a, char const* name) {
  require_host(a, name);
  require_integers(a, name);
  if (a.ndim() != 1)
    throw InvalidArgument(name, std::string(name) + " must be 1-D, got " + std::to_string(a.ndim()) + " dimensions");
  return widen(a, std::numeric_limits<std::int64_t>::max(), name);
}

float* take_out(nb::ndarray<> const& a, std::vector<std::int64_t> const& shape, char const* name) {
  AnyArray const view(a);
  require_host(view, name);
  auto const t = a.dtype();
  if (t.code != static_cast<std::uint8_t>(Code::Float) || t.bits != 32 || t.lanes != 1)
    throw nb::type_error(("kembed: " + std::string(name) + " must be float32, got " + dtype_name(t)).c_str());
  if (shape_of(view) != shape)
    throw InvalidArgument(name, std::string(name) + " has shape " + Shape(shape_of(view)).str() + ", want " +
                                    Shape(shape).str());
  if (!c_contiguous(view))
    throw InvalidArgument(name, std::string(name) + " must be C-contiguous: the result is written into it");
  return static_cast<float*>(a.data());
}

long input_copies() { return copies.load(); }

}  // namespace kembed::python
