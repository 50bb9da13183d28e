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

#include <chrono>
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
  // `job_size`: the most ranks the job can have (Slurm: its tasks or CPUs), 0 when unknown;
  // asked when a rank at or past the size last seen heartbeats (a requeued job may have grown),
  // at most every kSizeRefresh per job.
  static constexpr std::chrono::seconds kSizeRefresh{10};
  using JobSize = std::function<int64_t(const std::string& job_id)>;
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  JobQuota(JobQuotaLimits limits, std::function<Seed(const std::string& job_id)> seed,
           JobSize job_size = nullptr, Clock clock = nullptr)
      : limits_(limits), seed_(std::move(seed)), job_size_(std::move(job_size)),
        clock_(clock ? std::move(clock) : [] { return std::chrono::steady_clock::now(); }) {}

  // Takes one event of `detail_bytes` for `job_id`; the error names the limit
  // ("job 42 sent 100000 events to this node (max_events_per_job)").
  Status TakeEvent(const std::string& job_id, size_t detail_bytes);
  // Admits a heartbeat of `rank`: a rank already known, or a new one below the job's size (when
  // Slurm tells it) and within max_ranks.
  Status TakeRank(const std::string& job_id, int rank);
  // Admits a usage sample of `rank` (the launchers send one every few seconds, docs/health.md):
  // a rank as TakeRank admits one, and at most one sample a rank every kSampleInterval. A sample
  // is kept in memory and summarised in the events autopard writes itself, so the job pays for
  // it here rather than in its event budget.
  static constexpr std::chrono::milliseconds kSampleInterval{900};
  Status TakeSample(const std::string& job_id, int rank);
  // New limits (autopard's SIGHUP), for every job from the next request on; what a job already
  // holds is kept, a job above a lowered limit gets nothing more.
  void SetLimits(const JobQuotaLimits& limits);
  // Forgets a job (its rows were pruned).
  void Forget(const std::string& job_id);

 private:
  struct Usage {
    int64_t events = 0;
    int64_t event_bytes = 0;
    std::set<int> ranks;
    std::map<int, std::chrono::steady_clock::time_point> sampled;  // each rank's last sample
    int64_t size = -1;  // job_size_'s last answer (-1: not asked yet, 0: unknown)
    std::chrono::steady_clock::time_point size_asked{};
  };
  Usage& Of(const std::string& job_id);  // mu_ held
  JobQuotaLimits limits_;  // guarded by mu_
  const std::function<Seed(const std::string&)> seed_;
  const JobSize job_size_;
  const Clock clock_;
  std::mutex mu_;
  std::map<std::string, Usage> jobs_;
};

}  // namespace autopar
