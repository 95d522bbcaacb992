#pragma once
// SHA-256 (FIPS 180-4), for fingerprints that other tools can recompute: a run
// file's gradient and the inputs a run read. Computed by OpenSSL's libcrypto, which
// uses the CPU's SHA instructions where it has them (about 5x a portable loop).
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

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

// How a job fingerprints its input files (docs/FORMAT.md). `chunks`: SHA-256 over
// the SHA-256 digests (32 bytes each, in file order) of the file's 16 MiB chunks, the
// last one shorter; many ranks hash their own chunks, and the value does not depend
// on how many. `file`: SHA-256 of the whole file, as sha256sum prints it (files
// written before chunks, and on request).
enum class Fingerprint { chunks, file };
inline constexpr std::int64_t fingerprint_chunk_bytes = std::int64_t{1} << 24;
std::string_view to_string(Fingerprint kind);
// "chunks" or "file"; anything else is InvalidArgument naming `setting`.
Fingerprint parse_fingerprint(std::string const& text, std::string const& setting = "fingerprint");

// A file's size in bytes; throws FileError if it cannot be read.
std::int64_t file_bytes(std::string const& path);
// Chunks [first, end) of a file of `bytes` bytes that rank `rank` of `ranks` hashes:
// consecutive runs of chunks, in rank order.
std::pair<std::int64_t, std::int64_t> chunks_of(std::int64_t bytes, int ranks, int rank);
// The binary SHA-256 digests (32 bytes each, in order) of chunks [first, end).
std::string sha256_of_chunks(std::string const& path, std::int64_t first, std::int64_t end);
// One process's fingerprint of a whole file (`chunks`: of sha256_of_chunks of every chunk).
std::string fingerprint_file(std::string const& path, Fingerprint kind, std::int64_t* bytes = nullptr);

}  // namespace kembed::io
