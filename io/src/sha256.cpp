#include <kembed/io/error.hpp>
#include <kembed/io/sha256.hpp>

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

namespace kembed::io {
namespace {
EVP_MD_CTX* ctx(void* p) {
  return static_cast<EVP_MD_CTX*>(p);
}
void require(int ok, char const* what) {
  if (ok != 1) throw std::runtime_error(std::string("SHA-256: libcrypto's ") + what + " failed");
}
}  // namespace

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (!context_) throw std::bad_alloc();
  if (EVP_DigestInit_ex(ctx(context_), EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx(context_));
    throw std::runtime_error("SHA-256: libcrypto's EVP_DigestInit_ex failed");
  }
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(ctx(context_));
}

Sha256::Sha256(Sha256&& other) noexcept : context_(std::exchange(other.context_, nullptr)) {}

Sha256& Sha256::operator=(Sha256&& other) noexcept {
  if (this != &other) {
    EVP_MD_CTX_free(ctx(context_));
    context_ = std::exchange(other.context_, nullptr);
  }
  return *this;
}

void Sha256::update(void const* data, std::size_t bytes) {
  if (bytes) require(EVP_DigestUpdate(ctx(context_), data, bytes), "EVP_DigestUpdate");
}

std::array<std::uint8_t, 32> Sha256::digest() {
  std::array<std::uint8_t, 32> out{};
  unsigned int n = 0;
  require(EVP_DigestFinal_ex(ctx(context_), out.data(), &n), "EVP_DigestFinal_ex");
  return out;
}

std::string Sha256::hex_digest() {
  static char const digits[] = "0123456789abcdef";
  std::string hex;
  for (auto const b : digest()) {
    hex += digits[b >> 4];
    hex += digits[b & 15];
  }
  return hex;
}

std::string sha256_hex(void const* data, std::size_t bytes) {
  Sha256 h;
  h.update(data, bytes);
  return h.hex_digest();
}

std::string sha256_file(std::string const& path, std::int64_t* bytes) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw FileError(path, "", std::string("cannot be read: ") + std::strerror(errno));
  Sha256 h;
  std::vector<unsigned char> buffer(1 << 20);
  std::int64_t total = 0;
  std::size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), f)) > 0) {
    h.update(buffer.data(), n);
    total += static_cast<std::int64_t>(n);
  }
  bool const failed = std::ferror(f);
  std::fclose(f);
  if (failed) throw FileError(path, "", "reading failed part-way");
  if (bytes) *bytes = total;
  return h.hex_digest();
}

std::string_view to_string(Fingerprint kind) {
  return kind == Fingerprint::chunks ? "chunks" : "file";
}

Fingerprint parse_fingerprint(std::string const& text, std::string const& setting) {
  if (text == "chunks") return Fingerprint::chunks;
  if (text == "file") return Fingerprint::file;
  throw InvalidArgument(setting, setting + " must be chunks or file, got '" + text + "'");
}

std::int64_t file_bytes(std::string const& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw FileError(path, "", std::string("cannot be read: ") + std::strerror(errno));
  return static_cast<std::int64_t>(st.st_size);
}

std::pair<std::int64_t, std::int64_t> chunks_of(std::int64_t bytes, int ranks, int rank) {
  std::int64_t const n = (bytes + fingerprint_chunk_bytes - 1) / fingerprint_chunk_bytes;
  return {n * rank / ranks, n * (rank + 1) / ranks};
}

std::string sha256_of_chunks(std::string const& path, std::int64_t first, std::int64_t end) {
  int const fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FileError(path, "", std::string("cannot be read: ") + std::strerror(errno));
  std::string digests;
  std::vector<unsigned char> buffer(1 << 20);
  bool failed = false;
  for (std::int64_t c = first; c < end && !failed; ++c) {
    Sha256 h;
    for (std::int64_t at = c * fingerprint_chunk_bytes, left = fingerprint_chunk_bytes; left > 0;) {
      auto const n = ::pread(fd, buffer.data(), std::size_t(std::min<std::int64_t>(left, std::int64_t(buffer.size()))),
                             static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // the end of the file (the last chunk is shorter), or an error
        failed = n < 0 || c + 1 < end;
        break;
      }
      h.update(buffer.data(), std::size_t(n));
      at += n, left -= n;
    }
    auto const d = h.digest();
    digests.append(reinterpret_cast<char const*>(d.data()), d.size());
  }
  ::close(fd);
  if (failed) throw FileError(path, "", "reading failed part-way (or the file shrank while it was hashed)");
  return digests;
}

std::string fingerprint_file(std::string const& path, Fingerprint kind, std::int64_t* bytes) {
  if (kind == Fingerprint::file) return sha256_file(path, bytes);
  auto const size = file_bytes(path);
  auto const [first, end] = chunks_of(size, 1, 0);
  auto const digests = sha256_of_chunks(path, first, end);
  if (bytes) *bytes = size;
  return sha256_hex(digests.data(), digests.size());
}

}  // namespace kembed::io
