// Opening a file to read, telling a missing, foreign and damaged file apart; its
// format tag; and what this machine's memory can hold.
#include "open_file.hpp"
#include "collective_lists.hpp"

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

h5::Handle open_for_reading(std::string const& path, Collective const* collective) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw FileError(path, "", std::string("cannot be opened: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw FileError(path, "", "is a folder, not an HDF5 file");
  // A FIFO, socket or device would block or stream forever inside HDF5.
  if (!S_ISREG(st.st_mode))
    throw FileError(path, "",
                    std::string("is not a regular file (it is a ") +
                        (S_ISFIFO(st.st_mode)   ? "FIFO"
                         : S_ISSOCK(st.st_mode) ? "socket"
                         : S_ISCHR(st.st_mode)  ? "character device"
                         : S_ISBLK(st.st_mode)  ? "block device"
                                                : "special file") +
                        "); kembed reads HDF5 files");
  if (::access(path.c_str(), R_OK) != 0)
    throw FileError(path, "", std::string("cannot be read: ") + std::strerror(errno));
  htri_t const is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 <= 0) {
    h5::error_text();  // clear the stack
    throw FileError(path, "", "is not an HDF5 file (no HDF5 signature)");
  }
  // Collectively, every rank checks the same file above and opens it here together.
  h5::Handle const fapl = collective ? access_list(collective) : h5::Handle();
  h5::Handle file = h5::file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, collective ? fapl.get() : H5P_DEFAULT));
  if (!file.valid()) {
    auto const text = h5::error_text();
    // HDF5 1.10 locks files it opens; a writer elsewhere holds the lock.
    if (text.find("unable to lock") != std::string::npos)
      throw FileError(path, "",
                      "is locked: another program has it open for writing (HDF5: " + text +
                          "). Wait for it to finish, or close it there");
    throw FileError(path, "", "is an HDF5 file but cannot be opened; it is truncated or damaged (HDF5: " + text + ")");
  }
  return file;
}

namespace {
// Whether decimal `text` is a larger number than `value` (any length, no overflow).
bool greater_than(std::string text, int value) {
  text.erase(0, std::min(text.find_first_not_of('0'), text.size()));
  std::string const v = std::to_string(value);
  return text.size() != v.size() ? text.size() > v.size() : text > v;
}
}  // namespace

void check_format(hid_t file, std::string const& path, std::string const& family, int version, char const* what) {
  std::optional<std::string> tag;
  try {
    tag = h5::read_string(file, "format");
  } catch (std::exception const& e) {
    throw FileError(path, "", e.what());
  }
  std::string const want = family + "-" + std::to_string(version);
  if (!tag) {
    throw FileError(
        path, "",
        std::string("has no 'format' attribute, so it is not a kembed ") + what + " file (format '" + want + "')");
  }
  if (*tag == want) return;
  if (tag->empty())
    throw FileError(path, "",
                    "has an empty 'format' attribute; kembed never writes one, so the file is damaged (its strings "
                    "do not read back) or was not written by kembed");
  auto const dash = tag->rfind('-');
  std::string const tag_family = dash == std::string::npos ? *tag : tag->substr(0, dash);
  std::string const tag_version = dash == std::string::npos ? "" : tag->substr(dash + 1);
  bool const numeric = !tag_version.empty() && tag_version.find_first_not_of("0123456789") == std::string::npos;
  if (tag_family == family && numeric && greater_than(tag_version, version)) {
    throw FileError(path, "",
                    "was written by a newer kembed (format '" + *tag + "'); this kembed reads '" + want +
                        "': upgrade kembed to read it");
  }
  if (tag_family == "kembed-run" || tag_family == "kembed-embedding") {
    throw FileError(path, "",
                    "is a kembed " + std::string(tag_family == "kembed-run" ? "run" : "table") + " file (format '" +
                        *tag + "'), not a " + what + " file");
  }
  throw FileError(path, "", "has format '" + *tag + "', not '" + want + "'");
}

void check_size(std::string const& path, std::string const& name, std::int64_t rows, std::int64_t cols,
                std::int64_t element_bytes) {
  std::int64_t bytes = 0;
  try {
    bytes = checked_mul(checked_mul(rows, cols, "shape"), element_bytes, "shape");
  } catch (Error const&) {
    throw FileError(path, name,
                    "has shape (" + std::to_string(rows) + ", " + std::to_string(cols) +
                        "), whose size does not fit in 64 bits; the file is damaged or not a table");
  }
  char what[80];
  std::snprintf(what, sizeof what, "to load (shape (%lld, %lld))", static_cast<long long>(rows),
                static_cast<long long>(cols));
  check_memory(path, name, double(bytes), what);
}

void check_memory(std::string const& path, std::string const& name, double bytes, std::string const& what) {
  long const pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;
  double const memory = double(pages) * double(page);
  if (bytes <= memory) return;
  char text[96];
  std::snprintf(text, sizeof text, "needs %.1f GiB ", bytes / double(1ull << 30));
  char mem[64];
  std::snprintf(mem, sizeof mem, ", more than this machine's %.1f GiB", memory / double(1ull << 30));
  throw FileError(path, name, text + what + mem);
}

}  // namespace kembed::io::detail
