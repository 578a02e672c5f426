#include "core/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "core/file_util.h"

namespace deepgrid::internal {

struct Sha256::Context {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  bool ok = md != nullptr && EVP_DigestInit_ex(md, EVP_sha256(), nullptr) == 1;
  ~Context() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Context>()) {}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

bool Sha256::ok() const { return ctx_->ok; }

void Sha256::update(const void* bytes, size_t n) {
  if (ctx_->ok) ctx_->ok = EVP_DigestUpdate(ctx_->md, bytes, n) == 1;
}

std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!ctx_->ok || EVP_DigestFinal_ex(ctx_->md, digest, &len) != 1) return "";
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

Result<std::string> sha256_of_file(int fd, const std::string& path) {
  Sha256 sha;
  if (!sha.ok()) return Status(ErrorCode::kResource, "cannot initialise SHA-256");
  std::vector<char> buf(1 << 20);
  for (off_t at = 0;;) {
    const ssize_t got = ::pread(fd, buf.data(), buf.size(), at);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno_status(errno, "read", path, at);
    if (got == 0) break;
    sha.update(buf.data(), static_cast<size_t>(got));
    at += got;
  }
  std::string hex = sha.hex();
  if (hex.empty()) return Status(ErrorCode::kResource, "SHA-256 of " + path + " failed");
  return hex;
}

Result<std::string> sha256_of_path(const std::string& path) {
  OwnedFd file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0) return errno_status(errno, "open", path);
  return sha256_of_file(file.fd, path);
}

bool is_sha256_hex(const std::string& text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace deepgrid::internal
