// Retention (`--ckpt-keep=K`): which steps of a job to delete, in storage and on local disk.
//
// Rules:
//  * the K newest complete steps are kept (K < 1 is treated as 1: the newest complete step is
//    never deleted, whatever K says);
//  * older complete steps are deleted;
//  * an incomplete step with fewer than K complete steps newer than it is kept: its upload or
//    completion may still be running (under load a newer step can complete first, and deleting
//    the older one then left a COMPLETE manifest without its ranks' data);
//  * an incomplete step with K complete steps newer than it is deleted: complete it would be
//    deleted too, and its partial objects would otherwise stay forever;
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
