#include <kembed/core/error.hpp>
#include <kembed/core/validate.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>

namespace kembed {

std::int64_t check_ids_shape(Shape const& ids_shape) {
  auto const t = ids_shape.numel("ids");
  if (t < 1)
    throw InvalidArgument("ids", "ids has shape " + ids_shape.str() + " with no positions; want at least one id");
  return t;
}

std::int64_t check_dy_shape(Shape const& ids_shape, Shape const& dy_shape, std::int64_t embedding_dim) {
  auto const t = check_ids_shape(ids_shape);
  auto const want = ids_shape.appended(embedding_dim);
  if (dy_shape != want) {
    throw InvalidArgument(
        "dy", "dy has shape " + dy_shape.str() + ", want " + want.str() + " (ids.shape + (embedding_dim,))");
  }
  return t;
}

void check_table_shape(char const* argument, Shape const& shape, std::int64_t num_embeddings,
                       std::int64_t embedding_dim) {
  Shape const want{num_embeddings, embedding_dim};
  if (shape != want) {
    throw InvalidArgument(argument, std::string(argument) + " has shape " + shape.str() + ", want " + want.str() +
                                        " (num_embeddings, embedding_dim)");
  }
}

void throw_id_out_of_range(char const* argument, std::int64_t position, std::int64_t value,
                           std::int64_t num_embeddings) {
  std::ostringstream msg;
  msg << argument << " holds " << value << " at position " << position << ", outside [0, " << num_embeddings
      << ") (num_embeddings = " << num_embeddings << "); ids are never clamped";
  throw IdOutOfRange(argument, msg.str(), position, value);
}

void throw_non_finite(char const* argument, std::int64_t index, float value, std::int64_t columns,
                      char const* row_name) {
  std::ostringstream msg;
  msg << argument << " holds " << (std::isnan(value) ? "NaN" : (value > 0 ? "+inf" : "-inf"));
  if (columns > 0) msg << " at " << row_name << ' ' << index / columns << ", column " << index % columns;
  msg << " (flat index " << index << "); " << argument << " must be finite";
  throw NonFinite(argument, msg.str(), index);
}

std::int64_t first_id_out_of_range(IdsRef const& ids, std::int64_t num_embeddings) {
  auto const t = ids.size();
  for (std::int64_t p = 0; p < t; ++p) {
    auto const r = ids.at(p);
    if (r < 0 || r >= num_embeddings) return p;
  }
  return t;
}

std::int64_t first_non_finite(float const* values, std::int64_t n) {
  // Blocks are checked without an early exit (a loop the compiler vectorises: an
  // exponent of all ones is an infinity or a NaN); only a block that has one is searched.
  constexpr std::int64_t block = 1024;
  std::int64_t i = 0;
  for (; i + block <= n; i += block) {
    std::uint32_t any = 0;
    for (std::int64_t k = 0; k < block; ++k) {
      std::uint32_t bits;
      std::memcpy(&bits, values + i + k, sizeof bits);
      any |= (bits & 0x7f800000u) == 0x7f800000u;
    }
    if (any) break;
  }
  for (; i < n; ++i)
    if (!std::isfinite(values[i])) return i;
  return n;
}

}  // namespace kembed
