#include "core/failure/launch_events.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "core/failure/requeue_policy.h"
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

namespace {

// The signal a shell's exit status 128 + N says ended the program; 0 for an exit.
int SignalOfExitStatus(int exit_status) {
  return exit_status > 128 && exit_status < 128 + 65 ? exit_status - 128 : 0;
}

}  // namespace

int RankExit::Signal() const { return SignalOfExitStatus(exit_status); }

EventFields RankExit::Fields() const {
  EventFields f = {{"exit", std::to_string(exit_status)}};
  if (Signal() != 0) f.emplace_back("signal", std::to_string(Signal()));
  f.emplace_back("run_s", FormatFixed(run_s, 1));
  if (generation >= 0) f.emplace_back("generation", std::to_string(generation));
  if (!oom.empty()) f.emplace_back("oom", oom);
  return f;
}

Result<RankExit> RankExit::Parse(const EventFields& fields) {
  RankExit r;
  bool have_exit = false;
  for (const auto& [k, v] : fields) {
    if (k == "exit") {
      auto n = ParseInt(v, 0, 255);
      if (!n) return Status::Error("rank_exit: exit: not a status in [0, 255]: '" + v + "'");
      r.exit_status = static_cast<int>(*n);
      have_exit = true;
    } else if (k == "run_s") {
      auto s = ParseDouble(v);
      if (!s) return Status::Error("rank_exit: run_s: not seconds: '" + v + "'");
      r.run_s = *s;
    } else if (k == "generation") {
      auto n = ParseInt(v, 0, INT32_MAX);
      if (!n) return Status::Error("rank_exit: generation: not a count: '" + v + "'");
      r.generation = *n;
    } else if (k == "oom") {
      r.oom = v;
    }
  }
  if (!have_exit) return Status::Error("rank_exit: exit: missing");
  for (const auto& [k, v] : fields) {
    if (k == "signal" && v != std::to_string(r.Signal())) {
      return Status::Error("rank_exit: signal: " + v + " is not the exit status's (" +
                           std::to_string(r.exit_status) + ")");
    }
  }
  return r;
}

std::optional<Request> RankExitRequest(const GetEnv& getenv, int rank, const std::string& node,
                                       const RankExit& exit) {
  return JobEventRequest(getenv, event_kind::kRankExit, rank, -1, node, exit.Fields());
}

Status ReportRankExit(const GetEnv& getenv, int rank, const std::string& node,
                      const RankExit& exit, int timeout_ms) {
  auto r = RankExitRequest(getenv, rank, node, exit);
  if (!r) return Status::Ok();
  auto reply = CallDaemonOk(Var(getenv, "AUTOPAR_SOCKET"), *r, timeout_ms, DaemonRetryMs(getenv));
  if (!reply.ok()) return Status::Error("reporting the exit to " + reply.message());
  return Status::Ok();
}

int HungProgramSignal() { return SIGRTMIN + 3; }
int BadLossSignal() { return SIGRTMIN + 4; }

int RecoverDetail::Signal() const { return SignalOfExitStatus(exit_status); }

EventFields RecoverDetail::Fields() const {
  EventFields f = {{"class", kind}, {"exit", std::to_string(exit_status)}};
  if (Signal() != 0) f.emplace_back("signal", std::to_string(Signal()));
  f.emplace_back("run_s", FormatFixed(run_s, 3));
  f.emplace_back("node", node);
  f.emplace_back("generation", std::to_string(generation));
  f.emplace_back("detected", FormatFixed(detected, 3));
  if (!error.empty()) f.emplace_back("error", error);
  if (!unreachable.empty()) f.emplace_back("unreachable", unreachable);
  if (!lost.empty()) {
    f.emplace_back("lost", lost);
    f.emplace_back("spares", std::to_string(spares));
    if (min_nodes > 0) {
      f.emplace_back("remaining", std::to_string(remaining));
      f.emplace_back("min_nodes", std::to_string(min_nodes));
      if (!plan_refusal.empty()) f.emplace_back("plan_refusal", plan_refusal);
    }
  }
  if (!history.empty()) f.emplace_back("history", history);
  return f;
}

Result<RecoverDetail> RecoverDetail::Parse(const EventFields& fields) {
  RecoverDetail d;
  bool have_generation = false;
  for (const auto& [k, v] : fields) {
    auto count = [&k = k, &v = v](int64_t lo, int64_t hi, int64_t* out) -> Status {
      auto n = ParseInt(v, lo, hi);
      if (!n) return Status::Error("recover: detail: " + k + ": not a number in [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]: '" + v + "'");
      *out = *n;
      return Status::Ok();
    };
    auto seconds = [&k = k, &v = v](double* out) -> Status {
      auto s = ParseDouble(v);
      if (!s) return Status::Error("recover: detail: " + k + ": not seconds: '" + v + "'");
      *out = *s;
      return Status::Ok();
    };
    Status st;
    int64_t n = 0;
    if (k == "class") {
      d.kind = v;
    } else if (k == "generation") {
      st = count(0, INT32_MAX, &d.generation);
      have_generation = true;
    } else if (k == "exit") {
      st = count(-1, 255, &n);
      d.exit_status = static_cast<int>(n);
    } else if (k == "run_s") {
      st = seconds(&d.run_s);
    } else if (k == "detected") {
      st = seconds(&d.detected);
    } else if (k == "spares") {
      st = count(0, INT32_MAX, &d.spares);
    } else if (k == "remaining") {
      st = count(0, INT32_MAX, &d.remaining);
    } else if (k == "min_nodes") {
      st = count(0, INT32_MAX, &d.min_nodes);
    } else if (k == "node") {
      d.node = v;
    } else if (k == "error") {
      d.error = v;
    } else if (k == "lost") {
      d.lost = v;
    } else if (k == "plan_refusal") {
      d.plan_refusal = v;
    } else if (k == "history") {
      d.history = v;
    } else if (k == "unreachable") {
      d.unreachable = v;
    }
    if (!st) return st;
  }
  auto kind = ParseFailureClass(d.kind);
  if (!kind) return Status::Error("recover: detail: " + kind.message());
  if (!have_generation) return Status::Error("recover: detail: generation: missing");
  if (*kind == FailureClass::kNodeLoss && d.lost.empty()) {
    return Status::Error("recover: detail: node-loss without lost=NODES");
  }
  return d;
}

std::optional<Request> RecoverRequest(const GetEnv& getenv, int rank, const RecoverDetail& detail) {
  auto r = JobEventRequest(getenv, "recover", rank, -1, "", detail.Fields());
  if (r) {
    r->op = Op::kRecover;
    r->kind.clear();
  }
  return r;
}

Result<RecoverReply> AskRecovery(const GetEnv& getenv, int rank, const RecoverDetail& detail,
                                 int timeout_ms) {
  auto r = RecoverRequest(getenv, rank, detail);
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
          {"optimizer_sharding", l.optimizer_sharding() ? "1" : "0"},
          {"grad_sharding", l.grad_sharding() ? "1" : "0"},
          {"grad_reduce", GradReduceName(l.grad_reduce)},
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
