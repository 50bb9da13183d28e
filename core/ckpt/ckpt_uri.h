// Checkpoint upload URIs (`--ckpt-upload=URI`): where a job's checkpoints are stored.
//
//   s3://BUCKET[/PREFIX]      an S3 bucket (endpoint, region and credentials come from autopard's
//                             config, never from the URI or the job's environment)
//   file:///ABSOLUTE/PATH     a directory on a shared filesystem
//
// Pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "autopar/status.h"

namespace autopar {

struct CheckpointUri {
  enum class Kind { kS3, kFile };
  Kind kind = Kind::kFile;
  std::string bucket;  // kS3: the bucket name
  std::string prefix;  // kS3: key prefix, no leading or trailing '/', may be empty
  std::string path;    // kFile: absolute directory path, no trailing '/'

  // The canonical text: "s3://bucket/prefix", "s3://bucket", "file:///abs/path".
  std::string ToString() const;
  bool operator==(const CheckpointUri& o) const {
    return kind == o.kind && bucket == o.bucket && prefix == o.prefix && path == o.path;
  }
};

// Parses and normalises (drops trailing '/'). Errors name the option and the reason, e.g.
// "--ckpt-upload: invalid bucket name 'A_B' in 's3://A_B/x': use 3-63 lowercase letters, digits,
// '.' and '-'". Rejects empty, '.' and '..' path segments, control characters, and file:// URIs
// with a host or a relative path.
Result<CheckpointUri> ParseCheckpointUri(std::string_view text);

}  // namespace autopar
