#include "core/failure/time_limit.h"

#include <algorithm>
#include <cstdio>

#include "core/failure/timeline.h"

namespace autopar {

std::string TimeLimitPlan::Describe() const {
  if (!limited) return "no time limit";
  char buf[120];
  std::snprintf(buf, sizeof buf, "checkpoint estimate %.1f s, margin %.1f s: checkpoint requested at ",
                ckpt_estimate_s, margin_s);
  return buf + FormatEventTime(request_at, false);
}

TimeLimitPlan PlanTimeLimit(const TimeLimitSettings& s, const TimeLimitInputs& in) {
  TimeLimitPlan p;
  if (in.end_time <= 0) return p;
  p.limited = true;
  const auto& d = in.ckpt_durations_s;
  size_t first = d.size() > s.window ? d.size() - s.window : 0;
  p.ckpt_estimate_s = s.default_ckpt_s;
  if (first < d.size()) {
    p.ckpt_estimate_s = *std::max_element(d.begin() + static_cast<std::ptrdiff_t>(first), d.end());
  }
  double margin = std::max(0.0, in.step_s) + s.safety_factor * p.ckpt_estimate_s + s.requeue_s;
  margin = std::max(margin, s.min_margin_s);
  double run = in.end_time - in.start_time;
  if (run > 0) margin = std::min(margin, s.max_fraction * run);
  p.margin_s = margin;
  p.request_at = in.end_time - margin;
  return p;
}

bool CheckpointDue(const TimeLimitPlan& plan, double now) {
  return plan.limited && now >= plan.request_at;
}

}  // namespace autopar
