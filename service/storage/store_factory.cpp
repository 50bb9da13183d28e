#include "service/storage/storage_backends.h"

namespace autopar {

Result<std::unique_ptr<ObjectStore>> OpenObjectStore(const CheckpointUri& uri, const S3Config& s3,
                                                     const PosixConfig& posix) {
  if (uri.kind == CheckpointUri::Kind::kS3) return MakeS3Store(uri, s3);
  return MakePosixStore(uri, posix);
}

}  // namespace autopar
