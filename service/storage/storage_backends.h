// The storage backends behind autopar::ObjectStore (storage.h), implemented in service/storage
// (static library autopar_storage; only autopard and test/bench tools link it).
//
//  * S3 (s3://bucket/prefix): libcurl, path-style URLs (endpoint/bucket/key), every request signed
//    with SigV4 by libcurl (s3_sign.h) and carrying x-amz-content-sha256 (UNSIGNED-PAYLOAD for part and object
//    bodies unless `sign_payload`, the SHA-256 of small XML bodies otherwise) and Content-MD5 for
//    bodies; part/object ETags are checked against the MD5. Errors are classified for retry:
//    connection errors, timeouts and stalls, HTTP 5xx/429/408, RequestTimeout and BadDigest are
//    retryable; other 4xx are fatal; 404 NoSuchKey/NoSuchUpload are kNotFound.
//    One curl easy handle per concurrent request, reused (keep-alive) through a small pool.
//  * POSIX (file:///dir): objects are files under dir, read and written with the identity of
//    PosixConfig (the job's owner), never through a symlink below dir. Whole objects and multipart uploads are
//    written to a temporary name beside the target ("<name>.autopar-tmp-<id>"), fsync'ed, renamed
//    into place, and the directory fsync'ed; parts are written in place with pwrite, so the
//    transfer engine's parallel parts make a parallel copy. Temporaries are invisible to List.
//
// Credentials live only in S3Config (from autopard's root-only config file); they are never read
// from the environment and never appear in messages.
//
// Thread safety: the stores are safe to call from several threads at once (storage.h).
#pragma once

#include <memory>
#include <string>

#include "core/ckpt/ckpt_uri.h"
#include "autopar/status.h"
#include "core/ckpt/storage.h"
#include "service/user_access/user_fs.h"

namespace autopar {

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // optional (temporary credentials): sent as x-amz-security-token
};

struct S3Config {
  std::string endpoint;  // "http://127.0.0.1:18900" or "https://s3.eu-west-1.amazonaws.com"
  std::string region = "us-east-1";
  S3Credentials credentials;
  // true: x-amz-content-sha256 is the SHA-256 of each part (CPU-bound on large uploads);
  // false: UNSIGNED-PAYLOAD, each body still protected by Content-MD5.
  bool sign_payload = false;
  // true: every body carries Content-MD5 and part/object ETags are checked against it (the
  // caller hashes every byte with MD5; the slowest step on a busy client). false: no MD5 (use
  // sign_payload for a server-checked SHA-256 per part instead); UsesMd5() then says false.
  bool content_md5 = true;
  long connect_timeout_ms = 5000;
  // A request that moves fewer than 1 KiB/s for this long fails (retryably).
  long stall_timeout_s = 30;
  bool verify_tls = true;
  std::string ca_file;  // optional CA bundle for https endpoints
};

struct PosixConfig {
  bool fsync = true;  // fsync files and directories (off only for benchmarks on tmpfs)
  // Whose rights every operation has (AsUser): the job's owner for a user's store, so that
  // autopard reads, writes and deletes there exactly what that user may and the objects are
  // theirs. uid 0: the process's own (a site's store, such as journal_uri).
  UserIdentity identity;
};

// Errors name the option/field: "s3 endpoint: ..." for a malformed endpoint, "s3 credentials: ..."
// when the access key or secret is empty; "--ckpt-upload: ..." for a URI of the wrong kind.
Result<std::unique_ptr<ObjectStore>> MakeS3Store(const CheckpointUri& uri, const S3Config& config);
Result<std::unique_ptr<ObjectStore>> MakePosixStore(const CheckpointUri& uri,
                                                    const PosixConfig& config);
// The backend for the URI's kind.
Result<std::unique_ptr<ObjectStore>> OpenObjectStore(const CheckpointUri& uri, const S3Config& s3,
                                                     const PosixConfig& posix);

}  // namespace autopar
