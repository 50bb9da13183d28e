// autopard: one Daemon per process, holding the configuration, the state database, the
// job-owner lookup, the uploader and failure handling. Serve() puts a RequestServer
// (request_server.h: the socket, the peers' kernel identities, the limits) in front of Handle(),
// the socket-free core that tests call directly. The request handlers live in one file per
// concern: daemon_checkpoints.cpp (commit, ls), daemon_restore.cpp, daemon_events.cpp (event,
// events), daemon_recovery.cpp (heartbeat, recover), daemon_status.cpp (status, metrics); the
// periodic work (heartbeat flushing, retention, local cleanup) in daemon_housekeeping.cpp.
//
// Thread safety: Handle() may be called from many threads at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "auth.h"
#include "core/proto/protocol.h"
#include "config.h"
#include "core/ckpt/ckpt_manifest.h"
#include "core/ckpt/ckpt_store.h"
#include "failure_handler.h"
#include "core/metrics/node_metrics.h"
#include "job_quota.h"
#include "journal_publisher.h"
#include "local_cleanup.h"
#include "metrics_server.h"
#include "state_db.h"
#include "uploader.h"
#include "service/user_access/user_fs.h"

namespace autopar {

// A file:// journal_uri's directory must be closed to others: the journal holds every user's
// events, kernel stacks among them. Error naming the key, the path and its mode.
Status CheckJournalDirPrivate(const std::string& journal_uri);

class Daemon {
 public:
  // Opens <state_dir>/autopard.db and prepares the uploader and, with journal_uri, the journal
  // publisher; `owners` answers job ownership (cached for owner_cache_s). Errors: the database or
  // journal_uri cannot be opened.
  static Result<std::unique_ptr<Daemon>> Create(const DaemonConfig& config,
                                                std::unique_ptr<JobOwnerLookup> owners);
  ~Daemon();

  // Resumes pending uploads, binds the socket and serves until Stop() (from a signal handler
  // thread or a test); writes the heartbeats to the state database every second meanwhile
  // (StateDb::FlushHeartbeats: never on a heartbeat's reply path). Errors: the socket cannot be
  // created.
  // `ready` runs once the socket accepts connections (systemd's readiness, main.cpp).
  Status Serve(const std::function<void()>& ready = nullptr);
  // Stops serving; uploads in flight stay pending in the database for the next start.
  void Stop();

  // Turns on failure handling (service/failure): heartbeats and events go to a
  // FailureHandler that requeues or stops failed jobs through `slurm`; a thread ticks it every
  // second until the daemon is destroyed. `limits`: the site's bounds on what a job's environment
  // asks for (site_limits.h). Call once, before Serve().
  void EnableFailureHandling(std::shared_ptr<SlurmActions> slurm,
                             const JobLimits& limits = JobLimitsOf(SiteConfig{}));

  // How often node-local checkpoint directories of ended jobs are looked for (local_cleanup.h).
  static constexpr std::chrono::seconds kCleanupInterval{10};

  // SIGHUP: takes from `fresh` (autopard.conf read again) what a running daemon can change
  // (CompareForReload: log_level, the per-job caps, the storage settings) and `limits` (the
  // plugstack's bounds, read again); every other changed key keeps its running value until a
  // restart. Returns the changed keys, split so.
  ConfigChanges Reload(const DaemonConfig& fresh, const JobLimits& limits);

  Reply Handle(const Request& request, const Peer& peer);
  // Publishes the pending journals to journal_uri now (done anyway within a second, and at
  // shutdown); OK without journal_uri.
  Status FlushJournal();
  // State retention (autopard.conf state_keep_days; off when 0): deletes the database rows of
  // every job inactive since before now - state_keep_days (epoch seconds `now`; tests inject it)
  // once nothing of it is still needed (StateDb::PruneJob; with journal_uri, only between
  // publication rounds and once its journal is published). Never deletes files or objects.
  // Serve() runs it at start and hourly, logging one line per pass to stderr.
  struct PruneSummary {
    int jobs_pruned = 0;  // jobs that lost rows
    int jobs_kept = 0;    // inactive jobs kept (uploads or publication pending, or errors)
    int64_t rows = 0;     // rows deleted
    double seconds = 0;   // the pass's duration
  };
  PruneSummary PruneState(double now);
  // Journal retention (journal_keep_days, with journal_uri): this node's published journals of
  // jobs last published before now - journal_keep_days; in the hourly pass, logged.
  void PruneJournals(double now);
  Uploader& uploader() { return *uploader_; }
  // The Prometheus text of this node (what GET /metrics on metrics_listen answers).
  std::string RenderMetrics();
  // The port metrics_listen is bound to (0: no listener).
  int metrics_port() const { return metrics_server_.port(); }
  const DaemonConfig& config() const { return config_; }

