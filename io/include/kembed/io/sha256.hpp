#pragma once
// SHA-256 (FIPS 180-4), for fingerprints that other tools can recompute: a run
// file's gradient and the inputs a run read. Computed by OpenSSL's libcrypto, which
// uses the CPU's SHA instructions where it has them (about 5x a portable loop).
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kembed::io {

class Sha256 {
 public:
  Sha256();  // throws std::bad_alloc if libcrypto cannot make a context
  ~Sha256();
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&& other) noexcept;
  Sha256(Sha256 const&) = delete;
  Sha256& operator=(Sha256 const&) = delete;

  void update(void const* data, std::size_t bytes);
  std::array<std::uint8_t, 32> digest();  // ends this hash
  std::string hex_digest();               // lower-case hex of digest()

 private:
  void* context_ = nullptr;  // libcrypto's EVP_MD_CTX, kept out of this header
};

std::string sha256_hex(void const* data, std::size_t bytes);
// SHA-256 of a whole file's bytes, read in blocks; throws FileError if unreadable.
std::string sha256_file(std::string const& path, std::int64_t* bytes = nullptr);

}  // namespace kembed::io
