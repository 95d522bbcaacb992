// StreamingFile: a file written crash-safely (AtomicFile) in row blocks.
#include "streaming_file.hpp"
#include "atomic_file.hpp"
#include "datasets.hpp"

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

struct StreamingFile::Impl {
  std::string path;
  AtomicFile out;
  h5::Handle file;
  std::vector<std::pair<std::string, h5::Handle>> datasets;
  bool committed = false;
  int writeback_fd = -1;  // start_writeback()'s
  explicit Impl(std::string p) : path(p), out(std::move(p)) {}
  ~Impl() {
    if (writeback_fd >= 0) ::close(writeback_fd);
    if (!committed) discard();
  }
  hid_t dataset(char const* name) {
    for (auto& [n, d] : datasets)
      if (n == name) return d;
    throw std::logic_error(std::string("StreamingFile: no dataset ") + name);
  }
  // An unfinished file is thrown away, but HDF5 still flushes and truncates it on
  // close; after a failed write (disk full, file-size limit) that fails too, and a
  // file HDF5 could not close crashes its exit handler. So its descriptor is first
  // pointed at an anonymous memory file: every close then succeeds, and the
  // temporary file, never renamed in, goes with AtomicFile.
  void discard() noexcept {
    h5::Quiet quiet;
    if (file.valid()) {
      void* handle = nullptr;
      if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) >= 0 && handle) {
        int const sink = ::memfd_create("kembed-discarded", MFD_CLOEXEC);
        if (sink >= 0) {
          ::dup2(sink, *static_cast<int*>(handle));
          ::close(sink);
        }
      }
    }
    datasets.clear();
    file.close();
    h5::error_text();
  }
};

StreamingFile::StreamingFile(std::string path) : impl_(std::make_unique<Impl>(std::move(path))) {
  h5::Handle fapl = h5::compatible_fapl();
  h5::Handle fcpl = h5::reproducible_fcpl();
  impl_->file = h5::file(H5Fcreate(impl_->out.temp_path().c_str(), H5F_ACC_TRUNC, fcpl, fapl));
  if (!impl_->file.valid()) throw std::runtime_error("cannot create it: " + h5::error_text());
}

StreamingFile::~StreamingFile() = default;

hid_t StreamingFile::root() const {
  return impl_->file;
}

void StreamingFile::create(char const* name, hid_t file_type, std::int64_t rows, std::int64_t cols,
                           SaveOptions const& options) {
  impl_->datasets.emplace_back(name, create_matrix(impl_->file, name, file_type, rows, cols, options));
}

void StreamingFile::write_rows(char const* name, hid_t mem_type, std::int64_t first, std::int64_t count,
                               void const* data) {
  write_block(impl_->dataset(name), name, mem_type, first, count, data);
}

void StreamingFile::close() {
  if (!impl_->file.valid()) return;
  // Flushed while the file can still be discarded; only a clean file is closed.
  if (H5Fflush(impl_->file, H5F_SCOPE_LOCAL) < 0) throw std::runtime_error("flushing it failed: " + h5::error_text());
  impl_->datasets.clear();
  if (H5Fclose(impl_->file.get()) < 0) throw std::runtime_error("closing it failed: " + h5::error_text());
  impl_->file.release();
}

std::string const& StreamingFile::temp_path() const {
  return impl_->out.temp_path();
}

void StreamingFile::sync_so_far() {
  if (H5Fflush(impl_->file, H5F_SCOPE_LOCAL) < 0) throw std::runtime_error("flushing it failed: " + h5::error_text());
  impl_->out.sync_so_far();
}

void StreamingFile::start_writeback() {
#if defined(__linux__)
  if (impl_->writeback_fd < 0) impl_->writeback_fd = ::open(impl_->out.temp_path().c_str(), O_RDONLY | O_CLOEXEC);
  if (impl_->writeback_fd >= 0) ::sync_file_range(impl_->writeback_fd, 0, 0, SYNC_FILE_RANGE_WRITE);  // a hint only
#endif
}

void StreamingFile::commit() {
  close();
  impl_->committed = true;
  impl_->out.commit();
}

}  // namespace kembed::io::detail
