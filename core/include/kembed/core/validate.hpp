#pragma once
// Checks shared by every entry point, and the messages for what they find. Kernels
// find the first offending element on the device; these turn it into the error.
#include <cstdint>

#include <kembed/core/arrays.hpp>
#include <kembed/core/options.hpp>
#include <kembed/core/shape.hpp>

namespace kembed {

// ids must hold at least one position; returns T.
std::int64_t check_ids_shape(Shape const& ids_shape);
// dy must be ids.shape + (d,); returns T.
std::int64_t check_dy_shape(Shape const& ids_shape, Shape const& dy_shape, std::int64_t embedding_dim);
// A (V, d) table, gradient or carry named `argument`.
void check_table_shape(char const* argument, Shape const& shape, std::int64_t num_embeddings,
                       std::int64_t embedding_dim);

[[noreturn]] void throw_id_out_of_range(char const* argument, std::int64_t position, std::int64_t value,
                                        std::int64_t num_embeddings);
// `columns` > 0 reports the (row, column) of the flat index, as for dy, tables, carries.
[[noreturn]] void throw_non_finite(char const* argument, std::int64_t index, float value, std::int64_t columns,
                                   char const* row_name);

// Host scans: the first offending position/index, or n when there is none.
std::int64_t first_id_out_of_range(IdsRef const& ids, std::int64_t num_embeddings);
std::int64_t first_non_finite(float const* values, std::int64_t n);

}  // namespace kembed
