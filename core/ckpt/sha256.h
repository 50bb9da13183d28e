// Digests and encodings used by checkpoints and the S3 backend: SHA-256 (streaming and
// one-shot), MD5 (S3's ETag of a part and Content-MD5), hex and base64.
//
// All are thin wrappers over OpenSSL's EVP interface (libcrypto). Free functions are pure and
// thread-safe. A Sha256 object is thread-compatible: one thread at a time per object.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "autopar/status.h"

namespace autopar {

using Sha256Digest = std::array<uint8_t, 32>;
using Md5Digest = std::array<uint8_t, 16>;

// Streaming SHA-256: Update() any number of times, then Finish() once. After Finish() the object
// is reset and can hash a new message.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  Sha256Digest Finish();
  std::string FinishHex();  // lowercase hex, 64 characters

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);
Sha256Digest Sha256Of(std::string_view data);

// SHA-256 of a whole file, read in 1 MiB blocks. Error: "<path>: <strerror>".
Result<std::string> Sha256FileHex(const std::string& path);

// MD5 of `data` (S3 uses it for ETags and Content-MD5; not for security).
Md5Digest Md5Of(std::string_view data);

// Lowercase hex of bytes.
std::string HexEncode(const uint8_t* data, size_t size);
template <size_t N>
std::string HexEncode(const std::array<uint8_t, N>& bytes) {
  return HexEncode(bytes.data(), bytes.size());
}
// True when `s` is exactly `digits` lowercase hex digits (a well-formed digest).
bool IsLowerHex(std::string_view s, size_t digits);

// Standard base64 with padding (RFC 4648 section 4).
std::string Base64Encode(const uint8_t* data, size_t size);
template <size_t N>
std::string Base64Encode(const std::array<uint8_t, N>& bytes) {
  return Base64Encode(bytes.data(), bytes.size());
}
// Decodes standard padded base64; error "invalid base64" on any malformed input.
Result<std::string> Base64Decode(std::string_view text);

}  // namespace autopar
