#include "atomic_file.hpp"

#include <kembed/io/error.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace kembed::io {
namespace {

std::string name_of(std::string const& path) {
  auto const slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string errno_text() {
  return std::strerror(errno);
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || !host[0]) return "host";
  std::string out = host;
  for (auto& c : out)
    if (c == '/' || c == '.') c = '_';  // the name's fields are split on dots
  return out;
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

// Removes `.<name>.tmp.<host>.<pid>.XXXXXX` files left in `folder` by processes of
// this host that have ended. A pid that runs again (even reused) keeps its file.
void remove_stale_temporaries(std::string const& folder, std::string const& name, std::string const& host) {
  std::string const prefix = "." + name + ".tmp." + host + ".";
  DIR* dir = ::opendir(folder.c_str());
  if (!dir) return;
  while (dirent* entry = ::readdir(dir)) {
    std::string const file = entry->d_name;
    if (file.compare(0, prefix.size(), prefix) != 0) continue;
    char* end = nullptr;
    long const pid = std::strtol(file.c_str() + prefix.size(), &end, 10);
    if (pid <= 0 || !end || *end != '.' || std::strlen(end + 1) != 6) continue;
    if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // still running (or not ours to judge)
    std::string const path = folder + "/" + file;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid()) ::unlink(path.c_str());
  }
  ::closedir(dir);
}

}  // namespace

std::string folder_of(std::string const& path) {
  auto const slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

AtomicFile::AtomicFile(std::string target) : target_(std::move(target)) {
  auto const name = name_of(target_);
  if (name.empty()) throw IoFailure(target_, "is a folder, not a file name");
  auto const folder = folder_of(target_);
  auto const host = host_name();
  remove_stale_temporaries(folder, name, host);
  std::string pattern = folder + "/." + name + ".tmp." + host + "." + std::to_string(::getpid()) + ".XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  int const fd = ::mkstemp(buffer.data());
  if (fd < 0) throw IoFailure(target_, "cannot create a temporary file in " + folder + ": " + errno_text());
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

void AtomicFile::sync_so_far() {
  sync_path(temp_, O_RDONLY, "the new file");
}

void AtomicFile::commit() {
  sync_path(temp_, O_RDONLY, "the new file");
  if (::rename(temp_.c_str(), target_.c_str()) != 0)
    throw IoFailure(target_, "cannot rename " + temp_ + " over it: " + errno_text());
  committed_ = true;
  sync_path(folder_of(target_), O_RDONLY | O_DIRECTORY, "its folder");
}

}  // namespace kembed::io
