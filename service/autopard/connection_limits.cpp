#include "connection_limits.h"

namespace autopar {

std::string ConnectionLimits::Admit(uid_t uid) {
  std::lock_guard<std::mutex> l(mu_);
  int& mine = per_uid_[uid];
  if (mine >= max_per_uid_) {
    if (mine == 0) per_uid_.erase(uid);
    return "busy: uid " + std::to_string(uid) + " already has " + std::to_string(max_per_uid_) +
           " connections open (max_connections_per_uid)";
  }
  if (total_ >= max_total_) {
    if (mine == 0) per_uid_.erase(uid);
    return "busy: " + std::to_string(max_total_) + " connections open (max_connections)";
  }
  ++mine;
  ++total_;
  return "";
}

void ConnectionLimits::Release(uid_t uid) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = per_uid_.find(uid);
  if (it == per_uid_.end()) return;
  if (--it->second <= 0) per_uid_.erase(it);
  --total_;
}

int ConnectionLimits::total() const {
  std::lock_guard<std::mutex> l(mu_);
  return total_;
}

int ConnectionLimits::of(uid_t uid) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = per_uid_.find(uid);
  return it == per_uid_.end() ? 0 : it->second;
}

}  // namespace autopar
