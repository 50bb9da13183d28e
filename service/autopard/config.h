// autopard's configuration file (etc/autopard.conf documents every key):
//   # comment
//   key = value
// Unknown keys, malformed values and duplicates are errors naming the file, line and key. The
// S3 secret may live only in a file no one but root (the file's owner) can read:
// CheckConfigFilePermissions refuses a group/other-readable file that holds a secret.
// Pure parsing; thread-compatible.
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/ckpt/ckpt_backoff.h"
#include "autopar/status.h"
#include "local_cleanup.h"
#include "log.h"
#include "service/storage/storage_backends.h"
#include "state_db.h"

namespace autopar {

struct DaemonConfig {
  std::string socket = "/run/autopard/autopard.sock";
  mode_t socket_mode = 0666;  // every user may connect; each request is authorized inside
  // Connections served at once (connection_limits.h): in all, and per peer uid; over a limit a
  // connection gets one error line and is closed. A request must arrive whole within
  // request_timeout_s of its first byte (also the longest a reply may wait for the peer to read
  // it); a connection without a request for idle_timeout_s is closed.
  int max_connections = 1024;
  int max_connections_per_uid = 128;
  int request_timeout_s = 10;
  int idle_timeout_s = 600;
  // What one job's programs can make autopard hold on a node (job_quota.h): events sent (count
  // and bytes of detail) and distinct ranks heartbeating.
  int64_t max_events_per_job = 100000;
  int64_t max_event_bytes_per_job = 64ll << 20;
  int max_ranks_per_job = 4096;
  std::string state_dir = "/var/lib/autopard";
  // commit_sync: kNormal (default) acknowledges a commit once it is in SQLite's WAL file (any
  // crash or restart of autopard keeps it); kFull also waits for the disk flush (power loss).
  CommitSync commit_sync = CommitSync::kNormal;
  std::string node;           // default: the host name
  std::string slurm_conf;     // SLURM_CONF for libslurm; empty: Slurm's default
  std::string slurm_user = "slurm";  // may act on every job, like root
  // The plugstack.conf whose autopar.so line bounds what a job's environment may ask for
  // (site_limits.h); empty: the one slurmstepd reads beside slurm_conf.
  std::string plugstack;
  S3Config s3;                // s3_endpoint, s3_region, s3_access_key, s3_secret_key, ...
  PosixConfig posix;          // posix_fsync
  uint64_t part_size = 16ull << 20;
  // Files up to this size go as one streamed PUT; 0 ("auto"): see AutoMultipartThreshold.
  uint64_t multipart_threshold = 0;
  int concurrency = 8;           // parts in flight across all uploads of this node
  int max_active_uploads = 16;   // rank commits uploaded at once
  BackoffPolicy retry;           // retry_initial_ms, retry_max_delay_ms, retry_max_attempts,
                                 // retry_max_elapsed_s
  // An upload that failed on storage past `retry` (the per-request budget) is tried again, where
  // it stopped, after upload_retry_initial_s, doubling per failed attempt up to
  // upload_retry_max_s (minus up to 25 % jitter; see FailedUploadRetryDelay in uploader.h).
  std::chrono::seconds upload_retry_initial{30};
  std::chrono::seconds upload_retry_max{1800};
  int owner_cache_s = 300;       // how long a job's owner is cached
  // Rank 0's restore decision waits up to this long for a step every rank committed whose upload
  // is still on its way (core/failure/upload_wait.h), rather than resume an older one; 0: never.
  // Below the launchers' rendezvous timeout (300 s), in which the other ranks wait for it.
  int restore_wait_s = 120;
  // Training health: a job's measured step time, throughput and MFU are journalled
  // ("progress") at most once per this many seconds, from rank 0's heartbeats.
  int progress_interval_s = 30;
  // Prometheus metrics (metrics_server.h, docs/metrics.md): "ADDRESS:PORT" to serve GET /metrics
  // on; empty (the default): no listener.
  std::string metrics_listen;
  // Where every node publishes its journal per job (journal_publisher.h): "file:///shared/dir"
  // or "s3://bucket/prefix" (canonical form); empty: `autopar events` shows this node's only.
  std::string journal_uri;
  // Days this node's published journal of a job stays at journal_uri after its last publication
  // (JournalPublisher::PruneJournals, in the hourly retention pass); 0 keeps them forever. At
  // least state_keep_days when both are set.
  int journal_keep_days = 90;
  // state_keep_days: the state database forgets a job (its rows only, never checkpoint files or
  // objects) this many days after its last activity, once nothing of it is still needed
  // (Daemon::PruneState); 0 keeps every job forever.
  int state_keep_days = 14;
  // Node-local checkpoint directories of ended jobs (local_cleanup.h): uploaded (default), all
  // or none.
  LocalCleanup local_ckpt_cleanup = LocalCleanup::kAll;
  // Lines below this level are not logged (log.h); reloaded on SIGHUP.
  LogLevel log_level = LogLevel::kInfo;
  // Every key the file gave, with its text as written (CompareForReload).
  std::map<std::string, std::string> given;
};

// What SIGHUP makes of a new configuration: the keys whose text changed, split into those a
// running autopard takes at once (log_level, the per-job caps max_*_per_job, the storage
// settings s3_* and posix_fsync) and those that need a restart (their old value stays in force).
// Only key names: a value may be a secret.
struct ConfigChanges {
  std::vector<std::string> applied;
  std::vector<std::string> need_restart;
};
ConfigChanges CompareForReload(const DaemonConfig& running, const DaemonConfig& fresh);

// Parses the text of a configuration file; `origin` names it in errors
// ("autopard.conf:7: part_size: must be between 5M and 5G, got '1k'").
Result<DaemonConfig> ParseDaemonConfig(const std::string& text, const std::string& origin);

// Every key ParseDaemonConfig accepts, in etc/autopard.conf's order (for the man page's check,
// docs/man/autopard.conf.5).
std::vector<std::string> DaemonConfigKeys();

// Reads, checks permissions (see above) and parses a configuration file.
Result<DaemonConfig> LoadDaemonConfig(const std::string& path);

// The permission rule on its own: `st` of the file, whether it holds a secret.
Status CheckConfigFilePermissions(const struct stat& st, bool has_secret, const std::string& path);

// Parses "16M", "1G", "5242880" (K/M/G are powers of 1024).
Result<uint64_t> ParseByteSize(const std::string& text);

}  // namespace autopar
