#include "atomic_file.hpp"

#include <kembed/io/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <vector>

namespace kembed::io {
namespace {

std::string folder_of(std::string const& path) {
  auto const slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string errno_text() {
  return std::strerror(errno);
}

void sync_path(std::string const& path, int flags, std::string const& what) {
  int const fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw IoFailure(path, "cannot open to sync " + what + ": " + errno_text());
  int const rc = ::fsync(fd);
  int const saved = errno;
  ::close(fd);
  errno = saved;
  if (rc != 0) throw IoFailure(path, "fsync of " + what + " failed: " + errno_text());
}

}  // namespace

AtomicFile::AtomicFile(std::string target) : target_(std::move(target)) {
  auto const slash = target_.rfind('/');
  auto const name = slash == std::string::npos ? target_ : target_.substr(slash + 1);
  if (name.empty()) throw IoFailure(target_, "is a folder, not a file name");
  std::string pattern = folder_of(target_) + "/." + name + ".tmp.XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  int const fd = ::mkstemp(buffer.data());
  if (fd < 0) throw IoFailure(target_, "cannot create a temporary file in " + folder_of(target_) + ": " + errno_text());
  // mkstemp makes the file 0600; give it the permissions any new file would get.
  mode_t const mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  ::close(fd);
  temp_ = buffer.data();
}

AtomicFile::~AtomicFile() {
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::commit() {
  sync_path(temp_, O_RDONLY, "the new file");
  if (::rename(temp_.c_str(), target_.c_str()) != 0)
    throw IoFailure(target_, "cannot rename " + temp_ + " over it: " + errno_text());
  committed_ = true;
  sync_path(folder_of(target_), O_RDONLY | O_DIRECTORY, "its folder");
}

}  // namespace kembed::io
