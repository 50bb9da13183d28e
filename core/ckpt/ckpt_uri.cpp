#include "core/ckpt/ckpt_uri.h"

#include <vector>

namespace autopar {
namespace {

Status Invalid(std::string_view text, const std::string& reason) {
  return Status::Error("--ckpt-upload: " + reason + " in '" + std::string(text) +
                       "': expected s3://BUCKET[/PREFIX] or file:///ABSOLUTE/PATH");
}

bool ValidBucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(b.front()) || !alnum(b.back())) return false;
  for (char c : b) {
    if (!alnum(c) && c != '.' && c != '-') return false;
  }
  return b.find("..") == std::string_view::npos;
}

// Checks '/'-separated segments of `path` (no leading '/'); returns the reason or "".
std::string CheckSegments(std::string_view path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view seg = path.substr(start, end - start);
    if (seg.empty()) return "empty path segment";
    if (seg == "." || seg == "..") return "'" + std::string(seg) + "' path segment";
    for (char c : seg) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "control character";
    }
    start = end + 1;
  }
  return "";
}

std::string_view StripTrailingSlashes(std::string_view s) {
  while (!s.empty() && s.back() == '/') s.remove_suffix(1);
  return s;
}

}  // namespace

std::string CheckpointUri::ToString() const {
  if (kind == Kind::kS3) return "s3://" + bucket + (prefix.empty() ? "" : "/" + prefix);
  return "file://" + path;
}

Result<CheckpointUri> ParseCheckpointUri(std::string_view text) {
  CheckpointUri uri;
  if (text.empty())
    return Status::Error(
        "--ckpt-upload: empty URI: expected s3://BUCKET[/PREFIX] or file:///ABSOLUTE/PATH");
  if (text.substr(0, 5) == "s3://") {
    std::string_view rest = text.substr(5);
    size_t slash = rest.find('/');
    std::string_view bucket = rest.substr(0, slash);
    if (bucket.empty()) return Invalid(text, "missing bucket name");
    if (!ValidBucket(bucket)) {
      return Invalid(text, "invalid bucket name '" + std::string(bucket) +
                               "' (use 3-63 lowercase letters, digits, '.' and '-')");
    }
    uri.kind = CheckpointUri::Kind::kS3;
    uri.bucket = std::string(bucket);
    if (slash != std::string_view::npos) {
      std::string_view prefix = StripTrailingSlashes(rest.substr(slash + 1));
      if (!prefix.empty()) {
        std::string why = CheckSegments(prefix);
        if (!why.empty()) return Invalid(text, "invalid key prefix (" + why + ")");
        uri.prefix = std::string(prefix);
      }
    }
    return uri;
  }
  if (text.substr(0, 7) == "file://") {
    std::string_view rest = text.substr(7);
    if (rest.empty() || rest.front() != '/') {
      return Invalid(text, "file URI needs an absolute path (three slashes, no host)");
    }
    std::string_view path = StripTrailingSlashes(rest);
    if (path.empty()) return Invalid(text, "the root directory is not a checkpoint directory");
    std::string why = CheckSegments(path.substr(1));
    if (!why.empty()) return Invalid(text, "invalid path (" + why + ")");
    uri.kind = CheckpointUri::Kind::kFile;
    uri.path = std::string(path);
    return uri;
  }
  size_t colon = text.find("://");
  if (colon != std::string_view::npos) {
    return Invalid(text, "unsupported scheme '" + std::string(text.substr(0, colon)) + "'");
  }
  return Invalid(text, "not a URI");
}

}  // namespace autopar
