#include "auth.h"

#include <algorithm>
#include <iterator>
#include <thread>

namespace autopar {

CachedJobOwners::CachedJobOwners(std::unique_ptr<JobOwnerLookup> inner, std::chrono::seconds ttl,
                                 std::function<std::chrono::steady_clock::time_point()> now,
                                 size_t max_entries)
    : inner_(std::move(inner)),
      ttl_(ttl),
      max_entries_(std::max<size_t>(max_entries, 1)),
      now_(std::move(now)) {
  if (!now_) now_ = [] { return std::chrono::steady_clock::now(); };
}

Result<uid_t> CachedJobOwners::Owner(const std::string& job_id) {
  if (ttl_.count() <= 0) return inner_->Owner(job_id);
  auto t = now_();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(job_id);
    if (it != cache_.end() && t - it->second.second < ttl_) return it->second.first;
  }
  auto owner = inner_->Owner(job_id);
  if (owner) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cache_.size() >= max_entries_ && cache_.find(job_id) == cache_.end()) {
      for (auto it = cache_.begin(); it != cache_.end();) {
        it = t - it->second.second >= ttl_ ? cache_.erase(it) : std::next(it);
      }
      if (cache_.size() >= max_entries_) {
        cache_.erase(std::min_element(
            cache_.begin(), cache_.end(),
            [](const auto& a, const auto& b) { return a.second.second < b.second.second; }));
      }
    }
    cache_[job_id] = {*owner, t};
  }
  return owner;
}

std::optional<uid_t> CachedJobOwners::Known(const std::string& job_id) {
  if (ttl_.count() <= 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(job_id);
  if (it != cache_.end() && now_() - it->second.second < ttl_) return it->second.first;
  return std::nullopt;
}

Authorizer::Authorizer(JobOwnerLookup* owners, std::vector<uid_t> privileged, Clock now, Sleep sleep)
    : owners_(owners), privileged_(std::move(privileged)), now_(std::move(now)), sleep_(std::move(sleep)) {
  if (!now_) now_ = [] { return std::chrono::steady_clock::now(); };
  if (!sleep_) sleep_ = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
  if (std::find(privileged_.begin(), privileged_.end(), 0u) == privileged_.end()) {
    privileged_.push_back(0);
  }
}

bool Authorizer::IsPrivileged(uid_t uid) const {
  return std::find(privileged_.begin(), privileged_.end(), uid) != privileged_.end();
}

Result<uid_t> Authorizer::OwnerFor(const Peer& peer, const std::string& job_id) {
  if (auto known = owners_->Known(job_id)) return *known;
  bool throttled = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& asked = unknown_[peer.uid];
    const auto t = now_();
    while (!asked.empty() && t - asked.front() >= kUnknownWindow) asked.pop_front();
    throttled = static_cast<int>(asked.size()) >= kUnknownBudget;
  }
  std::unique_lock<std::mutex> one_at_a_time(throttle_mu_, std::defer_lock);
  if (throttled) {
    one_at_a_time.lock();
    sleep_(kThrottle);
  }
  auto owner = owners_->Owner(job_id);
  if (!owner) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto t = now_();
    unknown_[peer.uid].push_back(t);
    if (unknown_.size() > 4096) {  // uids that asked long ago
      for (auto it = unknown_.begin(); it != unknown_.end();) {
        it = it->second.empty() || t - it->second.back() >= kUnknownWindow ? unknown_.erase(it) : std::next(it);
      }
    }
  }
  return owner;
}

Status Authorizer::Check(const Peer& peer, const std::string& what, const std::string& job_id) {
  if (IsPrivileged(peer.uid)) return Status::Ok();
  auto owner = OwnerFor(peer, job_id);
  if (!owner) return Status::Error(what + ": " + owner.message());
  if (*owner != peer.uid) {
    return Status::Error(what + ": permission denied: job " + job_id + " belongs to uid " +
                         std::to_string(*owner) + ", not to you (uid " +
                         std::to_string(peer.uid) + ")");
  }
  return Status::Ok();
}

Status Authorizer::CheckRecorded(const Peer& peer, const std::string& what,
                                 const std::string& job_id,
                                 const std::function<std::vector<int64_t>()>& recorded) {
  if (IsPrivileged(peer.uid)) return Status::Ok();
  auto owner = OwnerFor(peer, job_id);
  int64_t other = -1;
  bool known = false;
  if (owner) {
    known = true;
    if (*owner != peer.uid) other = *owner;
  } else {
    for (int64_t uid : recorded()) {
      if (uid < 0) continue;
      known = true;
      if (uid != static_cast<int64_t>(peer.uid)) other = uid;
    }
  }
  if (!known) return Status::Error(what + ": " + owner.message());
  if (other >= 0) {
    return Status::Error(what + ": permission denied: job " + job_id + " belongs to uid " +
                         std::to_string(other) + ", not to you (uid " +
                         std::to_string(peer.uid) + ")");
  }
  return Status::Ok();
}

Result<uid_t> Authorizer::FileOwner(const Peer& peer, const std::string& job_id) {
  auto owner = owners_->Owner(job_id);
  if (owner) return owner;
  if (IsPrivileged(peer.uid)) return peer.uid;
  return owner.status();
}

}  // namespace autopar
