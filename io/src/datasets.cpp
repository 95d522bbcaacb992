// Dataset I/O: storage and filter checks, the checked 2-D float and 1-D integer
// datasets read by rows, and chunked, checksummed matrices written by blocks.
#include "datasets.hpp"
#include "atomic_file.hpp"  // folder_of
#include "direct_chunks.hpp"
#include "open_file.hpp"

#include <kembed/core/shape.hpp>
#include <kembed/core/validate.hpp>
#include <kembed/io/error.hpp>
#include <kembed/version.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <stdexcept>

namespace kembed::io::detail {

namespace {

char const* known_filter(H5Z_filter_t id) {
  switch (id) {
    case H5Z_FILTER_DEFLATE:
      return "deflate";
    case H5Z_FILTER_SHUFFLE:
      return "shuffle";
    case H5Z_FILTER_FLETCHER32:
      return "fletcher32";
    case H5Z_FILTER_SZIP:
      return "szip";
    case H5Z_FILTER_NBIT:
      return "nbit";
    case H5Z_FILTER_SCALEOFFSET:
      return "scaleoffset";
    case 32000:
      return "lzf";
    case 32001:
      return "blosc";
    case 32004:
      return "lz4";
    case 32008:
      return "bitshuffle";
    case 32015:
      return "zstd";
    default:
      return nullptr;
  }
}

}  // namespace

std::vector<Filter> filters_of(hid_t dcpl) {
  std::vector<Filter> out;
  int const n = H5Pget_nfilters(dcpl);
  for (int i = 0; i < n; ++i) {
    unsigned flags = 0, config = 0;
    std::size_t values = 0;
    char stored[64] = {};
    H5Z_filter_t const id = H5Pget_filter2(dcpl, unsigned(i), &flags, &values, nullptr, sizeof stored, stored, &config);
    char const* known = known_filter(id);
    out.push_back({id, known ? known : stored[0] ? stored : "filter " + std::to_string(id)});
  }
  return out;
}

void check_storage(hid_t dataset, std::string const& path, std::string const& name) {
  h5::Handle dcpl = h5::plist(H5Dget_create_plist(dataset));
  h5::Handle type = h5::datatype(H5Dget_type(dataset));
  h5::Handle space = h5::dataspace(H5Dget_space(dataset));
  if (!dcpl.valid() || !type.valid() || !space.valid())
    throw FileError(path, name, "has unreadable metadata; the file is damaged (HDF5: " + h5::error_text() + ")");
  int const rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0 || rank > H5S_MAX_RANK) throw FileError(path, name, "has an unreadable shape; the file is damaged");
  hsize_t dims[H5S_MAX_RANK] = {};
  H5Sget_simple_extent_dims(space, dims, nullptr);
  // Every filter must be one this HDF5 can decode: say which is missing, not "damaged".
  for (auto const& filter : filters_of(dcpl)) {
    if (filter.id < 0) throw FileError(path, name, "has an unreadable filter pipeline; the file is damaged");
    if (H5Zfilter_avail(filter.id) <= 0) {
      h5::error_text();
      throw FileError(path, name,
                      "is compressed with the HDF5 filter '" + filter.name + "' (id " + std::to_string(filter.id) +
                          "), which this HDF5 does not have; rewrite it without that filter (h5py: "
                          "compression='gzip' or none) and try again");
    }
  }
  auto const layout = H5Pget_layout(dcpl);
  if (layout == H5D_VIRTUAL) {
    // A virtual dataset reads a missing source as fill values, silently: refuse that.
    std::size_t count = 0;
    if (H5Pget_virtual_count(dcpl, &count) < 0)
      throw FileError(path, name, "is a virtual dataset whose mappings cannot be read; the file is damaged");
    for (std::size_t i = 0; i < count; ++i) {
      ssize_t const length = H5Pget_virtual_filename(dcpl, i, nullptr, 0);
      if (length < 0) throw FileError(path, name, "is a virtual dataset whose mappings cannot be read");
      std::string source(std::size_t(length) + 1, '\0');
      H5Pget_virtual_filename(dcpl, i, source.data(), source.size());
      source.resize(std::size_t(length));
      if (source == ".") continue;  // this same file
      std::string const resolved = source[0] == '/' ? source : folder_of(path) + "/" + source;
      struct stat st {};
      if (::stat(resolved.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(resolved.c_str(), R_OK) != 0)
        throw FileError(path, name,
                        "is a virtual dataset whose source file " + source +
                            " is missing or unreadable; its rows would read as zeros, so it is refused");
    }
    return;
  }
  std::int64_t const element = static_cast<std::int64_t>(H5Tget_size(type));
  int const externals = H5Pget_external_count(dcpl);
  if (externals > 0) {
    // Raw data in other files: each must exist and hold the bytes it is said to hold.
    for (int i = 0; i < externals; ++i) {
      char file_name[4096] = {};
      off_t offset = 0;
      hsize_t size = 0;
      if (H5Pget_external(dcpl, unsigned(i), sizeof file_name, file_name, &offset, &size) < 0)
        throw FileError(path, name, "keeps its data in external files that cannot be listed; the file is damaged");
      std::string const source = file_name;
      std::string const resolved = source.empty() || source[0] == '/' ? source : folder_of(path) + "/" + source;
      struct stat st {};
      bool const present = ::stat(resolved.c_str(), &st) == 0 && S_ISREG(st.st_mode);
      if (!present || (size != H5F_UNLIMITED && double(st.st_size) < double(offset) + double(size)))
        throw FileError(path, name,
                        "keeps its data in the external file " + source +
                            (present ? ", which is shorter than declared" : ", which is missing") +
                            "; its values would read as zeros, so it is refused");
    }
    return;
  }
  // Declared size against stored data: unallocated storage reads as fill values, so a
  // tiny file could claim 2^40 positions and stream zeros. Both must match.
  double elements = 1;
  for (int i = 0; i < rank; ++i) elements *= double(dims[i]);
  if (elements == 0) return;
  if (layout == H5D_CONTIGUOUS) {
    double const stored = double(H5Dget_storage_size(dataset));
    if (stored < elements * double(element))
      throw FileError(path, name,
                      "declares " + std::to_string(static_cast<long long>(elements)) + " values but stores " +
                          std::to_string(static_cast<long long>(stored / double(element))) +
                          "; the file is truncated or damaged");
  } else if (layout == H5D_CHUNKED) {
    hsize_t chunk[H5S_MAX_RANK] = {};
    if (H5Pget_chunk(dcpl, rank, chunk) != rank) throw FileError(path, name, "has unreadable chunk dimensions");
    double expected = 1;
    for (int i = 0; i < rank; ++i) {
      if (chunk[i] == 0) throw FileError(path, name, "has a zero chunk dimension; the file is damaged");
      expected *= std::ceil(double(dims[i]) / double(chunk[i]));
    }
    hsize_t allocated = 0;
    if (H5Dget_num_chunks(dataset, space, &allocated) < 0)
      throw FileError(path, name,
                      "has an unreadable chunk index; the file is damaged (HDF5: " + h5::error_text() + ")");
    if (double(allocated) < expected)
      throw FileError(path, name,
                      "stores " + std::to_string(allocated) + " of the " +
                          std::to_string(static_cast<long long>(expected)) +
                          " chunks its shape declares; the missing ones would read as zeros, so the file is "
                          "refused as truncated or damaged");
  }
}

FloatMatrix open_float_matrix(hid_t file, std::string const& path, std::string const& name, bool convert, bool vector) {
  if (!h5::exists(file, name)) throw FileError(path, name, "does not exist");
  {
    // H5Iget_type on the opened object works the same in HDF5 1.10, 1.12 and 1.14.
    h5::Handle object{H5Oopen(file, name.c_str(), H5P_DEFAULT), H5Oclose};
    if (!object.valid() || H5Iget_type(object) != H5I_DATASET)
      throw FileError(path, name, "is not a dataset (it is a group or a named type)");
  }
  FloatMatrix m;
  m.dataset = h5::dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!m.dataset.valid()) throw FileError(path, name, "cannot be opened (HDF5: " + h5::error_text() + ")");
  h5::Handle type = h5::datatype(H5Dget_type(m.dataset));
  h5::Handle space = h5::dataspace(H5Dget_space(m.dataset));
  auto const cls = H5Tget_class(type);
  if (cls != H5T_FLOAT) {
    throw FileError(path, name,
                    "holds " + h5::describe_type(type) +
                        (vector ? "; it must hold float32 values" : "; a table holds float32 values"));
  }
  auto const size = H5Tget_size(type);
  if (size != 4 && !convert) {
    throw FileError(path, name,
                    "holds " + h5::describe_type(type) +
                        "; kembed tables are float32. Convert it first (numpy: "
                        "f['" +
                        name +
                        "'][...].astype('float32')), or import it with the conversion "
                        "(kembed import --convert; convert = true in the library), which rounds each value to "
                        "the nearest float32");
  }
  int const rank = H5Sget_simple_extent_ndims(space);
  hsize_t dims[H5S_MAX_RANK] = {};
  H5Sget_simple_extent_dims(space, dims, nullptr);
  if (rank != (vector ? 1 : 2)) {
    std::string shape = "(";
    for (int i = 0; i < rank; ++i) shape += (i ? ", " : "") + std::to_string(dims[i]);
    shape += rank == 1 ? ",)" : ")";
    throw FileError(path, name,
                    "has rank " + std::to_string(rank) + " (shape " + shape + "); " +
                        (vector ? "it must be 1-D (one value per position)" : "a table has rank 2 (rows, columns)"));
  }
  if (dims[0] > hsize_t(INT64_MAX) || (!vector && dims[1] > hsize_t(INT64_MAX)))
    throw FileError(path, name, "has dimensions beyond 64-bit signed integers");
  m.rows = static_cast<std::int64_t>(dims[0]);
  m.cols = vector ? 1 : static_cast<std::int64_t>(dims[1]);
  check_storage(m.dataset, path, name);
  return m;
}

