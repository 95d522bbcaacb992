#include <kembed/job/paths.hpp>

#include <kembed/core/error.hpp>
#include <kembed/io/error.hpp>

#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace kembed::job {
namespace {

std::string folder_of(std::string const& path) {
  auto const slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string name_of(std::string const& path) {
  auto const slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The absolute path with its folder resolved (links, "..", "."), or "" if the folder is missing.
std::string resolved(std::string const& path) {
  char buffer[PATH_MAX];
  if (!::realpath(folder_of(path).c_str(), buffer)) return "";
  std::string const folder = buffer;
  return (folder == "/" ? "" : folder) + "/" + name_of(path);
}

}  // namespace

bool path_exists(std::string const& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

bool same_file(std::string const& a, std::string const& b) {
  struct stat sa {
  }, sb{};
  bool const has_a = ::stat(a.c_str(), &sa) == 0, has_b = ::stat(b.c_str(), &sb) == 0;
  if (has_a && has_b) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (has_a != has_b) return false;
  auto const ra = resolved(a), rb = resolved(b);
  return !ra.empty() && ra == rb;
}

void check_output_path(std::string const& option, std::string const& path) {
  if (path.empty() || path.back() == '/')
    throw InvalidArgument(option, option + " '" + path + "' names a folder; give a file name");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw InvalidArgument(option, option + " " + path + " is a folder; give a file name");
  auto const folder = folder_of(path);
  if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw io::IoFailure(path, "cannot be written: its folder " + folder + " does not exist");
  if (::access(folder.c_str(), W_OK) != 0)
    throw io::IoFailure(path,
                        "cannot be written: its folder " + folder + " is not writable (" + std::strerror(errno) + ")");
}

}  // namespace kembed::job
