#include "launcher/launch.h"
#include "core/plan/planner.h"

namespace autopar {

Result<PlanEnv> PlanEnvForRank(const EnvMap& env, int rank, int size) {
  PlanEnv out;
  auto it = env.find("AUTOPAR_PLAN_JSON");
  if (it == env.end() || it->second.empty()) return out;
  auto plan = PlanFromJson(it->second);
  if (!plan) return Status::Error("AUTOPAR_PLAN_JSON: " + plan.message());
  const Layout& l = plan->chosen.layout;
  const int64_t ranks = l.tp * l.pp * l.dp;
  if (ranks != size) {
    out.warning = "the plan's layout tp=" + std::to_string(l.tp) + " pp=" + std::to_string(l.pp) +
                  " dp=" + std::to_string(l.dp) + " has " + std::to_string(ranks) +
                  " ranks but the step has " + std::to_string(size) +
                  " tasks: AUTOPAR_TP_RANK/PP_RANK/DP_RANK are not set";
    return out;
  }
  for (auto& [k, v] : PlanTaskEnv(*plan, rank)) out.vars[k] = v;
  return out;
}

}  // namespace autopar
