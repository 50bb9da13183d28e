// The few S3 XML documents autopar reads and writes (private to service/storage), over tinyxml2
// (Debian's libtinyxml2). tinyxml2 reads no DTD and expands only the five predefined entities and
// numeric character references, so a reply cannot make the daemon fetch or expand anything.
// Each reader checks the document's root element and returns nullopt (or an empty list) for
// anything else: a reply that is not the document asked for is never read as an empty one.
// Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ckpt/storage.h"

namespace autopar::s3xml {

struct ListPage {
  std::vector<ObjectInfo> objects;  // full keys, as the server sent them
  bool truncated = false;
  std::string next_token;
};
// ListObjectsV2's <ListBucketResult>. ETags lose their quotes.
std::optional<ListPage> ParseListV2(std::string_view xml);

// CreateMultipartUpload's <InitiateMultipartUploadResult><UploadId>.
std::optional<std::string> ParseUploadId(std::string_view xml);
// CompleteMultipartUpload's <CompleteMultipartUploadResult><ETag>, without quotes.
std::optional<std::string> ParseCompletedEtag(std::string_view xml);

struct S3Error {
  std::string code;
  std::string message;
  std::string key;  // DeleteObjects errors only
};
// An <Error> document (a failed request; CompleteMultipartUpload may send one with HTTP 200).
std::optional<S3Error> ParseError(std::string_view xml);
// The <Error> entries of a DeleteObjects <DeleteResult>.
std::vector<S3Error> ParseDeleteErrors(std::string_view xml);

std::string CompleteMultipartBody(const std::vector<std::string>& part_etags);
std::string DeleteObjectsBody(const std::vector<std::string>& full_keys);

std::string StripQuotes(std::string_view etag);

}  // namespace autopar::s3xml
