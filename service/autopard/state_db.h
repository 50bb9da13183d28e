// autopard's durable state in SQLite (WAL journal): the commit queue, each committed file, the
// multipart uploads in flight with their finished parts, the steps known to be complete, the job
// journal and heartbeats. A commit is in the WAL file before AddCommit returns, so a daemon that
// crashes (SIGKILL, abort) after acknowledging it still uploads it after a restart; a multipart
// upload resumes with the parts it had already sent. With CommitSync::kFull the WAL is also
// fdatasync'ed before AddCommit returns (survives a power loss / kernel crash, costs one disk
// flush per commit); with kNormal a power loss may drop the last commits (see
// docs/checkpoints.md, "Crash safety").
//
// Thread safety: a StateDb may be used from several threads at once (one connection behind a
// mutex).
//
// Heartbeats are kept in memory and written once a second (FlushHeartbeats, from autopard's
// heartbeat flusher), so that a heartbeat's reply never waits for SQLite: its write lock, a
// fresh statement, or the WAL checkpoint that a write on the uploader's connection runs every
// ~1000 pages. Their rows only date a job's last activity for retention (InactiveJobs,
// PruneJob), which writes the pending ones first; a daemon crash loses the last second's.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/ckpt/storage.h"
#include "core/proto/protocol.h"
#include "local_cleanup.h"
#include "autopar/status.h"

namespace autopar {

// Commit states: queued -> uploading -> uploaded | failed; local (no upload URI, hashed). A failed
// commit with `retry` set failed on storage (outage past the retry budget): its recorded
// multipart uploads and parts are kept and it is uploaded again, where it stopped, on autopard's
// retry timer (Uploader), after a restart or when a later upload to the same URI succeeds.
// Without `retry` it failed for good (its local files are missing or changed, or newer complete
// steps superseded it).
struct CommitRecord {
  int64_t id = 0;
  std::string job_id;
  int64_t step = 0;
  int rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string ckpt_dir;
  std::string upload;  // "" for local-only checkpoints
  int64_t keep = 0;
  std::string node;
  std::string state = "queued";
  std::string error;
  double created = 0;
  double finished = 0;
  uint64_t bytes = 0;
  bool retry = false;
  // Not stored: the program's save_s of the commit request, for its ckpt_committed event.
  double save_s = -1;
};

struct FileRecord {
  std::string path;  // relative to the rank's step directory
  uint64_t size = 0;
  std::string sha256;     // "" until hashed
  std::string upload_id;  // multipart upload in flight ("" when none)
  bool uploaded = false;
  std::string etag;
};

// A part of a multipart upload, as the transfer engine reports it (core/ckpt/storage.h).
using PartRecord = SentPart;

// How AddCommit makes a commit durable before it returns (autopard.conf `commit_sync`).
enum class CommitSync {
  kNormal,  // in the WAL file (write(2)): survives any crash or restart of autopard
  kFull,    // and fdatasync'ed: survives a power loss or kernel crash too
};

// One published segment of a job's journal (journal_publisher.h): the node's events of the job
// with local journal ids in [first_id, last_id], written at compaction `level` (0: one round).
struct JournalSegment {
  int64_t first_id = 0;
  int64_t last_id = 0;
  int level = 0;
};

class StateDb {
 public:
  // Opens (creating) the database file; sets WAL, the commit connection's synchronous mode
  // (`sync`) and creates (or upgrades) the schema.
  static Result<std::unique_ptr<StateDb>> Open(const std::string& path,
                                               CommitSync sync = CommitSync::kFull);
  ~StateDb();
  StateDb(const StateDb&) = delete;
  StateDb& operator=(const StateDb&) = delete;