namespace {
// The file and memory selections of rows [first, first + count); a collective call
// with no rows still takes part, selecting nothing.
std::pair<h5::Handle, h5::Handle> row_selection(hid_t dataset, std::int64_t first, std::int64_t count) {
  h5::Handle file_space = h5::dataspace(H5Dget_space(dataset));
  int const rank = H5Sget_simple_extent_ndims(file_space);
  hsize_t dims[2] = {};
  H5Sget_simple_extent_dims(file_space, dims, nullptr);
  hsize_t const start[2] = {hsize_t(first), 0}, extent[2] = {hsize_t(count), rank == 2 ? dims[1] : 1};
  if (count == 0) {
    hsize_t const one[2] = {1, 1};
    h5::Handle mem_space = h5::dataspace(H5Screate_simple(rank, one, nullptr));
    H5Sselect_none(file_space);
    H5Sselect_none(mem_space);
    return {std::move(file_space), std::move(mem_space)};
  }
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, extent, nullptr);
  return {std::move(file_space), h5::dataspace(H5Screate_simple(rank, extent, nullptr))};
}
}  // namespace

void read_rows(FloatMatrix const& m, std::string const& path, std::string const& name, std::int64_t first,
               std::int64_t count, float* out, bool finite, hid_t transfer) {
  if (count == 0 && transfer == H5P_DEFAULT) return;
  auto const damaged = [&](std::string const& detail) {
    return FileError(path, name,
                     "reading rows " + std::to_string(first) + " to " + std::to_string(first + count - 1) +
                         " failed: the stored data do not match their checksum or cannot be decoded, "
                         "so the file is damaged (" +
                         detail + ")");
  };
  // One process reads kembed's own layout past HDF5's filter pipeline (direct_chunks.hpp).
  auto const direct = transfer == H5P_DEFAULT ? read_rows_direct(m.dataset, H5T_NATIVE_FLOAT, first, count, out)
                                              : DirectRead::unsuitable;
  if (direct == DirectRead::damaged)
    throw damaged("a chunk's Fletcher-32 checksum does not match, or it cannot be read");
  if (direct == DirectRead::unsuitable) {
    auto const [file_space, mem_space] = row_selection(m.dataset, first, count);
    if (H5Dread(m.dataset, H5T_NATIVE_FLOAT, mem_space, file_space, transfer, out) < 0)
      throw damaged("HDF5: " + h5::error_text());
  }
  if (finite) check_finite_values(out, count, m.cols, first, path, name, "row", "a table");
}

