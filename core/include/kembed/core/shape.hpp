#pragma once
// Shapes and their arithmetic, in checked 64-bit integers: a product that would
// overflow is an error, never a wrapped size.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace kembed {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {}

  std::size_t rank() const noexcept { return dims_.size(); }
  std::int64_t operator[](std::size_t i) const { return dims_.at(i); }
  std::vector<std::int64_t> const& dims() const noexcept { return dims_; }

  // Product of the dimensions; throws InvalidArgument naming `argument` on a
  // negative dimension or an overflow of int64.
  std::int64_t numel(char const* argument = "shape") const;
  // This shape with one more trailing dimension (ids.shape + (d,)).
  Shape appended(std::int64_t dim) const;
  std::string str() const;  // "(2, 3, 4)"

  friend bool operator==(Shape const& a, Shape const& b) { return a.dims_ == b.dims_; }
  friend bool operator!=(Shape const& a, Shape const& b) { return !(a == b); }

 private:
  std::vector<std::int64_t> dims_;
};

// a * b, or InvalidArgument naming `argument` when it does not fit in int64.
std::int64_t checked_mul(std::int64_t a, std::int64_t b, char const* argument);

}  // namespace kembed
