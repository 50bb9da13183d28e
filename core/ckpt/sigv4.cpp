#include "core/ckpt/sigv4.h"

#include <algorithm>
#include <ctime>
#include <map>

#include "core/ckpt/sha256.h"

namespace autopar {
namespace {

std::string LowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Trims and collapses runs of spaces/tabs to one space (AWS: "Trimall").
std::string TrimAll(std::string_view v) {
  std::string out;
  bool in_space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      in_space = true;
      continue;
    }
    if (in_space && !out.empty()) out += ' ';
    in_space = false;
    out += c;
  }
  return out;
}

}  // namespace

std::string AwsUriEncode(std::string_view s, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3);
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

std::string AmzDate(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string SigV4CanonicalRequest(const SigV4Request& request, std::string* signed_headers) {
  std::string out = request.method + "\n";
  out += AwsUriEncode(request.path.empty() ? "/" : request.path, /*keep_slash=*/true) + "\n";

  std::vector<std::pair<std::string, std::string>> query;
  query.reserve(request.query.size());
  for (const auto& [k, v] : request.query) {
    query.emplace_back(AwsUriEncode(k, false), AwsUriEncode(v, false));
  }
  std::sort(query.begin(), query.end());
  for (size_t i = 0; i < query.size(); ++i) {
    if (i) out += '&';
    out += query[i].first + "=" + query[i].second;
  }
  out += "\n";

  std::map<std::string, std::string> headers;  // sorted by lowercase name
  for (const auto& [k, v] : request.headers) {
    std::string name = LowerAscii(k);
    auto it = headers.find(name);
    if (it == headers.end()) {
      headers.emplace(name, TrimAll(v));
    } else {
      it->second += "," + TrimAll(v);
    }
  }
  std::string names;
  for (const auto& [k, v] : headers) {
    out += k + ":" + v + "\n";
    if (!names.empty()) names += ';';
    names += k;
  }
  out += "\n" + names + "\n" + request.payload_hash;
  if (signed_headers) *signed_headers = names;
  return out;
}

std::string SigV4StringToSign(std::string_view amz_date, std::string_view region,
                              std::string_view service, std::string_view canonical_request) {
  std::string out = "AWS4-HMAC-SHA256\n";
  out += amz_date;
  out += "\n";
  out += amz_date.substr(0, 8);
  out += "/";
  out += region;
  out += "/";
  out += service;
  out += "/aws4_request\n";
  out += Sha256Hex(canonical_request);
  return out;
}

std::array<uint8_t, 32> SigV4SigningKey(std::string_view secret_access_key, std::string_view date,
                                        std::string_view region, std::string_view service) {
  std::string k = "AWS4";
  k += secret_access_key;
  auto k_date = HmacSha256(k, date);
  auto as_view = [](const std::array<uint8_t, 32>& a) {
    return std::string_view(reinterpret_cast<const char*>(a.data()), a.size());
  };
  auto k_region = HmacSha256(as_view(k_date), region);
  auto k_service = HmacSha256(as_view(k_region), service);
  return HmacSha256(as_view(k_service), "aws4_request");
}

SigV4Result SigV4Sign(const SigV4Request& request, const SigV4Credentials& credentials,
                      std::string_view region, std::string_view service,
                      std::string_view amz_date) {
  SigV4Result r;
  r.canonical_request = SigV4CanonicalRequest(request, &r.signed_headers);
  r.string_to_sign = SigV4StringToSign(amz_date, region, service, r.canonical_request);
  std::string_view date = amz_date.substr(0, 8);
  auto key = SigV4SigningKey(credentials.secret_access_key, date, region, service);
  r.signature = HexEncode(HmacSha256(
      std::string_view(reinterpret_cast<const char*>(key.data()), key.size()), r.string_to_sign));
  r.authorization = "AWS4-HMAC-SHA256 Credential=" + credentials.access_key_id + "/" +
                    std::string(date) + "/" + std::string(region) + "/" + std::string(service) +
                    "/aws4_request, SignedHeaders=" + r.signed_headers +
                    ", Signature=" + r.signature;
  return r;
}

}  // namespace autopar
