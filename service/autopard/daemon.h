// autopard's request handling: one Daemon per process, holding the configuration, the state
// database, the job-owner lookup and the uploader. Serve() accepts connections on the Unix socket
// (threads waiting in accept() serve one connection each; see Accept), identifies each peer with
// SO_PEERCRED and answers each request line with one reply line (protocol.h). Handle() is the
// socket-free core, used by tests.
//
// Thread safety: Handle() may be called from many threads at once.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "auth.h"
#include "connection_limits.h"
#include "core/proto/protocol.h"
#include "config.h"
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
  // The listening socket, shared by the threads that accept on it; closed by the last one.
  struct Listener {
    explicit Listener(int f) : fd(f) {}
    ~Listener();
    const int fd;
    std::atomic<bool> stopped{false};
    std::mutex mu;
    int idle = 0;     // threads waiting in accept()
    int threads = 0;  // acceptor and connection threads alive (Serve waits for 0)
    std::condition_variable done;  // notified when a thread leaves
    std::set<int> open;            // connections being served (shut down when Serve stops)
  };
  // Threads waiting in accept() when the daemon is idle: a request is served by a thread that
  // already waits for it (no thread creation, no hand-off on the commit path).
  static constexpr int kIdleAcceptors = 2;
  void StartAcceptor(const std::shared_ptr<Listener>& l);
  // Starts the sweep of node-local checkpoint directories (local_cleanup.h), when Slurm can tell
  // which jobs ended.
  void StartLocalCleanup();
  // After a restart: watches again the ranks still running whose heartbeats the state database
  // has (FailureHandler::ResumeWatch), one watch_resumed event per job.
  void ResumeWatches();
  // Accepts and serves connections until the socket is shut down. The thread that takes the
  // last waiting slot starts another first; one finishing a connection while kIdleAcceptors
  // others wait exits.
  void Accept(std::shared_ptr<Listener> l);
  // Serves one admitted connection until the peer closes it or a timeout ends it (the caller
  // closes `fd`).
  void ServeConnection(int fd, const Peer& peer);
  // Sends `why` as an error line (without waiting) and closes `fd`; logs at most every 10 s.
  void RefuseConnection(int fd, const ucred& cred, const std::string& why);
  // Records an event in this node's journal and hands it to failure handling (`pid`: the peer
  // that sent it, 0 for autopard's own) and to publication; autopard's own events (`own`) are
  // also counted in the metrics. Errors: the database refused it.
  Status Journal(const JournalEvent& e, pid_t pid = 0, bool own = true);
  Reply Commit(const Request& r, const Peer& peer);
  Reply Restore(const Request& r, const Peer& peer);
  Reply RestoreLocal(const Request& r, const UserIdentity& id);
  Reply List(const Request& r, const Peer& peer);
  Reply UploadStatus(const Request& r, const Peer& peer);
  // `events`: this node's journal merged with every node's published one (journal_uri).
  Reply Events(const Request& r, const Peer& peer);
  // uid in job-<J>/owner.json of `store`, or -1 when absent/unreadable.
  int64_t StoredJobOwner(ObjectStore& store, const std::string& job_id);

  DaemonConfig config_;
  std::mutex reload_mu_;
  DaemonConfig effective_;  // config_ with what reloads changed (reload_mu_)
  ConnectionLimits limits_;  // max_connections, max_connections_per_uid
  std::atomic<int64_t> last_refusal_log_{0};
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
