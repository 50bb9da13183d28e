// The background half of a commit: uploads a rank's committed files to the job's --ckpt-upload
// store, resumably (multipart upload ids and finished parts are in the StateDb, so a daemon
// killed mid-upload continues where it stopped and sends no part twice that it had recorded),
// hashes the files while their parts go out, writes the rank manifest, completes the step when
// every rank is in (TryCompleteStep), and applies retention in storage and on local disk.
// Without an upload URI the local directory is the checkpoint: files are hashed and the step is
// COMPLETE-LOCAL once every rank of the job on this node has committed it.
// An upload that fails on storage (outage past the per-request retry budget) keeps its multipart
// uploads and recorded parts and is retried where it stopped: on a timer with exponential backoff
// (upload_retry_initial_s doubling up to upload_retry_max_s, FailedUploadRetryDelay), when
// autopard restarts (ResumePending) and when a later upload to the same URI succeeds. Each retry
// is a journal event ckpt_upload_retry with its attempt number and the last error. One whose local
// files are missing or changed, or that newer complete steps superseded, fails for good (journal
// event ckpt_failed names the reason) and is not retried again.
//
// Thread safety: every public member may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/ckpt/commit_state.h"
#include "core/proto/protocol.h"
#include "core/ckpt/ckpt_store.h"
#include "core/ckpt/storage.h"
#include "config.h"
#include "job_files_env.h"
#include "service/user_access/user_fs.h"
#include "state_db.h"

namespace autopar {

// Opens the store of a URI with the daemon's settings, cached per URI.
// The stores autopard talks to, one per URI and, for file:// stores, per identity (a user's
// store is read and written with that user's rights: PosixConfig::identity). At most
// kMaxStores are kept: the least recently used goes first (a caller holding it keeps it alive).
//
// Thread safety: Get and Set may be called from many threads at once.
class StoreCache {
 public:
  static constexpr size_t kMaxStores = 64;
  explicit StoreCache(const DaemonConfig& config) : s3_(config.s3), posix_(config.posix) {}
  // `as`: whose rights a file:// store acts with (uid 0: autopard's own, for the site's stores).
  Result<std::shared_ptr<ObjectStore>> Get(const std::string& uri, const UserIdentity& as);
  // Makes Get(uri, any identity) return `store` (tests: an in-memory store standing in for a URI).
  Status Set(const std::string& uri, std::shared_ptr<ObjectStore> store);
  size_t size();
  // New storage settings (autopard's SIGHUP): the stores made with the old ones are dropped, so
  // the next Get opens one with these; a transfer under way keeps the store it holds.
  void Reconfigure(const S3Config& s3, const PosixConfig& posix);
  bool HasS3Endpoint();

 private:
  struct Entry {
    std::shared_ptr<ObjectStore> store;
    uint64_t used = 0;
  };
  std::mutex mu_;
  S3Config s3_;        // guarded by mu_
  PosixConfig posix_;  // guarded by mu_
  uint64_t clock_ = 0;
  std::map<std::string, Entry> stores_;
  std::map<std::string, std::shared_ptr<ObjectStore>> fixed_;  // Set: every identity
};

// The object "job-<J>/owner.json" that autopard writes beside a job's checkpoints: which uid owns
// them, so that listing and restoring by URI (across jobs) show a user only their own jobs.
std::string JobOwnerKey(const std::string& job_id);
// The uid that job-<J>/owner.json names, or -1 when it is absent, unreadable, names another job
// (moved from another job's directory) or could have been written by someone else than autopard
// (ObjectStore::CheckWrittenOnlyByUs; the reason goes to stderr).
int64_t ReadJobOwner(ObjectStore& store, const std::string& job_id, const TransferOptions& options);

// The delay before timer retry `retry` (1-based) of a failed upload: the ceiling
// min(max, initial * 2^(retry-1)) minus up to 25 % jitter: ceiling * (1 - 0.25 * u), u in [0, 1).
std::chrono::milliseconds FailedUploadRetryDelay(std::chrono::seconds initial, std::chrono::seconds max,
                                                 int retry, double u);

class Uploader {
 public:
  // How long retention in storage rests for a job after it failed (retention_paused_).
  static constexpr std::chrono::seconds kRetentionPause{60};
  using Journal = std::function<void(const JournalEvent&)>;
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // `clock` and `uniform` (jitter) drive the timer retries (and retention's pause); null: steady_clock, DefaultUniform.
  // With an injected clock the timer thread still checks every second (real time); tests call
  // RetryDue after moving their clock.
  Uploader(StateDb* db, const DaemonConfig& config, StoreCache* stores, Journal journal,
           Clock clock = nullptr, Backoff::Uniform uniform = nullptr);
  ~Uploader();

  // Queues every commit the database still holds as pending, and the failed ones to retry (after
  // a restart).
  Status ResumePending();
  // Queues a commit. `known` (job, step, rank, bytes of the commit just recorded) spares the
  // database read: the commit path never waits for the uploader's connection.
  void Enqueue(int64_t commit_id, const CommitRecord* known = nullptr);
  // Uploads in flight or queued (and the last finished ones) of `job_id` ("" = all jobs).
  std::vector<UploadInfo> Progress(const std::string& job_id);
  // Stops: requests in flight finish, everything unfinished stays pending in the database.
  void Stop();
  // Waits until nothing is queued or running (tests and benchmarks); failed uploads waiting for
  // their timer retry do not count.
  void WaitIdle();
  // Queues the failed uploads whose timer retry is due (the timer thread calls it; tests too).
  void RetryDue();

