// internal: SHA-256 (OpenSSL's libcrypto) as hex digests, of bytes streamed in or of a file.
#pragma once

#include <memory>
#include <string>

#include "deepgrid/status.h"

namespace deepgrid::internal {

// A SHA-256 being computed: update() with the bytes in order, then hex() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;

  bool ok() const;  // false when libcrypto could not set it up
  void update(const void* bytes, size_t n);
  std::string hex();  // 64 lowercase hex digits

 private:
  struct Context;
  std::unique_ptr<Context> ctx_;
};

// The SHA-256 of everything an open file holds (read from offset 0; `path` names it in errors).
Result<std::string> sha256_of_file(int fd, const std::string& path);

// The same of the file at `path` (opened, hashed, closed).
Result<std::string> sha256_of_path(const std::string& path);

// Whether `text` has the form of a hex SHA-256 (64 lowercase hex digits).
bool is_sha256_hex(const std::string& text);

}  // namespace deepgrid::internal
