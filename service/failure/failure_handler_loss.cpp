// FailureHandler's bad-loss handling (docs/health.md); see failure_handler.h.
#include "core/failure/launch_events.h"
#include "core/failure/timeline.h"
#include "core/text.h"
#include "failure_handler.h"

namespace autopar {

void FailureHandler::OnBadLoss(const JobContext& ctx, const LossAnomaly& anomaly,
                               const RankProcess& rank0) {
  int64_t done = 0;
  bool under_way = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const JobRecord& job = jobs_[ctx.job_id];
    done = job.rollbacks;
    const auto& p = job.pending_rollback;
    under_way = p && p->generation == ctx.generation && p->restart_count == ctx.restart_count;
  }
  if (under_way) return;  // this generation is being rolled back already
  const bool can_roll_back = ctx.in_place() && ctx.checkpoints;
  BadLossDecision d = DecideBadLoss(ctx.bad_loss, anomaly, done, can_roll_back);
  std::optional<ProcStat> launcher;
  if (d.action == BadLossAction::kRollback) {
    launcher = LauncherOf(ctx, rank0);
    if (!launcher) {
      d.action = BadLossAction::kStop;
      d.reason = anomaly.Describe() + "; no rollback: rank 0's autopar-launch is gone: the job is stopped";
    }
  }
  EventFields f = anomaly.Fields();
  f.emplace_back("action", BadLossActionName(d.action));
  f.emplace_back("reason", d.reason);
  Emit(ctx.job_id, event_kind::kBadLoss, 0, anomaly.step, FormatEventFields(f));
  if (d.action == BadLossAction::kWarn) return;
  if (d.action == BadLossAction::kStop) {
    auto stopped = StopOnce(*slurm_, ctx.job_id, ctx.restart_count, d.reason, RequeueLockPath(ctx.job_id));
    EventFields out = {{"reason", d.reason}};
    if (!stopped.ok()) out.emplace_back("note", stopped.message());
    if (!stopped.ok() || *stopped) Emit(ctx.job_id, event_kind::kStopped, -1, -1, FormatEventFields(out));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[ctx.job_id].pending_rollback = PendingRollback{ctx.restart_count, ctx.generation, anomaly, d};
  }
  Status st = proc_.queue_signal
                  ? proc_.queue_signal(launcher->pid, BadLossSignal(), static_cast<int>(ctx.generation))
                  : Status::Error("no way to signal the launcher");
  if (!st) {
    // The launcher cannot be told: nothing will ask for the rollback. Stop rather than train on.
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_[ctx.job_id].pending_rollback.reset();
    }
    const std::string reason = anomaly.Describe() + "; rank 0's launcher cannot be told (" +
                               st.message() + "): the job is stopped";
    auto stopped = StopOnce(*slurm_, ctx.job_id, ctx.restart_count, reason, "");
    EventFields out = {{"reason", reason}};
    if (!stopped.ok()) out.emplace_back("note", stopped.message());
    Emit(ctx.job_id, event_kind::kStopped, -1, -1, FormatEventFields(out));
  }
}

Result<RecoverReply> FailureHandler::RecoverBadLoss(const JobContext& ctx, int64_t generation) {
  PendingRollback p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(ctx.job_id);
    const bool asked = it != jobs_.end() && it->second.pending_rollback &&
                       it->second.pending_rollback->generation == generation &&
                       it->second.pending_rollback->restart_count == ctx.restart_count;
    if (!asked) {
      return Status::Error("recover: no rollback of generation " + std::to_string(generation) +
                           " of job " + ctx.job_id + " was asked for");
    }
    p = *it->second.pending_rollback;
    it->second.pending_rollback.reset();
    it->second.rollbacks = p.decision.attempt;
  }
  Failure failure;
  failure.kind = FailureClass::kBadLoss;
  failure.node = config_.node;
  failure.rank = 0;
  failure.made_progress = true;
  failure.note = p.anomaly.Describe();
  EventFields fields = {{"class", FailureClassName(failure.kind)},
                        {"generation", std::to_string(generation)},
                        {"reason", failure.Describe()}};
  Emit(ctx.job_id, event_kind::kFailure, 0, p.anomaly.step, FormatEventFields(fields));
  RecoverReply reply;
  reply.action = RecoveryActionName(RecoveryAction::kRestartInPlace);
  reply.reason = p.decision.reason;
  reply.resume_max_step = p.decision.resume_max_step;
  Emit(ctx.job_id, event_kind::kRecovery, -1, -1,
       FormatEventFields({{"action", reply.action},
                          {"generation", std::to_string(generation)},
                          {"rollback", std::to_string(p.decision.attempt)},
                          {"of", std::to_string(ctx.bad_loss.rollbacks)},
                          {"resume_max_step", std::to_string(p.decision.resume_max_step)},
                          {"reason", p.decision.reason}}));
  return reply;
}

}  // namespace autopar