  TransferOptions Transfer() const;

  // For metrics (core/metrics/node_metrics.h): uploads queued, running and waiting for a retry,
  // and the bytes sent to storage since start.
  struct Counts {
    int64_t queued = 0, running = 0, waiting_retry = 0;
    int64_t steps_watched = 0;  // WatchForCompletion threads
    uint64_t bytes_sent = 0;
  };
  Counts CurrentCounts();
  // Called after each rank upload to storage that succeeded, with the commit's bytes and the
  // upload's wall time. Set once, before uploads start.
  void OnUploaded(std::function<void(uint64_t bytes, double seconds)> f) { on_uploaded_ = std::move(f); }

 private:
  struct Active {
    std::string job_id;
    int64_t step = 0;
    int rank = 0;
    double save_s = -1;  // the commit request's (CommitRecord::save_s)
    std::string state = "queued";
    std::atomic<uint64_t> done{0};
    uint64_t total = 0;
    std::chrono::steady_clock::time_point start;
    std::string error;
    int large_files = -1;  // files above part_size still to send; -1 until known
    int attempt = 0;       // retries of this failed upload since autopard started (0: first try)
    CommitState recorded = CommitState::kQueued;  // the commit's state in the database
  };
  // A failed upload waiting for its timer retry.
  struct Scheduled {
    std::shared_ptr<Active> active;
    std::chrono::steady_clock::time_point due;
  };
  void RetryTimer();
  void Dispatch();
  void Process(int64_t commit_id, std::shared_ptr<Active> active);
  // The one place a commit's state changes in the database (commit_state.h's table).
  void Transition(const CommitRecord& c, Active& active, CommitEvent event, const std::string& error,
                  bool retry);
  // The one place a file's state changes (commit_state.h's file table), in the database and in
  // `f`. `value`: the SHA-256 (hashed), the upload id (multipart-started) or the ETag (put,
  // multipart-completed); `part` for part-sent. Safe from the hasher and the sending threads.
  Status RecordFile(int64_t commit_id, FileRecord& f, FileEvent event,
                    const std::string& value = "", const PartRecord* part = nullptr);
  // Uploads a commit's files (core's UploadRank: the engine, resumed from and recorded in the
  // database through CommitLog), then Published. `*permanent`: the failure cannot be cured by
  // retrying later (local files missing or changed, invalid manifest, superseded step).
  Status Upload(const CommitRecord& c, Active& active, bool* permanent);
  class CommitLog;
  uint64_t MultipartThreshold(Active& active, const std::vector<FileRecord>& files, const ObjectStore& store);
  // A failed upload retried: superseded by `keep` newer complete steps (permanent), or announced.
  Status CheckRetry(const CommitRecord& c, Active& active, ObjectStore& store,
                    std::vector<FileRecord>& files, bool* permanent);
  // Aborts the multipart uploads the database holds for the commit's files, and forgets them.
  void AbortRecorded(const CommitRecord& c, ObjectStore& store, std::vector<FileRecord>& files);
  // The rank is in storage: its events, the step's completion (or a watcher for it), retention.
  Status Published(const CommitRecord& c, const RankUploadResult& uploaded,
                   const std::shared_ptr<ObjectStore>& store);
  // Queues the failed commits to `upload` that are to be retried, except `except`.
  void RetryFailed(const std::string& upload, int64_t except);
  Status FinishLocal(const CommitRecord& c, Active& active);
  void Retention(const CommitRecord& c, ObjectStore* store);
  // After this node's rank is in but the step is not complete yet: waits (up to 10 min) for the
  // step manifest another node writes, then applies retention here; stops early once a newer
  // step is COMPLETE here (its retention covers this one). Not counted as running.
  void WatchForCompletion(const CommitRecord& c, std::shared_ptr<ObjectStore> store);
  // A step of c's job newer than c's is recorded COMPLETE for c's upload target on this node.
  bool NewerStepComplete(const CommitRecord& c);
  void Emit(const CommitRecord& c, const std::string& kind, const std::string& detail);

  StateDb* db_;
  const DaemonConfig& config_;
  StoreCache* stores_;
  Journal journal_;
  TaskPool pool_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> watching_{0};
  std::atomic<uint64_t> bytes_sent_{0};
  std::function<void(uint64_t, double)> on_uploaded_;

  std::mutex file_state_mu_;  // RecordFile's: the file records the threads of one upload share
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int64_t> queue_;
  std::map<int64_t, std::shared_ptr<Active>> active_;   // queued and running
  std::deque<std::pair<int64_t, std::shared_ptr<Active>>> finished_;  // the last few
  std::map<int64_t, Scheduled> retrying_;  // failed on storage, retried when due
  // Retention in storage that failed, by upload target and job: not tried again before the time
  // here (the next step's retention covers this one's). Without the pause, a job whose storage
  // keeps failing its listing held an upload slot in retries at every rank upload, and every
  // job's uploads fell behind (bench/soak/soak.py: an s3rver killed mid-write answers every
  // listing of that job with HTTP 500).
  std::map<std::string, std::chrono::steady_clock::time_point> retention_paused_;
  Clock clock_;
  Backoff::Uniform uniform_;
  std::condition_variable timer_cv_;
  std::thread retry_timer_;
  int running_ = 0;
  std::list<std::thread> workers_;
  std::vector<std::thread::id> done_;  // threads of workers_ that returned (joined next)
  std::thread dispatcher_;
};

}  // namespace autopar
