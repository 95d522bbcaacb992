#pragma once
// SHA-256 (FIPS 180-4), for fingerprints that other tools can recompute: a run
// file's gradient and the inputs a run read.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kembed::io {

class Sha256 {
 public:
  Sha256() noexcept;
  void update(void const* data, std::size_t bytes) noexcept;
  std::array<std::uint8_t, 32> digest() noexcept;  // ends this hash
  std::string hex_digest();                        // lower-case hex of digest()

 private:
  void block(std::uint8_t const* p) noexcept;
  std::array<std::uint32_t, 8> h_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t used_ = 0;
  std::uint64_t length_ = 0;
};

std::string sha256_hex(void const* data, std::size_t bytes);
// SHA-256 of a whole file's bytes, read in blocks; throws FileError if unreadable.
std::string sha256_file(std::string const& path, std::int64_t* bytes = nullptr);

}  // namespace kembed::io
