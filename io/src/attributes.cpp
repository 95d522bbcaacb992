// Attributes: the ones a format requires, the padding rule, and the identity every
// kembed file starts with.
#include "attributes.hpp"

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
template <class Read>
auto required(std::string const& path, char const* name, Read&& read) {
  try {
    if (auto value = read()) return *value;
  } catch (std::exception const& e) {
    throw FileError(path, "", e.what());
  }
  throw FileError(path, "", std::string("has no attribute '") + name + "'");
}
}  // namespace

std::int64_t required_int64(hid_t obj, std::string const& path, char const* name) {
  return required(path, name, [&] { return h5::read_int64(obj, name); });
}

std::string required_string(hid_t obj, std::string const& path, char const* name) {
  return required(path, name, [&] { return h5::read_string(obj, name); });
}

namespace {
template <class Parse>
auto recorded(std::string const& path, char const* attribute, std::string const& text, Parse parse) {
  try {
    return parse(text);
  } catch (InvalidArgument const&) {
    throw FileError(path, "",
                    "attribute '" + std::string(attribute) + "' holds '" + text +
                        "', which kembed never writes: the file is damaged or was edited");
  }
}
}  // namespace

void write_settings(hid_t obj, std::optional<Plan> plan, Mode mode, FreqScale scale) {
  if (plan) h5::write_string(obj, "plan", std::string(to_string(*plan)));
  h5::write_string(obj, "numeric_mode", std::string(to_string(mode)));
  if (scale != FreqScale::none) h5::write_string(obj, "scale_grad_by_freq", std::string(to_string(scale)));
}

Plan recorded_plan(hid_t obj, std::string const& path) {
  return recorded(path, "plan", required_string(obj, path, "plan"), parse_plan);
}
Mode recorded_mode(hid_t obj, std::string const& path) {
  return recorded(path, "numeric_mode", required_string(obj, path, "numeric_mode"), parse_mode);
}
FreqScale recorded_scale(hid_t obj, std::string const& path) {
  auto const text = h5::read_string(obj, "scale_grad_by_freq");
  return text ? recorded(path, "scale_grad_by_freq", *text, parse_freq_scale) : FreqScale::none;
}

void write_pooling(hid_t obj, std::optional<Pooling> pooling, std::int64_t bags) {
  if (!pooling) return;
  h5::write_string(obj, "pooling", std::string(to_string(*pooling)));
  h5::write_int64(obj, "bags", bags);
}
std::optional<Pooling> recorded_pooling(hid_t obj, std::string const& path) {
  auto const text = h5::read_string(obj, "pooling");
  if (!text) return std::nullopt;
  return recorded(path, "pooling", *text, parse_pooling);
}
std::int64_t recorded_bags(hid_t obj, std::string const& path, std::optional<Pooling> pooling) {
  if (!pooling) return 0;
  auto const bags = required_int64(obj, path, "bags");
  if (bags < 0) throw FileError(path, "", "records bags = " + std::to_string(bags) + "; a count is >= 0");
  return bags;
}

void check_padding_to_store(char const* what, std::int64_t value, std::int64_t rows) {
  if (value == -1 || (value >= 0 && value < rows)) return;
  throw InvalidArgument("padding_idx", std::string(what) + " has padding_idx " + std::to_string(value) +
                                           "; files store the padding row normalised, in [0, " + std::to_string(rows) +
                                           "), or -1 for none (make_config normalises)");
}

std::int64_t stored_padding_idx(std::string const& path, std::int64_t value, std::int64_t rows) {
  if (value == -1 || (value >= 0 && value < rows)) return value;
  throw FileError(path, "",
                  "its padding_idx is " + std::to_string(value) +
                      ", but a kembed file stores the padding row as a row number in [0, " + std::to_string(rows) +
                      ") or -1 for none");
}

void write_identity(hid_t root, char const* format, SaveOptions const* created_by) {
  h5::write_string(root, "format", format);
  h5::write_string(root, "kembed_version", KEMBED_VERSION_STRING);
  if (created_by)
    h5::write_string(root, "created_by", created_by->created_by.empty() ? own_command_line() : created_by->created_by);
  if (created_by && !created_by->provenance.empty()) h5::write_string(root, "provenance", created_by->provenance);
}

std::string own_command_line() {
  std::FILE* f = std::fopen("/proc/self/cmdline", "rb");
  if (!f) return "";
  std::string text;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) text.append(buffer, n);
  std::fclose(f);
  while (!text.empty() && text.back() == '\0') text.pop_back();
  for (auto& c : text)
    if (c == '\0') c = ' ';
  return text;
}

std::string utc_now_iso8601() {
  std::time_t const now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace kembed::io::detail
