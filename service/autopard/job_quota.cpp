#include "job_quota.h"

#include <algorithm>

namespace autopar {

JobQuota::Usage& JobQuota::Of(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) return it->second;
  Usage u;
  if (seed_) {
    Seed s = seed_(job_id);
    u.events = s.events;
    u.event_bytes = s.event_bytes;
    u.ranks = std::move(s.ranks);
  }
  return jobs_.emplace(job_id, std::move(u)).first->second;
}

void JobQuota::SetLimits(const JobQuotaLimits& limits) {
  std::lock_guard<std::mutex> lock(mu_);
  limits_ = limits;
}

Status JobQuota::TakeEvent(const std::string& job_id, size_t detail_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Usage& u = Of(job_id);
  if (u.events >= limits_.max_events) {
    return Status::Error("job " + job_id + " sent " + std::to_string(u.events) +
                         " events to this node (max_events_per_job)");
  }
  if (u.event_bytes + static_cast<int64_t>(detail_bytes) > limits_.max_event_bytes) {
    return Status::Error("job " + job_id + "'s events hold " + std::to_string(u.event_bytes) +
                         " bytes of detail on this node (max_event_bytes_per_job: " +
                         std::to_string(limits_.max_event_bytes) + ")");
  }
  ++u.events;
  u.event_bytes += static_cast<int64_t>(detail_bytes);
  return Status::Ok();
}

Status JobQuota::TakeRank(const std::string& job_id, int rank) {
  std::unique_lock<std::mutex> lock(mu_);
  Usage* u = &Of(job_id);
  if (u->ranks.count(rank)) return Status::Ok();
  const auto now = clock_();
  if (job_size_ && (u->size < 0 || (u->size > 0 && rank >= u->size && now - u->size_asked >= kSizeRefresh))) {
    lock.unlock();  // Slurm is asked without the lock
    const int64_t size = job_size_(job_id);
    lock.lock();
    u = &Of(job_id);
    u->size = std::max<int64_t>(size, 0);
    u->size_asked = now;
  }
  if (u->size > 0 && rank >= u->size) {
    return Status::Error("rank " + std::to_string(rank) + " is not a rank of job " + job_id + " (Slurm: " +
                         std::to_string(u->size) + " tasks or CPUs)");
  }
  Usage& v = *u;
  if (v.ranks.count(rank)) return Status::Ok();
  if (static_cast<int64_t>(v.ranks.size()) >= limits_.max_ranks) {
    return Status::Error("job " + job_id + " heartbeats for " + std::to_string(v.ranks.size()) +
                         " ranks on this node already (max_ranks_per_job)");
  }
  v.ranks.insert(rank);
  return Status::Ok();
}

Status JobQuota::TakeSample(const std::string& job_id, int rank) {
  if (rank < 0) return Status::Error("a usage sample needs the rank it measures");
  if (Status s = TakeRank(job_id, rank); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  Usage& u = Of(job_id);
  const auto now = clock_();
  auto it = u.sampled.find(rank);
  if (it != u.sampled.end() && now - it->second < kSampleInterval) {
    return Status::Error("rank " + std::to_string(rank) + " of job " + job_id +
                         " sent usage samples faster than one a second");
  }
  u.sampled[rank] = now;
  return Status::Ok();
}

void JobQuota::Forget(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.erase(job_id);
}

}  // namespace autopar
