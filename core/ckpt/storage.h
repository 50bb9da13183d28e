// Object storage for checkpoints: one small interface (ObjectStore) that every backend implements,
// and the transfer engine on top of it (parallel multipart upload with retries and abort, parallel
// ranged download with SHA-256 verification, prefix listing and deletion).
//
// Backends (service/storage, storage_backends.h): S3 over libcurl (SigV4 signed by libcurl), and a POSIX
// directory (file://). They implement single requests only; everything that is policy (part
// size, concurrency, retry/backoff, abort on failure, checksums, progress, cancellation) lives in
// the transfer functions below, in the pure core, where tests drive it with an in-memory store.
// Tests inject failures by wrapping a store (ObjectStoreWrapper: e.g. fail the 3rd part once).
//
// Keys are relative to the store's root (the URI's prefix or directory), '/'-separated, as made by
// ckpt_layout.h.
//
// Thread safety: ObjectStore implementations must be safe to call from several threads at once
// (the transfer functions call them from their worker threads). Transfer functions are reentrant.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/ckpt/ckpt_backoff.h"
#include "core/ckpt/sha256.h"
#include "autopar/status.h"

namespace autopar {

// The outcome of one storage request.
struct StoreStatus {
  enum class Code {
    kOk,
    kRetryable,  // may succeed when tried again: timeout, connection error, HTTP 5xx/429, EINTR...
    kNotFound,   // the object (or upload) does not exist
    kFatal,      // will not succeed by retrying: HTTP 4xx, bad checksum, ENOSPC, EACCES...
  };
  Code code = Code::kOk;
  std::string message;  // names the key/object and the reason; empty when OK; never a secret

  bool ok() const { return code == Code::kOk; }
  static StoreStatus Ok() { return {}; }
  static StoreStatus Retryable(std::string m) { return {Code::kRetryable, std::move(m)}; }
  static StoreStatus NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static StoreStatus Fatal(std::string m) { return {Code::kFatal, std::move(m)}; }
  Status ToStatus() const { return ok() ? Status::Ok() : Status::Error(message); }
  Attempt ToAttempt() const { return {ToStatus(), code == Code::kRetryable}; }
};

struct ObjectInfo {
  std::string key;  // relative to the store's root
  uint64_t size = 0;
  std::string etag;  // as the store reports it, quotes removed; may be empty
};

// Receives downloaded bytes: `data` belongs at byte `offset` of the object. Return false to stop
// (the request then fails with kFatal). Called from the calling thread of GetRange.
using RangeSink = std::function<bool(uint64_t offset, const char* data, size_t size)>;

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // "s3://bucket/prefix" or "file:///dir": for messages; never contains credentials.
  virtual std::string Describe() const = 0;

  // Whether the `md5` arguments below are used (S3: Content-MD5 and ETag checks). When false,
  // callers may pass a zero digest and save hashing every byte (the POSIX store).
  virtual bool UsesMd5() const { return true; }

  // Optional file-range variants of PutObject/UploadPart: the bytes [file_offset, +length) of the
  // open file `fd` (read with pread; the caller keeps it open). A store that returns true from
  // ReadsFiles() implements both without a user-space buffer (POSIX: copy_file_range in the
  // kernel; S3: the body streamed from the file, MD5 computed on the way when UsesMd5(), checked
  // against the ETag afterwards). The transfer engine then calls them instead of reading parts
  // into memory and hashing them itself. The defaults are never called when ReadsFiles() is false.
  virtual bool ReadsFiles() const { return false; }

  // Whether only this process's user can have written the object `key` as it is now (ownership
  // records such as job-<J>/owner.json are trusted only then). POSIX: the file and every
  // directory between it and the store's root are owned by the effective uid, neither symlinks
  // nor group/other-writable; the error names the offending path. Default (S3): Ok, the bucket's
  // policy decides who may write.
  virtual Status CheckWrittenOnlyByUs(const std::string& key) const {
    (void)key;
    return Status::Ok();
  }

  virtual StoreStatus PutObjectFromFile(const std::string& key, int fd, uint64_t length) {
    (void)fd;
    (void)length;
    return StoreStatus::Fatal(Describe() + "/" + key + ": PutObjectFromFile not supported");
  }
  // `offset` is both the object offset and the file offset of the part.
  virtual StoreStatus UploadPartFromFile(const std::string& key, const std::string& upload_id,
                                         int part_number, uint64_t offset, int fd, uint64_t length,
                                         std::string* etag) {
    (void)upload_id;
    (void)part_number;
    (void)offset;
    (void)fd;
    (void)length;
    (void)etag;
    return StoreStatus::Fatal(Describe() + "/" + key + ": UploadPartFromFile not supported");
  }

