#pragma once
// Writing: a file written crash-safely in row blocks, and the frame that makes an
// HDF5 failure while writing an IoFailure naming the file.
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

}  // namespace kembed::io::detail
