#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/ckpt/sha256.h"

namespace autopar {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr);
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::Update(const void* data, size_t size) {
  if (size > 0) EVP_DigestUpdate(impl_->ctx, data, size);
}

Sha256Digest Sha256::Finish() {
  Sha256Digest out{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, out.data(), &len);
  EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr);
  return out;
}

std::string Sha256::FinishHex() { return HexEncode(Finish()); }

Sha256Digest Sha256Of(std::string_view data) {
  Sha256Digest out{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr);
  return out;
}

std::string Sha256Hex(std::string_view data) { return HexEncode(Sha256Of(data)); }

Result<std::string> Sha256FileHex(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error(path + ": " + std::strerror(errno));
  Sha256 hash;
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return Status::Error(path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    hash.Update(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return hash.FinishHex();
}

Md5Digest Md5Of(std::string_view data) {
  Md5Digest out{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_md5(), nullptr);
  return out;
}

std::string HexEncode(const uint8_t* data, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

bool IsLowerHex(std::string_view s, size_t digits) {
  if (s.size() != digits) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string Base64Encode(const uint8_t* data, size_t size) {
  std::string out(4 * ((size + 2) / 3), '\0');
  int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(size));
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<std::string> Base64Decode(std::string_view text) {
  static const Status kInvalid = Status::Error("invalid base64");
  if (text.size() % 4 != 0) return kInvalid;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/' || (c == '=' && i + 2 >= text.size());
    if (!ok) return kInvalid;
  }
  if (text.size() >= 2 && text[text.size() - 2] == '=' && text.back() != '=') return kInvalid;
  std::string out(text.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return kInvalid;
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') ++pad;
  if (text.size() >= 2 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

}  // namespace autopar
