// AWS Signature Version 4 (header-based), as used by the S3 backend.
//
// Reference: "Signature Version 4 signing process" (AWS General Reference) and "Authenticating
// Requests: Using the Authorization Header" (Amazon S3 API Reference). The steps are exposed one
// by one (canonical request, string to sign, signing key, signature) so each is tested against
// AWS's published test-suite vectors (core/ckpt/sigv4_test.cpp).
//
// Paths are URI-encoded exactly once with '/' kept, which is what S3 expects (other AWS services
// encode the path twice; autopar signs only S3 requests).
//
// Pure functions, no I/O, thread-safe. Secrets are only used as HMAC keys; nothing here logs.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace autopar {

// The payload hash for requests whose body is not hashed (x-amz-content-sha256: UNSIGNED-PAYLOAD).
inline constexpr const char* kUnsignedPayload = "UNSIGNED-PAYLOAD";
// SHA-256 of the empty string: the payload hash of a request without a body.
inline constexpr const char* kEmptyPayloadSha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct SigV4Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // optional; when set the caller sends x-amz-security-token
};

struct SigV4Request {
  std::string method;  // "GET", "PUT", ...
  std::string path;    // raw (not encoded) absolute path, e.g. "/bucket/job-1/a b.pt"
  // Raw (not encoded) query parameters in any order; a parameter without value has "".
  std::vector<std::pair<std::string, std::string>> query;
  // Headers to sign, any case and order; must include "host" and "x-amz-date". Duplicate names
  // are joined with ',' in the order given.
  std::vector<std::pair<std::string, std::string>> headers;
  // Hex SHA-256 of the body, kEmptyPayloadSha256, or kUnsignedPayload.
  std::string payload_hash = kEmptyPayloadSha256;
};

struct SigV4Result {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signed_headers;  // "host;x-amz-date"
  std::string signature;       // lowercase hex
  std::string authorization;   // the Authorization header value
};

// RFC 3986 encoding as AWS specifies it: A-Z a-z 0-9 - . _ ~ stay, every other byte becomes %XX
// (uppercase hex). '/' stays when `keep_slash`.
std::string AwsUriEncode(std::string_view s, bool keep_slash);

// "20150830T123600Z" for a point in time (UTC).
std::string AmzDate(std::chrono::system_clock::time_point t);

// Step 1: the canonical request (and, through `signed_headers`, the signed header list).
std::string SigV4CanonicalRequest(const SigV4Request& request, std::string* signed_headers);
// Step 2: "AWS4-HMAC-SHA256\n<amz_date>\n<date>/<region>/<service>/aws4_request\n<hex sha256>".
std::string SigV4StringToSign(std::string_view amz_date, std::string_view region,
                              std::string_view service, std::string_view canonical_request);
// Step 3: HMAC chain "AWS4"+secret -> date -> region -> service -> "aws4_request".
std::array<uint8_t, 32> SigV4SigningKey(std::string_view secret_access_key, std::string_view date,
                                        std::string_view region, std::string_view service);
// All steps. `amz_date` must equal the request's x-amz-date header (the caller sets both).
SigV4Result SigV4Sign(const SigV4Request& request, const SigV4Credentials& credentials,
                      std::string_view region, std::string_view service, std::string_view amz_date);

}  // namespace autopar
