#pragma once
// Writes that never leave a half-written file under the final name, nor a
// temporary file that stays for good. The data go to `.<name>.tmp.<host>.<pid>.XXXXXX`
// in the target's folder, which is synced and renamed over the target (then the
// folder is synced). Until commit() the target is untouched; a destroyed, uncommitted
// AtomicFile removes its temporary file, and one left by a killed process is removed
// by the next write of the same target on that host. (An unnamed O_TMPFILE would
// leave nothing at all, but HDF5 1.10 refuses to open one by its /proc path.)
#include <string>

namespace kembed::io {

// The folder part of a path ("." for a bare name, "/" for a file at the root).
std::string folder_of(std::string const& path);

class AtomicFile {
 public:
  explicit AtomicFile(std::string target);  // throws IoFailure
  ~AtomicFile();
  AtomicFile(AtomicFile const&) = delete;
  AtomicFile& operator=(AtomicFile const&) = delete;

  std::string const& temp_path() const noexcept { return temp_; }
  void commit();  // fsync, rename over the target, fsync the folder; throws IoFailure
  // fsync of what is written so far, so that commit() has less left to wait for.
  void sync_so_far();

 private:
  std::string target_, temp_;
  bool committed_ = false;
};

}  // namespace kembed::io