  // Records a commit with its files in one durable transaction. When the same (job, step, rank,
  // upload) was committed before, returns the earlier id and sets *duplicate.
  Result<int64_t> AddCommit(const CommitRecord& commit, const std::vector<FileRecord>& files,
                            bool* duplicate);
  Result<CommitRecord> GetCommit(int64_t id);
  // Commits still to upload (queued or uploading), oldest first.
  Result<std::vector<CommitRecord>> PendingCommits();
  // Failed commits to retry (state failed, retry set), oldest first; only those uploading to
  // `upload` unless it is empty.
  Result<std::vector<CommitRecord>> RetryableCommits(const std::string& upload);
  // Every commit of a job (all jobs when `job_id` is empty), newest first, at most `limit`.
  Result<std::vector<CommitRecord>> Commits(const std::string& job_id, int limit);
  // Local-only commits of (job, step) on this node.
  Result<std::vector<CommitRecord>> LocalCommits(const std::string& ckpt_dir, int64_t step);
  // `retry`: see CommitRecord (meaningful for state "failed").
  Status SetCommitState(int64_t id, const std::string& state, const std::string& error,
                        uint64_t bytes, bool retry = false);

  Result<std::vector<FileRecord>> Files(int64_t commit_id);
  // Starts a multipart upload record (forgetting parts of an earlier upload id).
  Status SetUploadId(int64_t commit_id, const std::string& path, const std::string& upload_id);
  Result<std::vector<PartRecord>> Parts(int64_t commit_id, const std::string& path);
  Status AddPart(int64_t commit_id, const std::string& path, const PartRecord& part);
  Status SetFileUploaded(int64_t commit_id, const std::string& path, const std::string& etag);
  Status SetFileSha256(int64_t commit_id, const std::string& path, const std::string& sha256);

  // Steps known complete (state "COMPLETE" in storage or "COMPLETE-LOCAL").
  Status SetStepState(const std::string& job_id, int64_t step, const std::string& where,
                      const std::string& state);
  struct StepRow {
    std::string job_id;
    int64_t step = 0;
    std::string where;  // upload URI, or the local checkpoint directory
    std::string state;
  };
  // Steps recorded for `where`, newest step first.
  Result<std::vector<StepRow>> Steps(const std::string& where);
  // Steps recorded for a job, newest first.
  Result<std::vector<StepRow>> StepsOfJob(const std::string& job_id);
  Status DeleteStep(const std::string& job_id, int64_t step, const std::string& where);

  Status AddEvent(const JournalEvent& event);
  // How many events of `job_id` the journal holds and the bytes of their details, and the ranks
  // with a heartbeat row (JobQuota's starting point after a restart).
  struct JobUsage {
    int64_t events = 0;
    int64_t event_bytes = 0;
    std::vector<int> ranks;
  };
  Result<JobUsage> UsageOf(const std::string& job_id);
  Result<std::vector<JournalEvent>> Events(const std::string& job_id);
  // Records the heartbeat in memory (the newest per job and rank; no database access).
  // `pid`: the rank's process (0: unknown), so that a restarted autopard resumes watching it.
  Status Heartbeat(const std::string& job_id, int rank, int64_t step, double time, int pid = 0);
  // The ranks whose last heartbeat came at or after `since` (epoch seconds) from a known process:
  // what a restarted autopard watches again (FailureHandler::ResumeWatch).
  struct WatchedRank {
    std::string job_id;
    int rank = 0;
    int64_t step = 0;
    double time = 0;
    int pid = 0;
  };
  Result<std::vector<WatchedRank>> WatchedRanks(double since);
  // Writes the heartbeats recorded since the last flush, in one transaction; on an error they
  // stay pending for the next one. Also run by the destructor.
  Status FlushHeartbeats();

  // A journal event with its local id (increasing in the order events were added, across jobs).
  struct EventRow {
    int64_t id = 0;
    JournalEvent event;
  };
  // The job's events with first_id <= id <= last_id, in id order.
  Result<std::vector<EventRow>> EventsBetween(const std::string& job_id, int64_t first_id,
                                              int64_t last_id);
  // The job's owner as this node learnt it from Slurm (one row per job: the durable owner
  // record; -1 when none was recorded).
  Status SetJobOwner(const std::string& job_id, uint32_t uid);
  Result<int64_t> JobOwner(const std::string& job_id);
  // The job's journal segments this node has published, by first_id; replaced all at once (one
  // transaction).
  Result<std::vector<JournalSegment>> JournalSegments(const std::string& job_id);
  Status SetJournalSegments(const std::string& job_id, const std::vector<JournalSegment>& segments);

