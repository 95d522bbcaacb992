#include "h5.hpp"

#include <cstdlib>
#include <fstream>

#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace kembed::io::h5 {

Quiet::Quiet() {
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

Quiet::~Quiet() {
  H5Eset_auto2(H5E_DEFAULT, func_, data_);
}

namespace {
herr_t collect(unsigned n, H5E_error2_t const* e, void* out) {
  auto& text = *static_cast<std::string*>(out);
  if (e->desc && *e->desc) {
    std::string desc = e->desc;
    // A failed system call comes as several lines of driver state; the system's own
    // words ("No space left on device") are what a person needs.
    auto const at = desc.find("error message = '");
    if (at != std::string::npos) {
      auto const from = at + std::strlen("error message = '");
      desc = "file write failed: " + desc.substr(from, desc.find('\'', from) - from);
    }
    if (!text.empty()) text += "; ";
    text += desc;
  }
  return n >= 3 ? -1 : 0;  // the innermost three say what went wrong
}
}  // namespace

std::string error_text() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect, &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? "no detail from HDF5" : text;
}

Handle compatible_fapl() {
  Handle fapl = plist(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V110);
  return fapl;
}

Handle reproducible_fcpl() {
  Handle fcpl = plist(H5Pcreate(H5P_FILE_CREATE));
  H5Pset_obj_track_times(fcpl, false);
  H5Pset_attr_creation_order(fcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  return fcpl;
}

namespace {
Handle vlen_utf8() {
  Handle t = datatype(H5Tcopy(H5T_C_S1));
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

void check(herr_t status, char const* what) {
  if (status < 0) throw std::runtime_error(std::string(what) + ": " + error_text());
}

Handle create_attribute(hid_t obj, char const* name, hid_t type) {
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  Handle space = dataspace(H5Screate(H5S_SCALAR));
  Handle attr = attribute(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT));
  if (!attr.valid()) throw std::runtime_error(std::string("creating attribute '") + name + "': " + error_text());
  return attr;
}

// Fixed-length strings longer than this are refused before any buffer is sized by them.
constexpr std::size_t max_fixed_string = std::size_t{1} << 20;

// Reads one string from a string-typed attribute or dataset, fixed or variable
// length; `what` names it in errors. The caller has checked that it holds one value.
// `read(mem, buf)` reads it; a variable-length string read through `read` is
// released with `release` (the allocator `read` used).
template <class Read, class Release>
std::string read_one_string(std::string const& what, hid_t type, Read&& read, Release&& release) {
  if (H5Tget_class(type) != H5T_STRING)
    throw std::runtime_error(what + " holds " + describe_type(type) + ", not a string");
  if (H5Tis_variable_str(type) > 0) {
    // The memory type must carry the file's character set: HDF5 will not convert
    // between ASCII and UTF-8 variable-length strings.
    Handle mem = vlen_utf8();
    H5Tset_cset(mem, H5Tget_cset(type));
    char* value = nullptr;
    if (read(mem.get(), static_cast<void*>(&value)) < 0)
      throw std::runtime_error(what + " cannot be read: " + error_text());
    std::string out = value ? value : "";
    release(value);
    return out;
  }
  std::size_t const size = H5Tget_size(type);
  if (size == 0 || size > max_fixed_string)
    throw std::runtime_error(what + " is a fixed-length string of " + std::to_string(size) + " bytes");
  Handle mem = datatype(H5Tcopy(H5T_C_S1));
  H5Tset_cset(mem, H5Tget_cset(type));
  H5Tset_size(mem, size + 1);
  H5Tset_strpad(mem, H5T_STR_NULLTERM);
  std::string buffer(size + 1, '\0');
  if (read(mem.get(), static_cast<void*>(buffer.data())) < 0)
    throw std::runtime_error(what + " cannot be read: " + error_text());
  buffer.resize(std::char_traits<char>::length(buffer.c_str()));
  return buffer;
}

// HDF5 sizes a variable-length string's buffer by the length its file declares,
// before reading it: this allocator refuses one longer than the file itself.
struct VlenBound {
  std::size_t most = 0;
  std::size_t asked = 0;  // the refused size, or 0
};
void* bounded_alloc(std::size_t size, void* info) {
  auto* bound = static_cast<VlenBound*>(info);
  if (size > bound->most) {
    bound->asked = size;
    return nullptr;
  }
  return std::malloc(size);
}
void bounded_free(void* memory, void*) {
  std::free(memory);
}

// Refuses a dataspace that does not hold exactly one value (arrays, empty or null spaces).
void check_one_value(std::string const& what, hid_t space) {
  if (space < 0) throw std::runtime_error(what + " has an unreadable shape: " + error_text());
  if (H5Sget_simple_extent_type(space) == H5S_NULL) throw std::runtime_error(what + " has no value (a null dataspace)");
  hssize_t const n = H5Sget_simple_extent_npoints(space);
  if (n != 1)
    throw std::runtime_error(what + " holds " + (n < 0 ? std::string("an unreadable number of") : std::to_string(n)) +
                             " values, where kembed expects one");
}

// An attribute that exists and holds one value, opened with its type; nullopt when absent.
struct OneValue {
  std::string what;
  Handle attr, type;
};

std::optional<OneValue> open_one(hid_t obj, char const* name) {
  OneValue v;
  v.what = std::string("attribute '") + name + "'";
  htri_t const present = H5Aexists(obj, name);
  if (present < 0) throw std::runtime_error(v.what + " cannot be looked up (damaged metadata): " + error_text());
  if (present == 0) return std::nullopt;
  v.attr = attribute(H5Aopen(obj, name, H5P_DEFAULT));
  if (!v.attr.valid()) throw std::runtime_error(v.what + " cannot be opened: " + error_text());
  v.type = datatype(H5Aget_type(v.attr));
  if (!v.type.valid()) throw std::runtime_error(v.what + " has an unreadable type: " + error_text());
  Handle space = dataspace(H5Aget_space(v.attr));
  check_one_value(v.what, space);
  return v;
}
}  // namespace

void write_string(hid_t obj, char const* name, std::string const& value) {
  Handle type = vlen_utf8();
  Handle attr = create_attribute(obj, name, type);
  char const* p = value.c_str();
  check(H5Awrite(attr, type, &p), name);
}

void write_int64(hid_t obj, char const* name, std::int64_t value) {
  Handle attr = create_attribute(obj, name, H5T_STD_I64LE);
  check(H5Awrite(attr, H5T_NATIVE_INT64, &value), name);
}

void write_double(hid_t obj, char const* name, double value) {
  Handle attr = create_attribute(obj, name, H5T_IEEE_F64LE);
  check(H5Awrite(attr, H5T_NATIVE_DOUBLE, &value), name);
}

bool has_attribute(hid_t obj, char const* name) {
  htri_t const present = H5Aexists(obj, name);
  if (present < 0)
    throw std::runtime_error(std::string("attribute '") + name +
                             "' cannot be looked up (damaged metadata): " + error_text());
  return present > 0;
}

std::optional<std::string> read_string(hid_t obj, char const* name) {
  auto v = open_one(obj, name);
  if (!v) return std::nullopt;
  return read_one_string(
      v->what, v->type, [&](hid_t mem, void* buf) { return H5Aread(v->attr, mem, buf); },
      [](char* value) { H5free_memory(value); });
}

std::optional<std::int64_t> read_int64(hid_t obj, char const* name) {
  auto v = open_one(obj, name);
  if (!v) return std::nullopt;
  if (H5Tget_class(v->type) != H5T_INTEGER || H5Tget_size(v->type) > 8)
    throw std::runtime_error(v->what + " holds " + describe_type(v->type) + ", not an integer of 64 bits or fewer");
  if (H5Tget_sign(v->type) == H5T_SGN_NONE && H5Tget_size(v->type) == 8) {
    std::uint64_t value = 0;
    if (H5Aread(v->attr, H5T_NATIVE_UINT64, &value) < 0)
      throw std::runtime_error(v->what + " cannot be read: " + error_text());
    if (value > std::uint64_t(INT64_MAX))
      throw std::runtime_error(v->what + " holds " + std::to_string(value) + ", beyond 64-bit signed integers");
    return static_cast<std::int64_t>(value);
  }
  std::int64_t value = 0;
  if (H5Aread(v->attr, H5T_NATIVE_INT64, &value) < 0)
    throw std::runtime_error(v->what + " cannot be read: " + error_text());
  return value;
}

std::optional<double> read_double(hid_t obj, char const* name) {
  auto v = open_one(obj, name);
  if (!v) return std::nullopt;
  auto const cls = H5Tget_class(v->type);
  if ((cls != H5T_FLOAT && cls != H5T_INTEGER) || H5Tget_size(v->type) > 16)
    throw std::runtime_error(v->what + " holds " + describe_type(v->type) + ", not a number");
  double value = 0;
  if (H5Aread(v->attr, H5T_NATIVE_DOUBLE, &value) < 0)
    throw std::runtime_error(v->what + " cannot be read: " + error_text());
  return value;
}

void write_string_dataset(hid_t loc, char const* name, std::string const& value) {
  Handle type = vlen_utf8();
  Handle space = dataspace(H5Screate(H5S_SCALAR));
  Handle dcpl = plist(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_obj_track_times(dcpl, false);
  Handle dset = dataset(H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  if (!dset.valid()) throw std::runtime_error(std::string("creating dataset '") + name + "': " + error_text());
  char const* p = value.c_str();
  check(H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &p), name);
}

std::string read_string_dataset(hid_t loc, char const* name) {
  std::string const what = std::string("dataset '") + name + "'";
  htri_t const present = H5Lexists(loc, name, H5P_DEFAULT);
  if (present < 0) throw std::runtime_error(what + " cannot be looked up (damaged metadata): " + error_text());
  if (present == 0) throw std::runtime_error(what + " does not exist");
  Handle dset = dataset(H5Dopen2(loc, name, H5P_DEFAULT));
  if (!dset.valid()) throw std::runtime_error(what + " cannot be opened: " + error_text());
  Handle type = datatype(H5Dget_type(dset));
  if (!type.valid()) throw std::runtime_error(what + " has an unreadable type: " + error_text());
  Handle space = dataspace(H5Dget_space(dset));
  check_one_value(what, space);
  // A string is never longer than the file it is stored in (plus its terminator).
  hsize_t file_bytes = 0;
  std::string file_name;
  {
    hid_t const file = H5Iget_file_id(dset);
    if (file < 0 || H5Fget_filesize(file, &file_bytes) < 0) file_bytes = 0;
    ssize_t const n = file < 0 ? -1 : H5Fget_name(file, nullptr, 0);
    if (n > 0) file_name.resize(std::size_t(n) + 1), H5Fget_name(file, file_name.data(), file_name.size());
    file_name.resize(n > 0 ? std::size_t(n) : 0);
    if (file >= 0) H5Fclose(file);
  }
  auto refuse = [&](std::uint64_t declared) {
    return std::runtime_error(what + " declares a string of " + std::to_string(declared) + " bytes in a file of " +
                              std::to_string(file_bytes) + " bytes; the file is damaged (refused before HDF5 " +
                              "allocates for it)");
  };
  if (H5Tis_variable_str(type) > 0) {
    // HDF5 sizes its conversion buffer by the length the file declares before any
    // allocator of ours is asked: read that length (the first 4 bytes, little-endian,
    // of the stored descriptor) from the file's own bytes first, where it is contiguous.
    haddr_t const at = H5Dget_offset(dset);
    if (at != HADDR_UNDEF && !file_name.empty()) {
      unsigned char length[4] = {};
      std::ifstream in(file_name, std::ios::binary);
      in.seekg(std::streamoff(at));
      if (in.read(reinterpret_cast<char*>(length), 4)) {
        std::uint64_t const declared = std::uint64_t(length[0]) | std::uint64_t(length[1]) << 8 |
                                       std::uint64_t(length[2]) << 16 | std::uint64_t(length[3]) << 24;
        if (declared > file_bytes) throw refuse(declared);
      }
    }
  }
  // Elsewhere (a compact layout) the allocator HDF5 is given refuses what the file
  // cannot hold, for the string itself.
  VlenBound bound;
  bound.most = std::size_t(file_bytes) + 1;
  Handle transfer = plist(H5Pcreate(H5P_DATASET_XFER));
  H5Pset_vlen_mem_manager(transfer, bounded_alloc, &bound, bounded_free, nullptr);
  try {
    return read_one_string(
        what, type, [&](hid_t mem, void* buf) { return H5Dread(dset, mem, H5S_ALL, H5S_ALL, transfer, buf); },
        [](char* value) { std::free(value); });
  } catch (std::runtime_error const&) {
    if (bound.asked == 0) throw;
    throw refuse(bound.asked - 1);
  }
}

namespace {
#if H5_VERSION_GE(1, 12, 0)
herr_t add_link_name(hid_t, char const* name, H5L_info2_t const*, void* out) {
#else
herr_t add_link_name(hid_t, char const* name, H5L_info_t const*, void* out) {
#endif
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}
herr_t add_attribute_name(hid_t, char const* name, H5A_info_t const*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}
}  // namespace

std::vector<std::string> attribute_names(hid_t obj) {
  std::vector<std::string> names;
  hsize_t index = 0;
  if (H5Aiterate2(obj, H5_INDEX_CRT_ORDER, H5_ITER_INC, &index, add_attribute_name, &names) < 0) {
    error_text();  // no creation order here: by name
    names.clear();
    index = 0;
    H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &index, add_attribute_name, &names);
  }
  return names;
}

std::vector<std::string> link_names(hid_t group) {
  std::vector<std::string> names;
  hsize_t index = 0;
  if (H5Literate(group, H5_INDEX_CRT_ORDER, H5_ITER_INC, &index, add_link_name, &names) < 0) {
    error_text();
    names.clear();
    index = 0;
    H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &index, add_link_name, &names);
  }
  return names;
}

bool exists(hid_t file, std::string const& path) {
  // A lookup that fails is damage, not absence: it throws.
  auto linked = [&](std::string const& part) {
    htri_t const found = H5Lexists(file, part.c_str(), H5P_DEFAULT);
    if (found < 0) throw std::runtime_error("'" + part + "' cannot be looked up (damaged metadata): " + error_text());
    return found > 0;
  };
  // Each link on the way must exist before H5Oexists_by_name may be asked.
  std::size_t pos = 0;
  while ((pos = path.find('/', pos + 1)) != std::string::npos) {
    auto const part = path.substr(0, pos);
    if (part.empty() || part == "/") continue;
    if (!linked(part)) return false;
  }
  if (path.empty() || path == "/") return true;
  if (!linked(path)) return false;
  htri_t const object = H5Oexists_by_name(file, path.c_str(), H5P_DEFAULT);
  if (object < 0) throw std::runtime_error("'" + path + "' cannot be opened (damaged metadata): " + error_text());
  return object > 0;
}

std::string describe_type(hid_t type) {
  auto const bits = std::to_string(8 * H5Tget_size(type));
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return bits + "-bit integers";
    case H5T_FLOAT:
      return bits + "-bit floats";
    case H5T_STRING:
      return "strings";
    case H5T_COMPOUND:
      return "compound records";
    case H5T_ENUM:
      return "enumerations";
    case H5T_BITFIELD:
      return "bitfields";
    case H5T_OPAQUE:
      return "opaque data";
    case H5T_REFERENCE:
      return "references";
    case H5T_ARRAY:
      return "arrays";
    case H5T_VLEN:
      return "variable-length sequences";
    case H5T_TIME:
      return "times";
    default:
      return "data of an unknown type";
  }
}

}  // namespace kembed::io::h5
