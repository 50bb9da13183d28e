#include "launcher/launch.h"

#include "core/calibration/calibration.h"
#include "core/job_plan.h"
#include "core/options.h"
#include "core/plan/planner.h"
#include "core/site_config.h"

namespace autopar {

Result<PlanEnv> PlanEnvForRank(const EnvMap& env, int rank, int size) {
  PlanEnv out;
  auto it = env.find("AUTOPAR_PLAN_JSON");
  if (it == env.end() || it->second.empty()) return out;
  auto plan = PlanFromJson(it->second);
  if (!plan) return Status::Error("AUTOPAR_PLAN_JSON: " + plan.message());
  const Layout& l = plan->chosen.layout;
  const int64_t ranks = l.tp * l.cp * l.pp * l.dp;
  if (ranks != size) {
    out.warning = "the plan's layout tp=" + std::to_string(l.tp) +
                  (l.cp > 1 ? " cp=" + std::to_string(l.cp) : std::string()) +
                  " pp=" + std::to_string(l.pp) + " dp=" + std::to_string(l.dp) + " has " +
                  std::to_string(ranks) +
                  " ranks but the step has " + std::to_string(size) +
                  " tasks: AUTOPAR_TP_RANK/PP_RANK/DP_RANK are not set";
    return out;
  }
  for (auto& [k, v] : PlanTaskEnv(*plan, rank)) out.vars[k] = v;
  return out;
}

Result<std::string> ReplanJson(const EnvMap& env, int world, int per_node, double max_mem_gib) {
  // Only the options the planner reads: the others' site limits are not known here.
  JobOptions opts;
  const SiteConfig site;
  for (OptionId id : {OptionId::kAutoParallel, OptionId::kModel, OptionId::kGpuType,
                      OptionId::kGlobalBatch, OptionId::kSeqLen}) {
    auto it = env.find(GetOptionSpec(id).env);
    if (it == env.end()) continue;
    if (Status s = SetOption(opts, id, it->second.c_str(), site); !s) return s;
  }
  if (!opts.auto_parallel) return Status::Error("the job has no plan (--auto-parallel)");
  // The step's plan was made with the site's calibration and headroom (docs/planner.md): the
  // new one too.
  CalibrationFile calibration;
  double headroom = kDefaultMemoryHeadroom;
  if (auto it = env.find("AUTOPAR_PLAN_JSON"); it != env.end()) {
    auto step_plan = PlanFromJson(it->second);
    if (step_plan) headroom = step_plan->mem_headroom;
    if (step_plan && step_plan->calibration) {
      CalibrationEntry entry;
      entry.factor = step_plan->calibration->factor;
      entry.job = step_plan->calibration->job;
      calibration.gpus[step_plan->gpu_name] = entry;
    }
  }
  SitePlanning planning;
  planning.calibration = calibration.gpus.empty() ? nullptr : &calibration;
  planning.headroom = headroom;
  auto plan = PlanStep(opts, world, per_node, max_mem_gib, planning);
  if (!plan) return plan.status();
  return PlanToJson(*plan, false);
}

double PlanMemGib(const std::string& plan_json) {
  auto plan = PlanFromJson(plan_json);
  return plan ? plan->chosen.memory.total_gib : 0;
}

std::string PlanSummary(const std::string& plan_json) {
  if (plan_json.empty()) return "none";
  auto plan = PlanFromJson(plan_json);
  if (!plan) return "unreadable";
  const Layout& l = plan->chosen.layout;
  const std::string fsdp = !l.fsdp() ? ""
                           : l.fsdp_replicate() > 1
                               ? " hsdp=" + std::to_string(l.fsdp_shard) + "," +
                                     std::to_string(l.fsdp_replicate())
                               : " fsdp=" + std::to_string(l.fsdp_shard);
  return "tp=" + std::to_string(l.tp) + (l.cp > 1 ? " cp=" + std::to_string(l.cp) : "") +
         " pp=" + std::to_string(l.pp) + " dp=" + std::to_string(l.dp) + fsdp +
         " micro_batch=" + std::to_string(l.micro_batch) +
         " grad_accum=" + std::to_string(l.grad_accum) +
         (l.grad_reduce == GradReduce::kBf16 ? " grad_reduce=bf16" : "");
}

}  // namespace autopar
