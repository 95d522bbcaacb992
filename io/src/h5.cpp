#include "h5.hpp"

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
    if (!text.empty()) text += "; ";
    text += e->desc;
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

// Reads a string from a string-typed attribute or dataset, fixed or variable length.
template <class Read>
std::string read_any_string(hid_t type, Read&& read) {
  if (H5Tget_class(type) != H5T_STRING) throw std::runtime_error("holds " + describe_type(type) + ", not a string");
  if (H5Tis_variable_str(type) > 0) {
    // The memory type must carry the file's character set: HDF5 will not convert
    // between ASCII and UTF-8 variable-length strings.
    Handle mem = vlen_utf8();
    H5Tset_cset(mem, H5Tget_cset(type));
    char* value = nullptr;
    check(read(mem.get(), static_cast<void*>(&value)), "reading a string");
    std::string out = value ? value : "";
    H5free_memory(value);
    return out;
  }
  std::size_t const size = H5Tget_size(type);
  Handle mem = datatype(H5Tcopy(H5T_C_S1));
  H5Tset_cset(mem, H5Tget_cset(type));
  H5Tset_size(mem, size + 1);
  H5Tset_strpad(mem, H5T_STR_NULLTERM);
  std::string buffer(size + 1, '\0');
  check(read(mem.get(), static_cast<void*>(buffer.data())), "reading a string");
  buffer.resize(std::char_traits<char>::length(buffer.c_str()));
  return buffer;
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
  return H5Aexists(obj, name) > 0;
}

std::optional<std::string> read_string(hid_t obj, char const* name) {
  if (!has_attribute(obj, name)) return std::nullopt;
  Handle attr = attribute(H5Aopen(obj, name, H5P_DEFAULT));
  Handle type = datatype(H5Aget_type(attr));
  return read_any_string(type, [&](hid_t mem, void* buf) { return H5Aread(attr, mem, buf); });
}

std::optional<std::int64_t> read_int64(hid_t obj, char const* name) {
  if (!has_attribute(obj, name)) return std::nullopt;
  Handle attr = attribute(H5Aopen(obj, name, H5P_DEFAULT));
  Handle type = datatype(H5Aget_type(attr));
  Handle space = dataspace(H5Aget_space(attr));
  if (H5Tget_class(type) != H5T_INTEGER) throw std::runtime_error("holds " + describe_type(type) + ", not an integer");
  if (H5Sget_simple_extent_npoints(space) != 1) throw std::runtime_error("is not a single value");
  std::int64_t value = 0;
  check(H5Aread(attr, H5T_NATIVE_INT64, &value), name);
  return value;
}

std::optional<double> read_double(hid_t obj, char const* name) {
  if (!has_attribute(obj, name)) return std::nullopt;
  Handle attr = attribute(H5Aopen(obj, name, H5P_DEFAULT));
  Handle type = datatype(H5Aget_type(attr));
  if (H5Tget_class(type) != H5T_FLOAT && H5Tget_class(type) != H5T_INTEGER)
    throw std::runtime_error("holds " + describe_type(type) + ", not a number");
  double value = 0;
  check(H5Aread(attr, H5T_NATIVE_DOUBLE, &value), name);
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
  Handle dset = dataset(H5Dopen2(loc, name, H5P_DEFAULT));
  if (!dset.valid()) throw std::runtime_error(std::string("no dataset '") + name + "'");
  Handle type = datatype(H5Dget_type(dset));
  return read_any_string(type,
                         [&](hid_t mem, void* buf) { return H5Dread(dset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf); });
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
  // Each link on the way must exist before H5Oexists_by_name may be asked.
  std::size_t pos = 0;
  while ((pos = path.find('/', pos + 1)) != std::string::npos) {
    auto const part = path.substr(0, pos);
    if (part.empty() || part == "/") continue;
    if (H5Lexists(file, part.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  if (path.empty() || path == "/") return true;
  if (H5Lexists(file, path.c_str(), H5P_DEFAULT) <= 0) return false;
  return H5Oexists_by_name(file, path.c_str(), H5P_DEFAULT) > 0;
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