  // Stores a whole object from memory, atomically (readers see the old or the new object).
  // `md5` is the MD5 of `data` (sent as Content-MD5 where the backend can).
  virtual StoreStatus PutObject(const std::string& key, std::string_view data,
                                const Md5Digest& md5) = 0;

  // Multipart upload: Create, then UploadPart for parts 1..N (any order, in parallel), then
  // Complete with the parts' ETags in order (or Abort). The object appears only at Complete.
  virtual StoreStatus CreateUpload(const std::string& key, std::string* upload_id) = 0;
  // Part `part_number` (1-based) holds the object's bytes [offset, offset + data.size()) (S3
  // ignores the offset, a filesystem writes there). `etag` receives the part's ETag. A backend
  // that gets an MD5-form ETag checks it against `md5` and fails with kRetryable on a mismatch
  // (data damaged in flight).
  virtual StoreStatus UploadPart(const std::string& key, const std::string& upload_id,
                                 int part_number, uint64_t offset, std::string_view data,
                                 const Md5Digest& md5, std::string* etag) = 0;
  // `etag` receives the object's ETag (may be empty).
  virtual StoreStatus CompleteUpload(const std::string& key, const std::string& upload_id,
                                     const std::vector<std::string>& part_etags,
                                     std::string* etag) = 0;
  virtual StoreStatus AbortUpload(const std::string& key, const std::string& upload_id) = 0;

  // Bytes [offset, offset + length) of an object, passed to `sink` (possibly in several pieces,
  // in order). kNotFound when the object does not exist.
  virtual StoreStatus GetRange(const std::string& key, uint64_t offset, uint64_t length,
                               const RangeSink& sink) = 0;
  // Size and ETag; kNotFound when the object does not exist.
  virtual StoreStatus Head(const std::string& key, ObjectInfo* info) = 0;
  // Every object whose key starts with `prefix` ("" lists everything), sorted by key.
  virtual StoreStatus List(const std::string& prefix, std::vector<ObjectInfo>* objects) = 0;
  // Deletes the keys (at most 1000 per call); keys that do not exist are not an error.
  virtual StoreStatus Delete(const std::vector<std::string>& keys) = 0;
};

// Forwards every call to `target` (not owned). Subclass it in tests to inject failures.
class ObjectStoreWrapper : public ObjectStore {
 public:
  explicit ObjectStoreWrapper(ObjectStore* target) : target_(target) {}
  std::string Describe() const override { return target_->Describe(); }
  bool UsesMd5() const override { return target_->UsesMd5(); }
  bool ReadsFiles() const override { return target_->ReadsFiles(); }
  StoreStatus PutObjectFromFile(const std::string& key, int fd, uint64_t length) override {
    return target_->PutObjectFromFile(key, fd, length);
  }
  StoreStatus UploadPartFromFile(const std::string& key, const std::string& upload_id,
                                 int part_number, uint64_t offset, int fd, uint64_t length,
                                 std::string* etag) override {
    return target_->UploadPartFromFile(key, upload_id, part_number, offset, fd, length, etag);
  }
  StoreStatus PutObject(const std::string& key, std::string_view data,
                        const Md5Digest& md5) override {
    return target_->PutObject(key, data, md5);
  }
  StoreStatus CreateUpload(const std::string& key, std::string* upload_id) override {
    return target_->CreateUpload(key, upload_id);
  }
  StoreStatus UploadPart(const std::string& key, const std::string& upload_id, int part_number,
                         uint64_t offset, std::string_view data, const Md5Digest& md5,
                         std::string* etag) override {
    return target_->UploadPart(key, upload_id, part_number, offset, data, md5, etag);
  }
  StoreStatus CompleteUpload(const std::string& key, const std::string& upload_id,
                             const std::vector<std::string>& part_etags,
                             std::string* etag) override {
    return target_->CompleteUpload(key, upload_id, part_etags, etag);
  }
  StoreStatus AbortUpload(const std::string& key, const std::string& upload_id) override {
    return target_->AbortUpload(key, upload_id);
  }
  StoreStatus GetRange(const std::string& key, uint64_t offset, uint64_t length,
                       const RangeSink& sink) override {
    return target_->GetRange(key, offset, length, sink);
  }
  StoreStatus Head(const std::string& key, ObjectInfo* info) override {
    return target_->Head(key, info);
  }
  StoreStatus List(const std::string& prefix, std::vector<ObjectInfo>* objects) override {
    return target_->List(prefix, objects);
  }
  StoreStatus Delete(const std::vector<std::string>& keys) override {
    return target_->Delete(keys);
  }

