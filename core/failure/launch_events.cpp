#include "core/failure/launch_events.h"

#include <csignal>
#include <cstdio>

#include "core/plan/planner.h"
#include "core/text.h"

namespace autopar {
namespace {

std::string Var(const GetEnv& getenv, const char* name, const char* dflt = "") {
  const char* v = getenv(name);
  return v && *v ? v : dflt;
}

}  // namespace

std::optional<Request> JobEventRequest(const GetEnv& getenv, const std::string& kind, int rank,
                                       int64_t step, const std::string& node,
                                       const EventFields& fields) {
  const std::string socket = Var(getenv, "AUTOPAR_SOCKET");
  const std::string job = Var(getenv, "SLURM_JOB_ID");
  if (socket.empty() || job.empty()) return std::nullopt;
  Request r;
  r.op = Op::kEvent;
  r.job_id = job;
  r.kind = kind;
  r.rank = rank;
  r.step = step;
  r.node = node;
  r.detail = FormatEventFields(fields);
  return r;
}

Status SendJobEvent(const GetEnv& getenv, const std::optional<Request>& request, int timeout_ms) {
  if (!request) return Status::Ok();
  auto reply = CallDaemonOk(Var(getenv, "AUTOPAR_SOCKET"), *request, timeout_ms, DaemonRetryMs(getenv));
  if (!reply.ok()) return Status::Error("journalling " + request->kind + ": " + reply.message());
  return Status::Ok();
}

std::optional<Request> RankExitRequest(const GetEnv& getenv, int rank, const std::string& node,
                                       int exit_status, double run_s, int64_t generation,
                                       const std::string& oom) {
  EventFields f = {{"exit", std::to_string(exit_status)}};
  if (exit_status > 128 && exit_status < 128 + 65) {
    f.emplace_back("signal", std::to_string(exit_status - 128));
  }
  f.emplace_back("run_s", FormatFixed(run_s, 1));
  if (generation >= 0) f.emplace_back("generation", std::to_string(generation));
  if (!oom.empty()) f.emplace_back("oom", oom);
  return JobEventRequest(getenv, event_kind::kRankExit, rank, -1, node, f);
}

Status ReportRankExit(const GetEnv& getenv, int rank, const std::string& node, int exit_status,
                      double run_s, int timeout_ms, int64_t generation, const std::string& oom) {
  auto r = RankExitRequest(getenv, rank, node, exit_status, run_s, generation, oom);
  if (!r) return Status::Ok();
  auto reply = CallDaemonOk(Var(getenv, "AUTOPAR_SOCKET"), *r, timeout_ms, DaemonRetryMs(getenv));
  if (!reply.ok()) return Status::Error("reporting the exit to " + reply.message());
  return Status::Ok();
}

int HungProgramSignal() { return SIGRTMIN + 3; }
int BadLossSignal() { return SIGRTMIN + 4; }

std::optional<Request> RecoverRequest(const GetEnv& getenv, int rank, const EventFields& failure) {
  auto r = JobEventRequest(getenv, "recover", rank, -1, "", failure);
  if (r) {
    r->op = Op::kRecover;
    r->kind.clear();
  }
  return r;
}

Result<RecoverReply> AskRecovery(const GetEnv& getenv, int rank, const EventFields& failure,
                                 int timeout_ms) {
  auto r = RecoverRequest(getenv, rank, failure);
  if (!r) return Status::Error("no autopard to decide the recovery (AUTOPAR_SOCKET is not set)");
  auto reply = CallDaemonOk(Var(getenv, "AUTOPAR_SOCKET"), *r, timeout_ms, DaemonRetryMs(getenv));
  if (!reply.ok()) return Status::Error("asking autopard for the recovery: " + reply.message());
  return reply->recover;
}

bool FirstStepOfJob(const GetEnv& getenv) {
  return Var(getenv, "SLURM_STEP_ID", "0") == "0" && Var(getenv, "SLURM_RESTART_COUNT", "0") == "0";
}

EventFields SubmittedFields(const GetEnv& getenv) {
  const std::string json = Var(getenv, "AUTOPAR_PLAN_JSON");
  if (json.empty()) return {{"plan", "none"}};
  auto plan = PlanFromJson(json);
  if (!plan) return {{"plan_error", plan.message()}};
  const PlanCandidate& c = plan->chosen;
  const Layout& l = c.layout;
  EventFields f = {{"model", plan->model_name},
          {"gpus", std::to_string(plan->gpus)},
          {"tp", std::to_string(l.tp)},
          {"cp", std::to_string(l.cp)},
          {"pp", std::to_string(l.pp)},
          {"dp", std::to_string(l.dp)},
          {"micro_batch", std::to_string(l.micro_batch)},
          {"grad_accum", std::to_string(l.grad_accum)},
          {"recompute", RecomputeName(l.recompute)},
          {"optimizer_sharding", l.optimizer_sharding ? "1" : "0"},
          {"mem_gib", FormatFixed(c.memory.total_gib, 1)},
          {"step_s", FormatFixed(c.step_time_s, 3)},
          {"mfu", FormatFixed(c.mfu, 4)},
          {"gpu", plan->gpu_name}};
  // A calibrated plan names its calibration (docs/planner.md), which autopar calibrate composes.
  if (plan->calibration) {
    f.emplace_back("calibration", FormatFixed(plan->calibration->factor, 6));
    f.emplace_back("calibration_job", plan->calibration->job);
  }
  return f;
}

EventFields StepStartedFields(const GetEnv& getenv) {
  return {{"step", Var(getenv, "SLURM_STEP_ID", "-")},
          {"nodes", Var(getenv, "SLURM_STEP_NODELIST", Var(getenv, "SLURM_JOB_NODELIST", "-").c_str())},
          {"ranks", Var(getenv, "SLURM_STEP_NUM_TASKS", Var(getenv, "SLURM_NTASKS", "1").c_str())},
          {"restart", Var(getenv, "SLURM_RESTART_COUNT", "0")}};
}

}  // namespace autopar
