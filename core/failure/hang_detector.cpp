#include "core/failure/hang_detector.h"

#include <algorithm>
#include <cstdio>

namespace autopar {

std::string HangVerdict::Describe() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "no progress for %.1f s (limit %.0f s%s)", idle_s, limit_s,
                first_step  ? ", first-step allowance"
                : finishing ? ", a rank finishing"
                            : "");
  std::string s = buf;
  s += last_step >= 0 ? "; last step " + std::to_string(last_step) : "; no step reported";
  if (!suspects.empty()) {
    s += "; suspects: rank";
    if (suspects.size() > 1) s += "s";
    for (size_t i = 0; i < suspects.size(); ++i) {
      s += (i ? "," : " ") + std::to_string(suspects[i]);
    }
  }
  return s;
}

HangDetector::HangDetector(HangSettings settings, double start_s, std::vector<int> expected_ranks)
    : settings_(settings), last_progress_s_(start_s) {
  for (int r : expected_ranks) ranks_[r];
}

void HangDetector::Heartbeat(int rank, int64_t step, double now_s) {
  RankState& r = ranks_[rank];
  r.exited = false;
  r.last_seen_s = now_s;
  if (r.first_step < 0) {
    r.first_step = step;
    r.step = step;
    return;
  }
  if (step > r.step) {
    progressed_ = true;
    last_progress_s_ = std::max(last_progress_s_, now_s);
  }
  r.step = step;
}

void HangDetector::RankExited(int rank) { ranks_[rank].exited = true; }

void HangDetector::Finishing(double now_s) {
  finishing_until_s_ =
      std::max(finishing_until_s_, now_s + settings_.timeout_s * settings_.first_step_factor);
}

double HangDetector::LimitS() const {
  const double limit =
      progressed_ ? settings_.timeout_s : settings_.timeout_s * settings_.first_step_factor;
  // A finishing rank's allowance, as a limit on the time since the last progress.
  return std::max(limit, finishing_until_s_ - last_progress_s_);
}

HangVerdict HangDetector::Check(double now_s) const {
  HangVerdict v;
  v.first_step = !progressed_;
  v.finishing = finishing_until_s_ > 0;
  v.limit_s = LimitS();
  v.idle_s = std::max(0.0, now_s - last_progress_s_);
  bool any_live = ranks_.empty();  // no rank known yet: still waiting for the first heartbeat
  int64_t lowest = INT64_MAX;
  for (const auto& [rank, r] : ranks_) {
    if (r.exited) continue;
    any_live = true;
    v.last_step = std::max(v.last_step, r.step);
    lowest = std::min(lowest, r.step);
  }
  if (!any_live) return v;
  for (const auto& [rank, r] : ranks_) {
    if (!r.exited && r.step == lowest) v.suspects.push_back(rank);
  }
  v.hung = v.idle_s > v.limit_s;
  return v;
}

double HangDetector::SecondsUntilDue(double now_s) const {
  return std::max(0.0, last_progress_s_ + LimitS() - now_s);
}

}  // namespace autopar
