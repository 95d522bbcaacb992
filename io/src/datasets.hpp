#pragma once
// Dataset I/O: storage and filter checks, the checked 2-D float and 1-D integer
// datasets read by rows, and chunked, checksummed matrices written by blocks.
#include "h5.hpp"

#include <kembed/io/error.hpp>
#include <kembed/io/table_file.hpp>

#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace kembed::io::detail {

// A dataset's filters in pipeline order, named ("deflate", "lzf", ...; HDF5's stored
// name or "filter N" for others); id < 0 where the pipeline cannot be read.
struct Filter {
  H5Z_filter_t id;
  std::string name;
};
std::vector<Filter> filters_of(hid_t dcpl);

// Refuses a dataset whose declared size its file cannot back: unallocated chunks or
// contiguous storage shorter than declared, a virtual dataset with a missing source,
// external raw data that is missing or short, and a filter this HDF5 lacks.
void check_storage(hid_t dataset, std::string const& path, std::string const& name);

struct FloatMatrix {
  h5::Handle dataset;
  std::int64_t rows = 0, cols = 0;
};

// Opens a 2-D float dataset; refuses other ranks and types. Float sizes other
// than 4 bytes are refused unless `convert`. With `vector`, a 1-D one (cols = 1).
FloatMatrix open_float_matrix(hid_t file, std::string const& path, std::string const& name, bool convert,
                              bool vector = false);

// Reads rows [first, first + count) into out (count x cols floats); refuses NaN/inf
// when `finite` (tables), keeps them otherwise (gradients may overflow to inf).
// `transfer` is a dataset transfer list (collective_transfer()); with one, a call for
// no rows still takes part in the collective read, selecting nothing.
void read_rows(FloatMatrix const& m, std::string const& path, std::string const& name, std::int64_t first,
               std::int64_t count, float* out, bool finite = true, hid_t transfer = H5P_DEFAULT);

// Refuses a NaN or inf among `rows` x `cols` values read from rows [first, ...),
// naming its row as `unit` ("row", "position", "bag") and its column (cols = 0: a
// 1-D dataset, no column), and what must be finite ("a table", "dy").
void check_finite_values(float const* values, std::int64_t rows, std::int64_t cols, std::int64_t first,
                         std::string const& path, std::string const& name, char const* unit, char const* what);

// Reads a 1-D integer dataset's elements [first, first + count) as int64; refuses
// other types and ranks. `size_out` (if given) receives the dataset's length.
h5::Handle open_int_vector(hid_t file, std::string const& path, std::string const& name, std::int64_t* size_out);
void read_ints(hid_t dataset, std::string const& path, std::string const& name, std::int64_t first, std::int64_t count,
               std::int64_t* out, hid_t transfer = H5P_DEFAULT);

// A chunked, checksummed dataset of rows x cols (cols = 0: 1-D), and rows
// [first, first + count) of one written (as read_rows, for `transfer`).
h5::Handle create_matrix(hid_t loc, char const* name, hid_t file_type, std::int64_t rows, std::int64_t cols,
                         SaveOptions const& options);
void write_block(hid_t dset, char const* name, hid_t mem_type, std::int64_t first, std::int64_t count, void const* data,
                 hid_t transfer = H5P_DEFAULT);

}  // namespace kembed::io::detail
