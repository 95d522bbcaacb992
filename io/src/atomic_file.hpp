#pragma once
// Writes that never leave a half-written file under the final name: the data go
// to a temporary file in the target's folder, which is synced and renamed over the
// target (then the folder is synced). Until commit() the target is untouched; a
// destroyed, uncommitted AtomicFile removes its temporary file.
#include <string>

namespace kembed::io {

class AtomicFile {
 public:
  explicit AtomicFile(std::string target);  // throws IoFailure
  ~AtomicFile();
  AtomicFile(AtomicFile const&) = delete;
  AtomicFile& operator=(AtomicFile const&) = delete;

  std::string const& temp_path() const noexcept { return temp_; }
  void commit();  // fsync, rename, fsync the folder; throws IoFailure

 private:
  std::string target_, temp_;
  bool committed_ = false;
};

}  // namespace kembed::io
