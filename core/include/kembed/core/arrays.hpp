#pragma once
// Non-owning descriptions of caller-owned host arrays: the host-array overloads
// of Embedding take these, so plain buffers need no Kokkos views.
#include <cstdint>
#include <vector>

#include <kembed/core/shape.hpp>

namespace kembed {

enum class IdType { int32, int64 };

// Ids of any shape, flattened in C order to positions 0..T-1.
class IdsRef {
 public:
  IdsRef(std::int32_t const* data, Shape shape) : data_(data), type_(IdType::int32), shape_(std::move(shape)) {}
  IdsRef(std::int64_t const* data, Shape shape) : data_(data), type_(IdType::int64), shape_(std::move(shape)) {}
  IdsRef(std::vector<std::int32_t> const& v) : IdsRef(v.data(), Shape{static_cast<std::int64_t>(v.size())}) {}
  IdsRef(std::vector<std::int64_t> const& v) : IdsRef(v.data(), Shape{static_cast<std::int64_t>(v.size())}) {}
  // Float ids are refused at compile time: an id is a row number, never truncated.
  IdsRef(float const*, Shape) = delete;
  IdsRef(double const*, Shape) = delete;
  IdsRef(std::vector<float> const&) = delete;
  IdsRef(std::vector<double> const&) = delete;

  void const* data() const noexcept { return data_; }
  IdType type() const noexcept { return type_; }
  Shape const& shape() const noexcept { return shape_; }
  std::int64_t size() const { return shape_.numel("ids"); }
  // Id at flat position p, widened to int64.
  std::int64_t at(std::int64_t p) const {
    return type_ == IdType::int32 ? static_cast<std::int32_t const*>(data_)[p]
                                  : static_cast<std::int64_t const*>(data_)[p];
  }

 private:
  void const* data_;
  IdType type_;
  Shape shape_;
};

// A float32 array of a given shape, in C order.
struct FloatsRef {
  float const* data = nullptr;
  Shape shape;
  FloatsRef() = default;
  FloatsRef(float const* d, Shape s) : data(d), shape(std::move(s)) {}
};

}  // namespace kembed
