// Who may act on which job. Every connection's peer is identified by the kernel (SO_PEERCRED);
// a user may commit, restore, list and read only the jobs they own; root and SlurmUser may act
// on any job. The owner of a job comes from Slurm (libslurm slurm_load_job) through the
// JobOwnerLookup interface, so tests inject a fake; answers are cached.
//
// Thread safety: CachedJobOwners and Authorizer are safe to call from several threads at once.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "autopar/status.h"

namespace autopar {

struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

class JobOwnerLookup {
 public:
  virtual ~JobOwnerLookup() = default;
  // The uid that owns `job_id`; an error naming the job when Slurm does not know it.
  virtual Result<uid_t> Owner(const std::string& job_id) = 0;
  // The owner when it is known without asking Slurm (a cache); nullopt otherwise.
  virtual std::optional<uid_t> Known(const std::string& /*job_id*/) { return std::nullopt; }
};

class SlurmActions;  // autopar/slurm_actions.h

// Owners from Slurm (slurm_load_job) through `slurm`, the daemon's one libslurm user, shared with
// failure handling (OpenLibSlurmActions). `slurm` null (no readable slurm.conf): every lookup fails
// with "job J: cannot ask Slurm who owns it (<unavailable>)", so only root and SlurmUser are served.
std::unique_ptr<JobOwnerLookup> MakeSlurmJobOwners(std::shared_ptr<SlurmActions> slurm,
                                                   const std::string& unavailable);

// Caches successful answers of `inner` for `ttl` (a job's owner never changes; errors are not
// cached, so a job submitted a moment ago is found on the next request). At most `max_entries`
// owners are kept: when full, expired ones are dropped, then the oldest. ttl 0: nothing cached.
class CachedJobOwners : public JobOwnerLookup {
 public:
  CachedJobOwners(std::unique_ptr<JobOwnerLookup> inner, std::chrono::seconds ttl,
                  std::function<std::chrono::steady_clock::time_point()> now = nullptr,
                  size_t max_entries = 4096);
  Result<uid_t> Owner(const std::string& job_id) override;
  std::optional<uid_t> Known(const std::string& job_id) override;

 private:
  std::unique_ptr<JobOwnerLookup> inner_;
  std::chrono::seconds ttl_;
  size_t max_entries_;
  std::function<std::chrono::steady_clock::time_point()> now_;
  std::mutex mu_;
  std::map<std::string, std::pair<uid_t, std::chrono::steady_clock::time_point>> cache_;
};

class Authorizer {
 public:
  // A user's questions about jobs Slurm does not know cost root a slurmctld call each (under the
  // node's one libslurm lock, which other jobs' recovery waits for). Past kUnknownBudget of them
  // within kUnknownWindow, that user's lookups are throttled: one at a time across all of them,
  // each after a pause of kThrottle, so such a user makes root call slurmctld at most
  // 1/kThrottle times a second. Nothing is refused (a job the user starts meanwhile is only
  // looked up later), a job whose owner is known is answered at once, and other users are not
  // affected.
  static constexpr int kUnknownBudget = 16;
  static constexpr std::chrono::seconds kUnknownWindow{10};
  static constexpr std::chrono::milliseconds kThrottle{200};
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  using Sleep = std::function<void(std::chrono::milliseconds)>;

  // `privileged`: uids that may act on every job (root is always one).
  Authorizer(JobOwnerLookup* owners, std::vector<uid_t> privileged, Clock now = nullptr,
             Sleep sleep = nullptr);

  bool IsPrivileged(uid_t uid) const;
  // OK when `peer` may act on `job_id`; the error says why not, e.g. "job 42 belongs to uid
  // 1001, not to you (uid 1002)". `what` names the operation ("commit").
  Status Check(const Peer& peer, const std::string& what, const std::string& job_id);
  // As Check, for reading what a job left behind after Slurm may have forgotten it (its
  // journal): when Slurm cannot name the owner, the owner uids recorded with the job decide
  // (`recorded` is called only then; entries < 0 are unknown): every known one must be the
  // peer's, and at least one must be known, else Slurm's error is returned.
  Status CheckRecorded(const Peer& peer, const std::string& what, const std::string& job_id,
                       const std::function<std::vector<int64_t>()>& recorded);
  // The uid whose files the job's checkpoints are (the job's owner). For a privileged peer whose
  // job Slurm does not know (tests, benchmarks outside Slurm), the peer's own uid.
  Result<uid_t> FileOwner(const Peer& peer, const std::string& job_id);

 private:
  // The owner of `job_id` for a non-privileged peer, within its budget of unknown jobs.
  Result<uid_t> OwnerFor(const Peer& peer, const std::string& job_id);

  JobOwnerLookup* owners_;
  std::vector<uid_t> privileged_;
  Clock now_;
  Sleep sleep_;
  std::mutex mu_;
  std::mutex throttle_mu_;  // held by a throttled lookup through its pause and its Slurm call
  std::map<uid_t, std::deque<std::chrono::steady_clock::time_point>> unknown_;  // guarded by mu_
};

}  // namespace autopar