 protected:
  ObjectStore* target() const { return target_; }

 private:
  ObjectStore* target_;
};

// ---- transfers -----------------------------------------------------------------------------

// The largest file the "auto" multipart threshold sends as one PUT: bigger files always go as
// multipart uploads, so that an interrupted upload resumes from its recorded parts instead of
// sending gigabytes again (S3's own single PUT limit is 5 GiB).
constexpr uint64_t kAutoSinglePutMax = 1ull << 30;

// The "auto" multipart threshold. `large_files` is how many files larger than `part_size` are to
// be sent at once. With at least `concurrency` of them, one streamed PUT per file already keeps
// `concurrency` requests in flight, so files up to kAutoSinglePutMax go whole: no part
// bookkeeping, one request each, and no server-side assembly of parts (which some servers do
// slowly). With fewer, only parts keep the pipe full: files above `part_size` are split. Pure.
uint64_t AutoMultipartThreshold(size_t large_files, int concurrency, uint64_t part_size);

class TransferEnv;  // transfer_env.h
class UploadLog;    // below

struct TransferOptions {
  uint64_t part_size = 16ull << 20;  // bytes per part / ranged GET; >= 5 MiB for S3 (not checked)
  int concurrency = 8;               // parts in flight across the whole batch
  // Files up to this size go as one PUT, larger ones as multipart uploads. 0: "auto"
  // (AutoMultipartThreshold); anything below part_size: part_size. Only stores that ReadsFiles()
  // stream a single PUT from the file; for the others the threshold is always part_size (the body
  // is held in memory).
  uint64_t multipart_threshold = 0;
  BackoffPolicy backoff;     // per request
  Backoff::Uniform uniform;  // jitter source; empty: DefaultUniform()
  RetryClock clock;          // empty members: RealRetryClock()
  // Called after each part/range with bytes done and total of the whole batch; serialised (never
  // two calls at once) but from worker threads. Keep it cheap. An upload calls it once first,
  // with the bytes that earlier runs sent (UploadItem::resume; 0 for a fresh one).
  std::function<void(uint64_t done, uint64_t total)> progress;
  const std::atomic<bool>* cancel = nullptr;  // set to stop: in-flight requests finish, the rest
                                              // are skipped, multipart uploads are aborted
  // Uploads: also compute each file's SHA-256 (read sequentially by one extra thread while the
  // parts go out) and return it in UploadResult::sha256.
  bool compute_sha256 = true;
  // The largest object GetSmallObject reads (manifests, ownership records, journal segments):
  // larger is an error, never an allocation of what a store claims.
  uint64_t max_small_object = 64ull << 20;
  // The local files and threads of UploadFiles and DownloadFiles (not owned); null:
  // DefaultTransferEnv(), POSIX files and threads.
  TransferEnv* env = nullptr;
  // UploadFiles records its progress here (not owned; null: nowhere, nothing resumes).
  UploadLog* log = nullptr;
};

// One part of a multipart upload that was sent (UploadLog::PartSent).
struct SentPart {
  int part = 0;  // 1-based
  std::string etag;
  std::string md5_hex;  // the part's MD5 where known (for the multipart ETag check), else ""
};

// What earlier runs of UploadFiles recorded about one file through their UploadLog: this run
// resumes from it, sending nothing again that was recorded as sent.
struct UploadProgress {
  std::string sha256;           // hashed already: not read again for its digest
  std::string upload_id;        // a multipart upload started: continued, whatever the threshold
  std::vector<SentPart> parts;  // its parts sent
  bool uploaded = false;        // the object is complete: nothing to send
  std::string etag;             // its ETag when uploaded
};

