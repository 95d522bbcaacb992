#pragma once
// A thin RAII layer over the HDF5 C API, private to kembed_io (HDF5's C++ API is
// slated for removal in HDF5 2.0). Handles close themselves; HDF5's automatic
// error printing is off while kembed works, and its error stack is turned into
// our messages instead.
#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kembed::io::h5 {

class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)), close_(other.close_) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
      close_ = other.close_;
    }
    return *this;
  }
  Handle(Handle const&) = delete;
  Handle& operator=(Handle const&) = delete;
  ~Handle() { reset(); }

  hid_t get() const noexcept { return id_; }
  operator hid_t() const noexcept { return id_; }
  bool valid() const noexcept { return id_ >= 0; }
  // Gives the id up without closing it (it was closed elsewhere).
  hid_t release() noexcept { return std::exchange(id_, H5I_INVALID_HID); }
  // Closes now and reports whether HDF5 managed to (a file's close flushes it).
  bool close() noexcept {
    if (id_ < 0) return true;
    bool const ok = close_(id_) >= 0;
    id_ = H5I_INVALID_HID;
    return ok;
  }

 private:
  void reset() noexcept {
    if (id_ >= 0) close_(id_);
    id_ = H5I_INVALID_HID;
  }
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

inline Handle file(hid_t id) {
  return {id, H5Fclose};
}
inline Handle group(hid_t id) {
  return {id, H5Gclose};
}
inline Handle dataset(hid_t id) {
  return {id, H5Dclose};
}
inline Handle dataspace(hid_t id) {
  return {id, H5Sclose};
}
inline Handle datatype(hid_t id) {
  return {id, H5Tclose};
}
inline Handle attribute(hid_t id) {
  return {id, H5Aclose};
}
inline Handle plist(hid_t id) {
  return {id, H5Pclose};
}

// Turns HDF5's automatic error printing off for its lifetime (restored after).
class Quiet {
 public:
  Quiet();
  ~Quiet();
  Quiet(Quiet const&) = delete;
  Quiet& operator=(Quiet const&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// The innermost messages of HDF5's current error stack, for our error text.
std::string error_text();

// A file access property list that writes formats HDF5 1.8+ (and so 1.10) reads.
Handle compatible_fapl();
// A file creation property list without object timestamps (so the same content
// gives the same bytes) and with the root's attributes kept in creation order.
Handle reproducible_fcpl();

// Attributes (scalar): strings are variable-length UTF-8, as h5py writes them.
void write_string(hid_t obj, char const* name, std::string const& value);
void write_int64(hid_t obj, char const* name, std::int64_t value);
void write_double(hid_t obj, char const* name, double value);
// Whether the attribute exists; throws when the file cannot say (damaged metadata).
bool has_attribute(hid_t obj, char const* name);
// Read an attribute holding exactly one value; nullopt when absent. Class, size and
// point count are checked before anything is read: an array, an empty or null space,
// or another type throws std::runtime_error naming the attribute (the caller adds
// the file).
std::optional<std::string> read_string(hid_t obj, char const* name);
std::optional<std::int64_t> read_int64(hid_t obj, char const* name);
std::optional<double> read_double(hid_t obj, char const* name);

// A scalar string dataset (for long provenance texts).
void write_string_dataset(hid_t loc, char const* name, std::string const& value);
// Reads a dataset holding one string, checked as the attribute readers are.
std::string read_string_dataset(hid_t loc, char const* name);

// Names of an object's attributes and of a group's links, in creation order where
// the file tracks it, else by name.
std::vector<std::string> attribute_names(hid_t obj);
std::vector<std::string> link_names(hid_t group);

// Whether `path` names an existing object (every link on the way must exist); throws
// std::runtime_error where the file cannot say (damaged metadata), which is not absence.
bool exists(hid_t file, std::string const& path);

// A type's kind in words for errors: "32-bit integers", "64-bit floats", "strings".
std::string describe_type(hid_t type);

}  // namespace kembed::io::h5
