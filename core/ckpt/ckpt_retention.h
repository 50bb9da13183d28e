// Retention (`--ckpt-keep=K`): which steps of a job to delete, in storage and on local disk.
//
// Rules:
//  * the K newest complete steps are kept (K < 1 is treated as 1: the newest complete step is
//    never deleted, whatever K says);
//  * older complete steps are deleted;
//  * an incomplete step newer than the newest complete one is kept (its upload may be running);
//  * an incomplete step older than the newest complete one is deleted: it can never become the
//    latest, and its partial objects would otherwise stay forever;
//  * without any complete step nothing is deleted.
//
// Pure function, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace autopar {

struct StepStatus {
  int64_t step = 0;
  bool complete = false;
};

struct RetentionPlan {
  std::vector<int64_t> keep;    // descending
  std::vector<int64_t> remove;  // descending
  std::optional<int64_t> latest_complete;
};

// `steps` in any order; duplicates of a step are merged (complete if any copy is).
RetentionPlan PlanRetention(const std::vector<StepStatus>& steps, int keep_last);

}  // namespace autopar
