// SigV4 for S3 requests, signed by libcurl itself (CURLOPT_AWS_SIGV4; Debian 12 has libcurl 7.88).
// Private to service/storage.
//
// What libcurl 7.88 signs on its own: the method; the path and the query exactly as they are
// written in the URL; the Host header it sends; X-Amz-Date (it adds one from the clock, or signs
// the caller's); every header in CURLOPT_HTTPHEADER; and as payload hash the value of the caller's
// x-amz-content-sha256 header (a SHA-256 or UNSIGNED-PAYLOAD). The secret reaches curl as the
// password of the request and only ever leaves it as an HMAC key.
//
// What it does not do, and is therefore done here (curl 8.3 does the first two itself):
//  * canonicalise the query: 7.88 signs it as written, so S3Url writes it sorted by encoded
//    name, each name and value AWS-encoded, a parameter without value as "name=";
//  * encode the path: S3Url encodes it once, '/' kept, which is what S3 expects;
//  * join repeated header names into one "name:v1,v2" line, or leave out a "Name:" entry that
//    only removes one of curl's own headers (7.88 signs it as an empty header that is never sent).
//    S3Request's headers therefore never repeat a name or remove one: the 100-continue round trip
//    is avoided with CURLOPT_EXPECT_100_TIMEOUT_MS=0 instead of an "Expect:" entry;
//  * add x-amz-security-token for temporary credentials: S3Headers adds it (and so it is signed).
#pragma once

#include <curl/curl.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "storage_backends.h"

namespace autopar {

// The payload hash for requests whose body is not hashed (x-amz-content-sha256: UNSIGNED-PAYLOAD).
inline constexpr const char* kUnsignedPayload = "UNSIGNED-PAYLOAD";
// SHA-256 of the empty string: the payload hash of a request without a body.
inline constexpr const char* kEmptyPayloadSha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

using HttpFields = std::vector<std::pair<std::string, std::string>>;

// RFC 3986 encoding as AWS specifies it: A-Z a-z 0-9 - . _ ~ stay, every other byte becomes %XX
// (uppercase hex). '/' stays when `keep_slash`.
std::string AwsUriEncode(std::string_view s, bool keep_slash);

// "scheme://host" + the path encoded once + the canonical query: the URL as it must be signed.
// `path` and the query names and values are raw (not encoded).
std::string S3Url(std::string_view scheme_host, std::string_view path, const HttpFields& query);

// The header list of a request: `headers` (distinct names, none empty), x-amz-content-sha256 set to
// `payload_hash` (left out when empty: curl then hashes CURLOPT_POSTFIELDS itself), and
// x-amz-security-token when the credentials carry a session token. The caller frees it with
// curl_slist_free_all.
curl_slist* S3Headers(const HttpFields& headers, std::string_view payload_hash,
                      const S3Credentials& credentials);

// Makes curl sign the request on `handle` (after curl_easy_reset, before perform) with SigV4 for
// `region` and `service` ("s3").
void SignWithSigV4(CURL* handle, const S3Credentials& credentials, const std::string& region,
                   const std::string& service);

}  // namespace autopar
