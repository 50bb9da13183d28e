// What one job can make autopard hold on a node, bounded: the events its programs send (count and
// bytes of detail), and the ranks it heartbeats for (one state row each). A job's programs are
// the user's: without a bound one job could fill root's state directory or the daemon's memory.
// autopard's own events about a job are not counted (they are bounded by what autopard does).
//
// Counts start from what the state database already holds for the job (`seed`, called the first
// time a job is seen after a start), so a restart does not reset them.
//
// Thread safety: every method may be called from many threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "autopar/status.h"

namespace autopar {

struct JobQuotaLimits {
  int64_t max_events = 100000;           // events sent by a job's programs, per node
  int64_t max_event_bytes = 64ll << 20;  // their details' bytes
  int64_t max_ranks = 4096;              // distinct ranks heartbeating on one node
};

class JobQuota {
 public:
  struct Seed {
    int64_t events = 0;
    int64_t event_bytes = 0;
    std::set<int> ranks;
  };
  JobQuota(JobQuotaLimits limits, std::function<Seed(const std::string& job_id)> seed)
      : limits_(limits), seed_(std::move(seed)) {}

  // Takes one event of `detail_bytes` for `job_id`; the error names the limit
  // ("job 42 sent 100000 events to this node (max_events_per_job)").
  Status TakeEvent(const std::string& job_id, size_t detail_bytes);
  // Admits a heartbeat of `rank`: a rank already known, or a new one within max_ranks.
  Status TakeRank(const std::string& job_id, int rank);
  // Forgets a job (its rows were pruned).
  void Forget(const std::string& job_id);

 private:
  struct Usage {
    int64_t events = 0;
    int64_t event_bytes = 0;
    std::set<int> ranks;
  };
  Usage& Of(const std::string& job_id);  // mu_ held
  const JobQuotaLimits limits_;
  const std::function<Seed(const std::string&)> seed_;
  std::mutex mu_;
  std::map<std::string, Usage> jobs_;
};

}  // namespace autopar
