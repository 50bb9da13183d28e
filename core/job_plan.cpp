#include "core/job_plan.h"

#include <algorithm>

#include "core/text.h"

namespace autopar {
namespace {

Status Bad(const std::string& why) { return Status::Error("--auto-parallel: " + why); }

// Per-step fault tolerance (--fault-tolerance=step, docs/ft.md) heals a newcomer from any live
// member and averages gradients over all of them: it is right only where every rank holds the
// whole model and optimizer state. Until it works on the replicas of a sharded layout, such a
// run is planned as plain data parallelism, and a pin that shards the state is refused.
constexpr const char* kWholeStateLabel =
    "--fault-tolerance=step (every rank holds the whole state: tp=pp=cp=ep=1, no sharding)";

Status PinWholeState(const ParallelSpec& pin, PlanRequest* req) {
  if (Status st = CheckWholeStatePin(pin); !st) return st;
  req->tp = req->pp = req->cp = req->ep = 1;
  req->optimizer_sharding = false;
  req->grad_sharding = false;
  req->fsdp = false;
  req->pin_label = kWholeStateLabel;
  return Status::Ok();
}

}  // namespace

SitePlanning SitePlanningOf(const SiteConfig& site) {
  SitePlanning p;
  p.calibration = &site.calibration;
  p.headroom = site.plan_headroom;
  return p;
}

Result<PlanRequest> StepPlanRequest(const JobOptions& opts, int64_t gpus, int64_t gpus_per_node,
                                    const SitePlanning& site) {
  if (!opts.auto_parallel) return Bad("not requested");
  if (!opts.model) return Bad("needs --model (a preset, a size like 7B, or FILE.json)");
  if (!opts.gpu_type) return Bad("needs --gpu-type (or the site's default_gpu_type)");
  if (!opts.global_batch) return Bad("needs --global-batch (or the site's default_global_batch)");
  auto model = ResolveModel(*opts.model);
  if (!model) return Status::Error("--model: " + model.message());
  auto gpu = ResolveGpuType(*opts.gpu_type);
  if (!gpu) return Status::Error("--gpu-type: " + gpu.message());
  PlanRequest req;
  req.model = *model;
  req.gpu = *gpu;
  req.gpus = gpus;
  req.gpus_per_node = gpus_per_node;
  req.global_batch = *opts.global_batch;
  req.seq_len = opts.seq_len.value_or(0);
  const ParallelSpec& pin = *opts.auto_parallel;
  if (pin.tp) req.tp = pin.tp;
  if (pin.cp) req.cp = pin.cp;
  if (pin.ep) req.ep = pin.ep;
  if (pin.pp) req.pp = pin.pp;
  if (pin.dp) req.dp = pin.dp;
  if (pin.fsdp) req.fsdp = true;
  if (pin.fsdp_shard) req.fsdp_shard = pin.fsdp_shard;
  if (pin.fsdp_replicate) req.fsdp_replicate = pin.fsdp_replicate;
  if (!pin.grad_sharding.empty()) req.grad_sharding = pin.grad_sharding == "on";  // "" = searched
  if (auto g = ParseGradReduce(pin.grad_reduce); g.ok()) req.grad_reduce = *g;  // "" = searched
  if (pin.pinned() || !pin.grad_sharding.empty()) {
    req.pin_label = "--auto-parallel=" + pin.ToString();
  }
  if (opts.fault_tolerance_step.value_or(false)) {
    if (Status st = PinWholeState(pin, &req); !st) return st;
  }
  if (site.calibration) req.calibration = site.calibration->For(req.gpu.name);
  req.headroom_fraction = site.headroom;
  return req;
}

Result<Plan> PlanStep(const JobOptions& opts, int64_t gpus, int64_t gpus_per_node,
                      double max_mem_gib, const SitePlanning& site) {
  auto req = StepPlanRequest(opts, gpus, gpus_per_node, site);
  if (!req) return req.status();
  if (max_mem_gib > 0 && req->gpu.mem_gib > 0) {
    req->headroom_fraction = std::max(req->headroom_fraction, 1.0 - max_mem_gib / req->gpu.mem_gib);
  }
  auto plan = PlanJob(*req);
  if (!plan) {
    const std::string& m = plan.message();
    return StartsWith(m, "--") ? plan.status() : Bad(m);
  }
  return plan;
}

Result<EnvList> PlanEnvForTask(const std::string& plan_json, int64_t rank, int64_t world_size) {
  auto plan = PlanFromJson(plan_json);
  if (!plan) return Status::Error("AUTOPAR_PLAN_JSON: " + plan.message());
  const Layout& l = plan->chosen.layout;
  if (l.tp * l.cp * l.pp * l.dp != world_size)
    return Status::Error("AUTOPAR_PLAN_JSON: the plan is for " +
                         std::to_string(l.tp * l.cp * l.pp * l.dp) + " ranks, the step has " +
                         std::to_string(world_size));
  return PlanTaskEnv(*plan, static_cast<int>(rank));
}

}  // namespace autopar
