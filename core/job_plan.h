// The plan of one job step: from the job's options (--auto-parallel, --model, --gpu-type,
// --global-batch, --seq-len) and the step's real allocation (one task per GPU) to a Plan, and from
// the plan that travels in the environment to one task's variables. Pure; thread-safe.
#pragma once

#include <cstdint>

#include "autopar/status.h"
#include "core/calibration/calibration.h"
#include "core/options.h"
#include "core/plan/planner.h"
#include "core/task_env.h"

namespace autopar {

// What the site sets for every plan (plugstack.conf): its calibration file (calibration=PATH;
// null: none) and the fraction of each GPU's memory a plan keeps free (plan_headroom=).
struct SitePlanning {
  const CalibrationFile* calibration = nullptr;
  double headroom = kDefaultMemoryHeadroom;
};
// The site's planning settings from its plugstack.conf arguments (`site` must outlive the result).
SitePlanning SitePlanningOf(const SiteConfig& site);

// The planner's request for a step of `gpus` tasks, `gpus_per_node` of them on each node.
// Fails with one line naming the missing or inconsistent option ("--auto-parallel: needs
// --global-batch ..."). The request keeps the site's headroom and, when the site's calibration
// has the job's GPU type, that calibration.
Result<PlanRequest> StepPlanRequest(const JobOptions& opts, int64_t gpus, int64_t gpus_per_node,
                                    const SitePlanning& site = {});

// StepPlanRequest + PlanJob: the step's plan, or the planner's one-line refusal prefixed with
// "--auto-parallel: " when it does not name the option itself. `max_mem_gib` > 0: every layout
// must also fit in that much memory per GPU (a re-plan after an out-of-memory failure).
Result<Plan> PlanStep(const JobOptions& opts, int64_t gpus, int64_t gpus_per_node,
                      double max_mem_gib = 0, const SitePlanning& site = {});

// One task's AUTOPAR_* plan variables from the plan JSON its step carries (AUTOPAR_PLAN_JSON).
// Fails when the JSON is malformed or was made for another world size.
Result<EnvList> PlanEnvForTask(const std::string& plan_json, int64_t rank, int64_t world_size);

}  // namespace autopar