 private:
  Daemon(const DaemonConfig& config, std::unique_ptr<JobOwnerLookup> owners);
  // The threads of the node's periodic work (daemon_housekeeping.cpp), each waiting on
  // retention_cv_ so that Stop() ends them at once.
  void StartHousekeeping();
  // Starts the sweep of node-local checkpoint directories (local_cleanup.h), when Slurm can tell
  // which jobs ended.
  void StartLocalCleanup();
  // metrics_listen's HTTP listener; one warning line (and no metrics) when it cannot start.
  void StartMetricsListener();
  // After a restart: watches again the ranks still running whose heartbeats the state database
  // has (FailureHandler::ResumeWatch), one watch_resumed event per job.
  void ResumeWatches();
  // Records an event in this node's journal and hands it to failure handling (`pid`: the peer
  // that sent it, 0 for autopard's own) and to publication; autopard's own events (`own`) are
  // also counted in the metrics. Errors: the database refused it.
  Status Journal(const JournalEvent& e, pid_t pid = 0, bool own = true);

  // The request handlers, one per op (Handle dispatches).
  Reply Commit(const Request& r, const Peer& peer);
  Reply List(const Request& r, const Peer& peer);
  // `ls URI`: every step in a store the peer may see (their own jobs' unless privileged).
  Reply ListStoreOf(const Request& r, const Peer& peer);
  // `ls` of a job: its steps in the stores it uploaded to and in its node-local directories.
  Reply ListJob(const Request& r, const Peer& peer);
  // Appends the steps of `job_id` (every job's with "") in the store at `uri`, read as `as`, that
  // `allowed` lets through.
  Status ListStore(const std::string& uri, const std::string& job_id, const UserIdentity& as,
                   const std::function<bool(const std::string&)>& allowed, std::vector<StepInfo>* out);
  Reply Restore(const Request& r, const Peer& peer);
  // Rank 0's decision (a probe) waits up to restore_wait_s for a step every rank of the job
  // committed whose upload is still on its way (core/failure/upload_wait.h): a run that ended
  // before its last step was COMPLETE (a preemption whose grace was shorter than the upload, a
  // store that did not answer) resumes from that step, not from an older one with the steps
  // between redone. Returns the listing `steps` (or its error), listed again while it waited.
  Result<std::vector<StepRef>> AwaitCommittedStep(ObjectStore& store, const Request& r,
                                                 Result<std::vector<StepRef>> steps);
  // The job's merged timeline: this node's journal and `published`, every node's published one
  // (ReadPublishedJournals; this node's own too, whose events MergeTimelines drops as duplicates).
  Result<std::vector<JournalEvent>> JobTimeline(const std::string& job_id,
                                                std::vector<PublishedJournal> published);
  // Restores step `s` of the store for the requesting rank into `reply` (true), or notes in
  // reply->restore.skipped why it cannot (false: the caller tries the next older step).
  bool RestoreStep(ObjectStore& store, const StepRef& s, const Request& r, const UserIdentity& id,
                   Reply* reply);
  // Fetches into the job's directory, as its owner, the files of `ranks` in step `s` that the
  // node does not already hold intact; counts the bytes found and fetched.
  Status FetchStep(ObjectStore& store, const StepRef& s, const CheckpointManifest& m,
                   const std::vector<int>& ranks, const Request& r, const UserIdentity& id,
                   uint64_t* local_bytes, uint64_t* fetched_bytes);
  Reply RestoreLocal(const Request& r, const UserIdentity& id);
  Reply UploadStatus(const Request& r, const Peer& peer);
  Reply Event(const Request& r, const Peer& peer);
  // `events`: this node's journal merged with every node's published one (journal_uri).
  Reply Events(const Request& r, const Peer& peer);
  Reply Heartbeat(const Request& r, const Peer& peer);
  Reply Recover(const Request& r, const Peer& peer);
  // uid in job-<J>/owner.json of `store`, or -1 when absent/unreadable.
  int64_t StoredJobOwner(ObjectStore& store, const std::string& job_id);

  DaemonConfig config_;
  std::mutex reload_mu_;
  DaemonConfig effective_;  // config_ with what reloads changed (reload_mu_)
  std::unique_ptr<JobOwnerLookup> owners_;
  std::unique_ptr<Authorizer> auth_;
  std::unique_ptr<StateDb> db_;
  std::unique_ptr<JobQuota> quota_;  // what each job's programs can make this daemon hold
  std::unique_ptr<StoreCache> stores_;
  std::unique_ptr<Uploader> uploader_;
  std::unique_ptr<JournalPublisher> publisher_;  // null without journal_uri
  std::unique_ptr<NodeMetrics> metrics_;
  MetricsServer metrics_server_;  // started by Serve() with metrics_listen
  std::atomic<bool> stop_{false};
  int wake_[2] = {-1, -1};
  std::mutex reshard_mu_;  // resharding restores, one at a time per node (Restore)
  std::shared_ptr<SlurmActions> slurm_actions_;  // shared with the owner lookups (main.cpp)
  std::unique_ptr<FailureHandler> failure_;
  std::thread failure_ticker_;
  std::mutex retention_mu_;               // guards nothing but the waits below
  std::condition_variable retention_cv_;  // notified by Stop()
  std::thread retention_;                 // the hourly PruneState pass (Serve)
  std::thread heartbeat_flusher_;         // StateDb::FlushHeartbeats every second (Serve)
  std::thread cleanup_;  // LocalCheckpointCleaner's sweep every kCleanupInterval (Serve)
};

}  // namespace autopar
