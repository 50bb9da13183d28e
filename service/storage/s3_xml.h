// The few S3 XML documents autopar reads and writes (private to service/storage).
// A deliberately small scanner: S3 responses are flat, machine-written documents; it finds
// elements by name and never evaluates DTDs or entities beyond the five predefined ones and
// numeric character references. Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ckpt/storage.h"

namespace autopar::s3xml {

std::string Escape(std::string_view text);
std::string Unescape(std::string_view text);

// The inner text of every <tag>...</tag> (also <tag attr="...">), raw (not unescaped), in order.
std::vector<std::string_view> All(std::string_view xml, std::string_view tag);
// The unescaped text of the first <tag>...</tag>; nullopt when there is none.
std::optional<std::string> First(std::string_view xml, std::string_view tag);

struct ListPage {
  std::vector<ObjectInfo> objects;  // full keys, as the server sent them
  bool truncated = false;
  std::string next_token;
};
// ListObjectsV2's ListBucketResult. ETags lose their quotes.
ListPage ParseListV2(std::string_view xml);

struct S3Error {
  std::string code;
  std::string message;
  std::string key;  // DeleteObjects errors only
};
// The <Error> document of a failed request (also sent with HTTP 200 by CompleteMultipartUpload).
std::optional<S3Error> ParseError(std::string_view xml);
// The <Error> entries of a DeleteObjects <DeleteResult>.
std::vector<S3Error> ParseDeleteErrors(std::string_view xml);

std::string CompleteMultipartBody(const std::vector<std::string>& part_etags);
std::string DeleteObjectsBody(const std::vector<std::string>& full_keys);

std::string StripQuotes(std::string_view etag);

}  // namespace autopar::s3xml
