#include <kembed/io/error.hpp>
#include <kembed/io/sha256.hpp>

#include <openssl/evp.h>

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

}  // namespace kembed::io
