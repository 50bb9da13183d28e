#include "launcher/nccl_bootstrap.h"

#include <algorithm>

namespace autopar {

Result<std::string> BootstrapKey(const std::string& tag) {
  if (tag.empty() || tag.size() > 64) {
    return Status::Error("communicator tag '" + tag + "': must be 1 to 64 characters");
  }
  for (char c : tag) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) {
      return Status::Error("communicator tag '" + tag + "': character '" + std::string(1, c) +
                           "' is not one of [A-Za-z0-9._-]");
    }
  }
  return "autopar.nccl.id." + tag;
}

std::string EncodeBootstrapId(const std::vector<uint8_t>& id) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "apid1:";
  out.reserve(6 + 2 * id.size());
  for (uint8_t b : id) {
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

Result<std::vector<uint8_t>> DecodeBootstrapId(const std::string& text, size_t expected_bytes) {
  static const std::string kPrefix = "apid1:";
  if (text.compare(0, kPrefix.size(), kPrefix) != 0) {
    return Status::Error("bootstrap id: does not start with '" + kPrefix + "'");
  }
  std::string hex = text.substr(kPrefix.size());
  if (hex.size() % 2 != 0) return Status::Error("bootstrap id: odd number of hex digits");
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::vector<uint8_t> out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return Status::Error("bootstrap id: character is not hex");
    out.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  if (expected_bytes != 0 && out.size() != expected_bytes) {
    return Status::Error("bootstrap id: " + std::to_string(out.size()) + " bytes, expected " +
                         std::to_string(expected_bytes));
  }
  return out;
}

double AllReduceBusBandwidthGBs(size_t bytes, double seconds, int nranks) {
  if (nranks < 1 || seconds <= 0) return 0;
  double algbw = static_cast<double>(bytes) / seconds / 1e9;
  return algbw * 2.0 * (nranks - 1) / nranks;
}

std::vector<size_t> PreflightSizes(size_t min_bytes, size_t max_bytes) {
  auto pow2 = [](size_t v) {
    size_t p = 4;
    while (p < v) p <<= 1;
    return p;
  };
  std::vector<size_t> out;
  size_t hi = pow2(max_bytes);
  for (size_t s = pow2(min_bytes); s <= hi; s <<= 1) out.push_back(s);
  return out;
}

std::vector<NodeBandwidth> SlowNodes(const std::vector<NodeBandwidth>& nodes, double ratio) {
  if (nodes.size() < 2) return {};
  std::vector<double> v;
  for (const auto& n : nodes) v.push_back(n.busbw_gbs);
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  double median = v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  std::vector<NodeBandwidth> out;
  for (const auto& n : nodes) {
    if (n.busbw_gbs < ratio * median) out.push_back(n);
  }
  return out;
}

}  // namespace autopar