void check_finite_values(float const* values, std::int64_t rows, std::int64_t cols, std::int64_t first,
                         std::string const& path, std::string const& name, char const* unit, char const* what) {
  std::int64_t const width = std::max<std::int64_t>(cols, 1), n = rows * width;
  std::int64_t const bad = first_non_finite(values, n);
  if (bad >= n) return;
  float const value = values[bad];
  throw FileError(path, name,
                  std::string("holds ") +
                      (std::isnan(value) ? "NaN"
                       : value > 0       ? "+inf"
                                         : "-inf") +
                      " at " + unit + " " + std::to_string(first + bad / width) +
                      (cols > 0 ? ", column " + std::to_string(bad % width) : std::string()) + "; " + what +
                      " must be finite");
}

h5::Handle create_matrix(hid_t loc, char const* name, hid_t file_type, std::int64_t rows, std::int64_t cols,
                         SaveOptions const& options) {
  std::int64_t const element = static_cast<std::int64_t>(H5Tget_size(file_type));
  std::int64_t chunk_rows = options.rows_per_chunk;
  if (chunk_rows <= 0)
    chunk_rows = std::max<std::int64_t>(1, (std::int64_t{1} << 20) / (element * std::max<std::int64_t>(cols, 1)));
  chunk_rows = std::min(chunk_rows, rows);
  hsize_t const dims[2] = {hsize_t(rows), hsize_t(cols)};
  hsize_t const chunk[2] = {hsize_t(chunk_rows), hsize_t(cols)};
  int const rank = cols > 0 ? 2 : 1;
  h5::Handle space = h5::dataspace(H5Screate_simple(rank, dims, nullptr));
  h5::Handle dcpl = h5::plist(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_obj_track_times(dcpl, false);  // no timestamps: the same data give the same file bytes
  H5Pset_chunk(dcpl, rank, chunk);
  if (options.deflate) {
    H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, static_cast<unsigned>(std::clamp(options.deflate_level, 1, 9)));
  }
  H5Pset_fletcher32(dcpl);  // last, so it checksums the bytes as stored
  h5::Handle dset = h5::dataset(H5Dcreate2(loc, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  if (!dset.valid()) throw std::runtime_error(std::string("creating dataset '") + name + "': " + h5::error_text());
  return dset;
}

void write_block(hid_t dset, char const* name, hid_t mem_type, std::int64_t first, std::int64_t count, void const* data,
                 hid_t transfer) {
  if (count == 0 && transfer == H5P_DEFAULT) return;
  auto const failed = [&] {
    return std::runtime_error(std::string("writing dataset '") + name + "': " + h5::error_text());
  };
  auto const through_hdf5 = [&](std::int64_t from, std::int64_t n, void const* rows) {
    auto const [file_space, mem_space] = row_selection(dset, from, n);
    if (H5Dwrite(dset, mem_type, mem_space, file_space, transfer, rows) < 0) throw failed();
  };
  // One process writes whole chunks of kembed's own layout past HDF5's filter pipeline
  // (direct_chunks.hpp): the same stored bytes, one copy and a faster checksum.
  if (transfer == H5P_DEFAULT) {
    auto const direct = write_rows_direct(dset, mem_type, first, count, data);
    if (!direct.ok) throw failed();
    if (direct.done_from < direct.done_to) {
      auto const* bytes = static_cast<unsigned char const*>(data);
      if (direct.done_from > first) through_hdf5(first, direct.done_from - first, data);
      if (direct.done_to < first + count)
        through_hdf5(direct.done_to, first + count - direct.done_to,
                     bytes + std::size_t(direct.done_to - first) * direct.row_bytes);
      return;
    }
  }
  through_hdf5(first, count, data);
}

h5::Handle open_int_vector(hid_t file, std::string const& path, std::string const& name, std::int64_t* size_out) {
  if (!h5::exists(file, name)) throw FileError(path, name, "does not exist");
  h5::Handle dset = h5::dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!dset.valid()) throw FileError(path, name, "is not a dataset");
  h5::Handle type = h5::datatype(H5Dget_type(dset));
  h5::Handle space = h5::dataspace(H5Dget_space(dset));
  if (H5Tget_class(type) != H5T_INTEGER) {
    throw FileError(
        path, name,
        "holds " + h5::describe_type(type) + "; ids must be integers (a float id is refused rather than truncated)");
  }
  if (H5Tget_size(type) > 8 || (H5Tget_size(type) == 8 && H5Tget_sign(type) == H5T_SGN_NONE))
    throw FileError(path, name, "holds unsigned 64-bit integers; ids must be signed 64-bit or narrower");
  int const rank = H5Sget_simple_extent_ndims(space);
  hsize_t dims[H5S_MAX_RANK] = {};
  H5Sget_simple_extent_dims(space, dims, nullptr);
  if (rank != 1) {
    throw FileError(
        path, name,
        "has rank " + std::to_string(rank) + "; ids are 1-D (T,), positions in order (flatten them in C order)");
  }
  if (dims[0] > hsize_t(INT64_MAX)) throw FileError(path, name, "has a length beyond 64-bit signed integers");
  check_storage(dset, path, name);
  if (size_out) *size_out = static_cast<std::int64_t>(dims[0]);
  return dset;
}

void read_ints(hid_t dataset, std::string const& path, std::string const& name, std::int64_t first, std::int64_t count,
               std::int64_t* out, hid_t transfer) {
  if (count == 0 && transfer == H5P_DEFAULT) return;
  auto const damaged = [&](std::string const& detail) {
    return FileError(path, name,
                     "reading positions " + std::to_string(first) + " to " + std::to_string(first + count - 1) +
                         " failed; the file is damaged (" + detail + ")");
  };
  auto const direct =
      transfer == H5P_DEFAULT ? read_rows_direct(dataset, H5T_NATIVE_INT64, first, count, out) : DirectRead::unsuitable;
  if (direct == DirectRead::damaged)
    throw damaged("a chunk's Fletcher-32 checksum does not match, or it cannot be read");
  if (direct == DirectRead::unsuitable) {
    auto const [file_space, mem_space] = row_selection(dataset, first, count);
    if (H5Dread(dataset, H5T_NATIVE_INT64, mem_space, file_space, transfer, out) < 0)
      throw damaged("HDF5: " + h5::error_text());
  }
}

}  // namespace kembed::io::detail
