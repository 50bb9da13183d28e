// What one node's autopard tells Prometheus (docs/metrics.md lists every name with its meaning):
//  - counters of what autopard itself journals: commits, uploads, completed steps, checkpoint
//    failures by kind, upload retries, failures by class, restarts in place and requeues by the
//    failure class that caused them, missed heartbeats, bad losses, stragglers, idle flags. Only
//    autopard's own events count (Daemon::Journal), never those a job's programs send with the
//    `event` op: a user could write anything there, and no user may move a site's counters or
//    add series to them;
//  - the heartbeats it receives, the bytes it sends to storage and each finished upload's
//    duration and throughput;
//  - per job, on the node of its rank 0 (where autopard measures it, core/health/progress.h):
//    step time, throughput, MFU and loss from the last "progress" window, and each straggler
//    rank's ratio to the median. A job's series go kJobTtlS after its last update.
// Label values are bounded: failure classes are the six of requeue_policy.h (others "other"),
// kinds and actions are fixed lists, jobs are the node's own.
//
// Thread-safe: Observe*, CountHeartbeat and Render may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/metrics/exposition.h"
#include "core/proto/protocol.h"

namespace autopar {

// The uploader's state at scrape time.
struct UploaderSnapshot {
  int64_t queued = 0;         // rank commits waiting for an upload slot
  int64_t running = 0;        // being hashed or uploaded
  int64_t waiting_retry = 0;  // failed on storage, waiting for their timer retry
  int64_t steps_watched = 0;  // steps uploaded here, waiting for another node to complete them
  uint64_t bytes_sent = 0;    // bytes sent to storage since autopard started (parts and PUTs)
};

class NodeMetrics {
 public:
  static constexpr double kJobTtlS = 600;

  NodeMetrics(std::string version, double start_time);

  // One event autopard journalled itself.
  void Observe(const JournalEvent& e);
  void CountHeartbeat() { heartbeats_.fetch_add(1, std::memory_order_relaxed); }
  // A rank's upload to storage finished: `bytes` of checkpoint in `seconds` (wall time).
  void ObserveUpload(uint64_t bytes, double seconds);

  // The exposition text at `now` (seconds since the epoch; job series older than kJobTtlS
  // are dropped first).
  std::string Render(const UploaderSnapshot& uploads, double now);

 private:
  struct JobSeries {
    double updated = 0;
    int64_t step = -1;
    std::map<std::string, double> gauges;  // progress field -> value
    std::map<std::pair<int, std::string>, double> stragglers;  // (rank, node) -> ratio
  };
  const std::string version_;
  const double start_time_;
  std::atomic<uint64_t> heartbeats_{0};

  std::mutex mu_;
  // (counter name, label value or "") -> count; node_metrics.cpp's table names every counter.
  std::map<std::pair<std::string, std::string>, uint64_t> counters_;
  // job -> the class of its last failure here and when (kept kJobTtlS)
  std::map<std::string, std::pair<std::string, double>> last_class_;
  std::map<std::string, JobSeries> jobs_;
  Histogram upload_seconds_;
  double last_upload_bps_ = 0;
};

}  // namespace autopar