  // Retention (autopard.conf `state_keep_days`). A job's newest activity is its newest journal
  // event, commit (created or finished) or heartbeat; a job with rows but none of these (only
  // steps, an owner or segments left) counts as inactive since ever.
  // Jobs whose newest activity is before `before` (epoch seconds), in job id order.
  Result<std::vector<std::string>> InactiveJobs(double before);
  // Journal retention (journal_keep_days): when this node last published each job's journal,
  // kept apart from the job's rows (state retention prunes those much earlier).
  Status MarkPublished(const std::string& job_id, double time);
  Result<std::vector<std::string>> PublishedBefore(double before);
  // The job's published journal is deleted: its record and its segments' rows go.
  Status ForgetPublished(const std::string& job_id);
  // Every job's checkpoint directory on this node with its owner, whether its commits name an
  // upload target and how many are not uploaded yet (local_cleanup.h).
  Result<std::vector<CheckpointDirRow>> CheckpointDirs();
  // The job's steps recorded COMPLETE-LOCAL: (step, checkpoint directory).
  Result<std::vector<std::pair<int64_t, std::string>>> LocalCompleteSteps(
      const std::string& job_id);
  struct PruneResult {
    bool pruned = false;  // false: kept, `kept_because` says why
    std::string kept_because;
    int64_t rows = 0;  // rows deleted (also when kept: by earlier transactions)
  };
  // Deletes every row of `job_id` (commits with their files and parts, steps, journal,
  // heartbeats, owner, published segments) while, checked inside each transaction, its newest
  // activity is still before `before`, no commit of it is queued, uploading or failed and to be
  // retried, and (with `require_published`) every journal event of it lies in a recorded
  // published segment. A large job goes in several short transactions (at most 1000 journal rows
  // or 125 commits each; a commit waits at most one of them), each deleting only rows those
  // checks allow; when a check fails midway the job keeps the rest (pruned false, `rows` what
  // went). Kept anyway: the rows of its local-only checkpoints still
  // recorded COMPLETE-LOCAL (what RestoreLocal resumes from), except the steps in `gone_local`
  // (their directories are gone: those rows go too). Never touches files or objects.
  Result<PruneResult> PruneJob(const std::string& job_id, double before, bool require_published,
                               const std::vector<std::pair<int64_t, std::string>>& gone_local);

 private:
  StateDb(sqlite3* commit_db, sqlite3* db) : commit_db_(commit_db), db_(db) {}
  static Status Exec(sqlite3* db, const char* sql);
  // Two connections to the same WAL database: commits go through `commit_db_`
  // (CommitSync: synchronous=NORMAL or FULL) and never wait behind the uploader's bookkeeping,
  // which goes through `db_` (synchronous=NORMAL: survives a daemon crash, since the WAL is
  // written before each transaction ends; after a power loss a part may be sent again).
  sqlite3* commit_db_;
  std::mutex commit_mu_;
  sqlite3* db_;
  std::mutex mu_;
  // Writes the pending heartbeats on db_ (mu_ held; inside the caller's transaction, if any).
  Status WritePendingHeartbeats();
  // One transaction's worth of PruneJob (mu_ held, inside the transaction): checks that nothing
  // keeps the job and deletes a batch of its rows, adding to `out`. True when rows are left for
  // another round.
  Result<bool> PruneRound(const std::string& job_id, double before, bool require_published,
                          const std::vector<std::pair<int64_t, std::string>>& gone_local,
                          PruneResult* out);
  sqlite3_stmt* heartbeat_stmt_ = nullptr;  // on db_, prepared once (under mu_)
  struct HeartbeatRow {
    int64_t step = 0;
    double time = 0;
    int pid = 0;
  };
  std::mutex heartbeats_mu_;  // guards heartbeats_ only; taken after mu_, never before it
  std::map<std::pair<std::string, int>, HeartbeatRow> heartbeats_;  // not written yet
};

}  // namespace autopar
