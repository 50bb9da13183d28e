#include "s3_sign.h"

#include <algorithm>

namespace autopar {

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

std::string S3Url(std::string_view scheme_host, std::string_view path, const HttpFields& query) {
  std::string url(scheme_host);
  url += AwsUriEncode(path.empty() ? "/" : path, /*keep_slash=*/true);
  HttpFields encoded;
  for (const auto& [k, v] : query) encoded.emplace_back(AwsUriEncode(k, false), AwsUriEncode(v, false));
  std::sort(encoded.begin(), encoded.end());
  for (size_t i = 0; i < encoded.size(); ++i) {
    url += (i ? "&" : "?") + encoded[i].first + "=" + encoded[i].second;
  }
  return url;
}

curl_slist* S3Headers(const HttpFields& headers, std::string_view payload_hash,
                      const S3Credentials& credentials) {
  curl_slist* list = nullptr;
  auto add = [&list](std::string_view name, std::string_view value) {
    list = curl_slist_append(list, (std::string(name) + ": " + std::string(value)).c_str());
  };
  for (const auto& [k, v] : headers) add(k, v);
  if (!payload_hash.empty()) add("x-amz-content-sha256", payload_hash);
  if (!credentials.session_token.empty()) add("x-amz-security-token", credentials.session_token);
  return list;
}

void SignWithSigV4(CURL* handle, const S3Credentials& credentials, const std::string& region,
                   const std::string& service) {
  std::string provider = "aws:amz:" + region + ":" + service;
  curl_easy_setopt(handle, CURLOPT_AWS_SIGV4, provider.c_str());  // curl copies string options
  curl_easy_setopt(handle, CURLOPT_USERNAME, credentials.access_key_id.c_str());
  curl_easy_setopt(handle, CURLOPT_PASSWORD, credentials.secret_access_key.c_str());
}

}  // namespace autopar
