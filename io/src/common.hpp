#pragma once
// What table and run files share: opening with clear diagnoses, format tags, the
// checked 2-D float dataset, and its chunked, checksummed writing.
#include "h5.hpp"

#include <kembed/io/error.hpp>
#include <kembed/io/table_file.hpp>

#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace kembed::io {
struct Collective;
}
namespace kembed::io::detail {

// Opens read-only, telling a missing file, a non-HDF5 file and a damaged one apart;
// with `collective`, on every rank of its communicator (a collective call).
h5::Handle open_for_reading(std::string const& path, Collective const* collective = nullptr);

// Reads the root's "format" attribute and checks it is `family`-N with N == version.
void check_format(hid_t file, std::string const& path, std::string const& family, int version, char const* what);

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
// than 4 bytes are refused unless `convert`.
FloatMatrix open_float_matrix(hid_t file, std::string const& path, std::string const& name, bool convert);

// Refuses `bytes` beyond this machine's memory: "needs N GiB <what>, more than ...".
void check_memory(std::string const& path, std::string const& name, double bytes, std::string const& what);
// Refuses rows x cols float32 that overflow 64 bits or exceed this machine's memory.
void check_size(std::string const& path, std::string const& name, std::int64_t rows, std::int64_t cols,
                std::int64_t element_bytes);

// Reads rows [first, first + count) into out (count x cols floats); refuses NaN/inf
// when `finite` (tables), keeps them otherwise (gradients may overflow to inf).
// `transfer` is a dataset transfer list (collective_transfer()); with one, a call for
// no rows still takes part in the collective read, selecting nothing.
void read_rows(FloatMatrix const& m, std::string const& path, std::string const& name, std::int64_t first,
               std::int64_t count, float* out, bool finite = true, hid_t transfer = H5P_DEFAULT);

// Reads a 1-D integer dataset's elements [first, first + count) as int64; refuses
// other types and ranks. `size_out` (if given) receives the dataset's length.
h5::Handle open_int_vector(hid_t file, std::string const& path, std::string const& name, std::int64_t* size_out);
void read_ints(hid_t dataset, std::string const& path, std::string const& name, std::int64_t first, std::int64_t count,
               std::int64_t* out, hid_t transfer = H5P_DEFAULT);

// A chunked, checksummed dataset of rows x cols (cols = 0: 1-D), and rows
// [first, first + count) of one written (as read_rows, for `transfer`).
h5::Handle create_matrix(hid_t loc, char const* name, hid_t file_type, std::int64_t rows, std::int64_t cols,
                         SaveOptions const& options);
void write_block(hid_t dset, char const* name, hid_t mem_type, std::int64_t first, std::int64_t count,
                 void const* data, hid_t transfer = H5P_DEFAULT);

// A file written crash-safely (AtomicFile) whose datasets are filled in row blocks.
class StreamingFile {
 public:
  explicit StreamingFile(std::string path);
  ~StreamingFile();
  hid_t root() const;
  // A chunked, checksummed dataset of rows x cols (cols = 0: 1-D), filled later.
  void create(char const* name, hid_t file_type, std::int64_t rows, std::int64_t cols, SaveOptions const& options);
  void write_rows(char const* name, hid_t mem_type, std::int64_t first, std::int64_t count, void const* data);
  // create() and write_rows() of all `rows` at once. Datasets belong to the file, so
  // that a failed write can discard them with it (see Impl::discard).
  void write_whole(char const* name, hid_t file_type, hid_t mem_type, void const* data, std::int64_t rows,
                   std::int64_t cols, SaveOptions const& options) {
    create(name, file_type, rows, cols, options);
    write_rows(name, mem_type, 0, rows, data);
  }
  void commit();  // close, fsync, rename
  // Flushes HDF5's buffers and fsyncs the rows written so far while the file stays
  // open, so that a later commit() has only what follows left to make durable.
  void sync_so_far();
  // Asks the system to start writing what is written so far to storage, without
  // waiting (Linux: sync_file_range), so that storage works while the caller does.
  void start_writeback();
  // Closes the file without publishing it, so that other processes can open the
  // temporary file (temp_path()) and write into it before commit().
  void close();
  std::string const& temp_path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;  // one owner: the file is neither copied nor moved
};

// Attributes a format requires: the value, or a FileError naming the attribute.
std::int64_t required_int64(hid_t obj, std::string const& path, char const* name);
std::string required_string(hid_t obj, std::string const& path, char const* name);
// A file's padding_idx, already read, checked against the file's rule: the padding
// row as a row number in [0, rows), or -1 for none. A negative row counted from the
// end (torch's spelling, which the API and the command line take) is never stored,
// so a file holding one is refused rather than read as another row.
std::int64_t stored_padding_idx(std::string const& path, std::int64_t value, std::int64_t rows);
// The writers' side of the same rule: an InvalidArgument before anything is written.
void check_padding_to_store(char const* what, std::int64_t value, std::int64_t rows);

std::string utc_now_iso8601();

// The attributes every kembed file starts with: its format tag and the kembed that
// wrote it, and (where `created_by` is not null) the creating command, which is this
// process's command line unless the caller gave one.
void write_identity(hid_t root, char const* format, SaveOptions const* created_by = nullptr);

// Runs a step of writing `path` with HDF5's printing off; an HDF5 failure becomes an
// IoFailure "<what>: <HDF5's words>", and kembed's own errors (an IoFailure from a
// failed fsync or rename, bad input a step found) pass through as they are.
template <class Step>
void writing(std::string const& path, std::string const& what, Step&& step) {
  h5::Quiet quiet;
  try {
    step();
  } catch (Error const&) {  // kembed's own (a failed write, or bad input a step found) keep their kind
    throw;
  } catch (std::runtime_error const& e) {
    throw IoFailure(path, what + ": " + e.what());
  }
}
// Runs a step of reading `path` with HDF5's printing off. kembed's own errors pass
// through; any other failure (HDF5 refusing, a malformed object, a parse error)
// becomes a FileError naming the file, so no reader can end a program another way.
template <class Step>
auto reading(std::string const& path, Step&& step) -> decltype(step()) {
  h5::Quiet quiet;
  try {
    return step();
  } catch (Error const&) {
    throw;
  } catch (std::bad_alloc const&) {
    throw;
  } catch (std::exception const& e) {
    throw FileError(path, "", std::string("cannot be read: ") + e.what());
  }
}

// This process's command line, arguments joined by spaces ("" where unknown).
std::string own_command_line();

}  // namespace kembed::io::detail
