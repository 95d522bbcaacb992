#include <kembed/core/error.hpp>
#include <kembed/core/shape.hpp>

#include <limits>
#include <sstream>

namespace kembed {

std::int64_t checked_mul(std::int64_t a, std::int64_t b, char const* argument) {
  std::int64_t out = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &out)) {
    std::ostringstream msg;
    msg << argument << ": the size " << a << " * " << b << " does not fit in a signed 64-bit integer";
    throw InvalidArgument(argument, msg.str());
  }
  return out;
}

std::int64_t Shape::numel(char const* argument) const {
  std::int64_t n = 1;
  for (auto dim : dims_) {
    if (dim < 0) {
      throw InvalidArgument(
          argument, std::string(argument) + " has shape " + str() + " with a negative dimension; want dimensions >= 0");
    }
    n = checked_mul(n, dim, argument);
  }
  return n;
}

Shape Shape::appended(std::int64_t dim) const {
  auto dims = dims_;
  dims.push_back(dim);
  return Shape(std::move(dims));
}

std::string Shape::str() const {
  std::ostringstream out;
  out << '(';
  for (std::size_t i = 0; i < dims_.size(); ++i) out << (i ? ", " : "") << dims_[i];
  if (dims_.size() == 1) out << ',';
  out << ')';
  return out.str();
}

}  // namespace kembed