struct UploadItem {
  std::string local_path;
  std::string key;
  // The size the file must have (-1: any): a file of another size fails the upload as a local
  // failure (changed after it was committed).
  int64_t size = -1;
  UploadProgress resume{};
};
struct UploadResult {
  std::string key;
  uint64_t size = 0;
  std::string sha256;  // when TransferOptions::compute_sha256 (or known from `resume`)
  std::string etag;
  int parts = 0;      // 0: single PUT
  uint32_t mode = 0;  // the local file's permission bits (TransferEnv::OpenForRead)
};

// Where UploadFiles records its progress as it goes (autopard: its state database), so that a
// later UploadFiles of the same items, given what was recorded (UploadItem::resume), continues
// where it stopped: after a storage outage, a cancellation or a kill. A call that fails fails the
// upload (a storage error: retried later). Calls for different files may come from several
// threads at once; `i` is the file's index in `items`.
class UploadLog {
 public:
  virtual ~UploadLog() = default;
  virtual Status Hashed(size_t i, const std::string& sha256) = 0;
  virtual Status MultipartStarted(size_t i, const std::string& upload_id) = 0;
  virtual Status PartSent(size_t i, const SentPart& part) = 0;
  // The multipart upload is gone (aborted, or lost by the store): the file starts over.
  virtual Status MultipartDropped(size_t i) = 0;
  // The object is complete and checked: a single PUT or a completed multipart upload.
  virtual Status Uploaded(size_t i, const std::string& etag) = 0;
};

// Why an upload failed, for a caller that retries: a local failure (a file missing, of another
// size than committed, or unreadable) is not cured by retrying; a storage failure may be.
struct UploadFailure {
  bool local = false;
};

// Uploads the files (each as one PUT when it fits in one part, else multipart), all parts of all
// files sharing `concurrency` workers; retries each request with backoff; checks part ETags,
// the multipart ETag where it has S3's "md5-of-md5s-N" form, and the final size (Head).
// Resumes what `resume` says earlier runs sent: a multipart upload whose every part was sent is
// first looked for as a complete object (a run killed inside CompleteMultipartUpload), and one
// the store lost (NoSuchUpload on a part or at completion) starts over, once.
// On failure or cancellation it aborts every multipart upload it holds, except with
// TransferOptions::log on a storage failure or a cancellation: those stay open, with their
// recorded parts, for the next run. Returns the first error, naming the file and the key;
// `failure` (optional) says which kind it was. Results are in the order of `items`.
Result<std::vector<UploadResult>> UploadFiles(ObjectStore& store,
                                              const std::vector<UploadItem>& items,
                                              const TransferOptions& options,
                                              UploadFailure* failure = nullptr);

struct DownloadItem {
  std::string key;
  std::string local_path;  // parent directories are created
  uint64_t size = 0;       // expected size (from the manifest)
  std::string sha256;      // expected digest; empty: not checked
  // The file's permission bits (0: 0644); its new parent directories get the matching
  // read/search bits (0700 plus group's/others' where the file grants them read).
  uint32_t mode = 0;
};
// Downloads each object with parallel ranged GETs into "<local_path>.autopar-tmp", fsyncs,
// verifies size and SHA-256, then renames over `local_path`. On any failure removes its temp
// files and returns an error naming the key, e.g. "s3://b/p/job-1/step-2/rank-0/a.pt: SHA-256
// mismatch: expected ..., got ..." or "...: object not found".
Status DownloadFiles(ObjectStore& store, const std::vector<DownloadItem>& items,
                     const TransferOptions& options);

// Small objects (manifests) with retries.
Status PutSmallObject(ObjectStore& store, const std::string& key, std::string_view data,
                      const TransferOptions& options);
// kNotFound is returned as a Result error whose message ends with ": object not found"; use
// ObjectExists() first when absence is expected.
Result<std::string> GetSmallObject(ObjectStore& store, const std::string& key,
                                   const TransferOptions& options);
Result<bool> ObjectExists(ObjectStore& store, const std::string& key,
                          const TransferOptions& options);
Result<std::vector<ObjectInfo>> ListObjects(ObjectStore& store, const std::string& prefix,
                                            const TransferOptions& options);
// Lists `prefix` and deletes everything under it (batches of 1000). Returns the number deleted.
Result<size_t> DeletePrefix(ObjectStore& store, const std::string& prefix,
                            const TransferOptions& options);

// S3's ETag of a multipart object: hex MD5 of the concatenated binary part MD5s, "-", part count.
std::string MultipartEtag(const std::vector<Md5Digest>& part_md5s);

}  // namespace autopar
