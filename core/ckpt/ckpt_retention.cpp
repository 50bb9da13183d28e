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
    } else if (!plan.latest_complete) {
      plan.keep.push_back(step);  // newer than every complete step: may still be uploading
    } else {
      plan.remove.push_back(step);
    }
  }
  return plan;
}

}  // namespace autopar
