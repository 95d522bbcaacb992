#pragma once
// Opening a file to read (open and validate): a missing, foreign or damaged file
// told apart, its format tag checked, memory checked before a read needs it, and
// the frame that makes any failure while reading a FileError naming the file.
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

// Refuses `bytes` beyond this machine's memory: "needs N GiB <what>, more than ...".
void check_memory(std::string const& path, std::string const& name, double bytes, std::string const& what);
// Refuses rows x cols float32 that overflow 64 bits or exceed this machine's memory.
void check_size(std::string const& path, std::string const& name, std::int64_t rows, std::int64_t cols,
                std::int64_t element_bytes);

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

}  // namespace kembed::io::detail
