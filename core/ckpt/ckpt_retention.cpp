#include "core/ckpt/ckpt_retention.h"

#include <map>

namespace autopar {

RetentionPlan PlanRetention(const std::vector<StepStatus>& steps, int keep_last) {
  std::map<int64_t, bool, std::greater<int64_t>> by_step;  // newest first
  for (const auto& s : steps) by_step[s.step] = by_step[s.step] || s.complete;
  RetentionPlan plan;
  int keep = keep_last < 1 ? 1 : keep_last;
  int complete_kept = 0;
  for (const auto& [step, complete] : by_step) {
    if (complete) {
      if (!plan.latest_complete) plan.latest_complete = step;
      if (complete_kept < keep) {
        ++complete_kept;
        plan.keep.push_back(step);
      } else {
        plan.remove.push_back(step);
      }
    } else if (complete_kept < keep) {
      // It may still complete and be among the K newest: newer than every complete step (its
      // upload may be running), or older with fewer than K complete steps newer than it (under
      // load another node's completion of it can come after a newer step's).
      plan.keep.push_back(step);
    } else {
      plan.remove.push_back(step);  // even complete it would be removed: partial objects left
    }
  }
  return plan;
}

}  // namespace autopar
