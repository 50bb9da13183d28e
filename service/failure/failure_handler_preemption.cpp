// FailureHandler's preemption handling; see failure_handler.h.
//
// A program that obeys autopar.ckpt's checkpoint requests also checkpoints when its task gets
// SIGTERM, and says so ("termination_checkpoint"). Slurm's record of the job decides what that
// SIGTERM was: with a preempt_time it is a preemption (core/failure/preemption.h); otherwise a
// scancel or a time limit, and nothing is done. A preempted run is no longer watched for hangs (its
// programs hold after their checkpoint); once the announced step is COMPLETE in storage the job
// is requeued at once, before the grace ends, so the preempting job gets the nodes sooner and the
// next run resumes from that step. Without an upload (no node can tell that every rank's copy is
// COMPLETE), or without --requeue-on-failure, Slurm requeues the job itself at the grace's end
// (PreemptMode=REQUEUE). Either way the preemption is recorded in the job's AdminComment, so it
// never counts against --requeue-on-failure.
#include <algorithm>

#include "core/failure/timeline.h"
#include "core/hostlist.h"
#include "core/text.h"
#include "failure_handler.h"

namespace autopar {
namespace {
constexpr double kRecheckS = 2;  // a run's preemption is asked of Slurm at most this often

EventFields PreemptedFields(const Preemption& p, const SlurmJob& job, int64_t count,
                            const std::string& then) {
  return {{"preempt_time", FormatEventTime(p.preempt_time, false)},
          {"grace_s", FormatFixed(p.grace_s, 0)},
          {"partition", job.partition},
          {"preemptions", std::to_string(count)},
          {"then", then}};
}
}  // namespace

void FailureHandler::OnTerminationCheckpoint(const JournalEvent& e, pid_t pid) {
  auto sender = ContextOf(pid);
  if (!sender || sender->job_id != e.job_id || e.step < 0) return;  // only the job's own tasks
  const double now = clock_();
  JobContext ctx;
  bool ask = false;  // Slurm is asked (outside the lock: a libslurm call may take a while)
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(e.job_id);
    if (it == jobs_.end() || it->second.run.ctx.job_id.empty()) return;
    Run& run = it->second.run;
    if (sender->restart_count != run.ctx.restart_count) return;  // a late one of an earlier run
    PreemptWatch& pw = run.preempt;
    pw.announced_step = std::max(pw.announced_step, e.step);
    ctx = run.ctx;
    if (!pw.slurm.preempted) {
      // Rank 0's always asks: it says when Slurm requeued the run itself (no grace time).
      if (e.rank != 0 && pw.checked_at >= 0 && now - pw.checked_at < kRecheckS) return;
      pw.checked_at = now;
      ask = true;
    }
  }
  if (ask && !ConfirmPreemption(ctx)) {
    // No grace: the SIGTERM was Slurm's requeue, and the program checkpointed in KillWait.
    if (e.rank == 0) NoteRequeuedBySlurm(ctx);
    return;
  }
  OnPreemptedComplete(ctx, -1);  // its step may be COMPLETE already
}

void FailureHandler::OnTerminated(const JournalEvent& e, pid_t pid) {
  auto sender = ContextOf(pid);
  if (!sender || sender->job_id != e.job_id) return;  // only the job's own tasks
  JobContext ctx;
  {
    std::lock_guard<std::mutex> lock(mu_);
    JobRecord& job = jobs_[e.job_id];
    job.seen = clock_();
    Run& run = job.run;
    const auto run_key = [](const JobContext& c) { return std::make_pair(c.restart_count, c.generation); };
    if (run.ctx.job_id.empty() || run_key(*sender) > run_key(run.ctx)) {
      // A run whose program never sent a heartbeat: the notice came while it restored its
      // checkpoint or started. This task's word starts the run's record, as a heartbeat would.
      run = NewRun(*sender, job.seen);
    }
    if (sender->restart_count != run.ctx.restart_count) return;
    PreemptWatch& pw = run.preempt;
    // Once per run and node: the program's own checkpoint (announced) is the better way out.
    if (pw.acted || pw.terminated || pw.announced_step >= 0) return;
    pw.terminated = true;
    ctx = run.ctx;
  }
  auto p = ConfirmPreemption(ctx);
  if (!p) {
    if (e.rank == 0) NoteRequeuedBySlurm(ctx);  // one line per run: rank 0's launcher's
    return;
  }
  if (!ctx.requeue_on_failure) return;  // Slurm requeues it at the grace's end
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(e.job_id);
    if (it == jobs_.end() || it->second.run.ctx.restart_count != ctx.restart_count) return;
    PreemptWatch& pw = it->second.run.preempt;
    if (pw.acted || pw.announced_step >= 0) return;
    pw.acted = true;
  }
  // The program ended at the notice without a checkpoint of its own: the job is requeued now,
  // before its batch script can end it as COMPLETED, and resumes from its last complete one.
  RequeueForPreemption(ctx, -1, *p);
}

std::optional<Preemption> FailureHandler::ConfirmPreemption(const JobContext& ctx) {
  auto job = slurm_->LoadJob(ctx.job_id);
  if (!job.ok() || job->restart_count != ctx.restart_count || !job->running()) return std::nullopt;
  Preemption p = PreemptionOf(job->preempt_time, job->end_time);
  if (!p.preempted) return std::nullopt;  // a scancel or a time limit: Slurm ends the job as it said
  int64_t step = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(ctx.job_id);
    if (it == jobs_.end() || it->second.run.ctx.restart_count != ctx.restart_count) return std::nullopt;
    PreemptWatch& pw = it->second.run.preempt;
    if (pw.slurm.preempted) return pw.slurm;
    pw.slurm = p;
    step = pw.announced_step;
  }
  // The batch host's node records it in the AdminComment at once (the budget must not count it
  // even when Slurm's own requeue at the grace's end comes first). The journal says it once:
  // here when Slurm requeues the job, else with autopard's requeue (one node makes it).
  if (job->batch_host == config_.node) {
    PreemptionNote note = RecordPreemption(ParsePreemptionNote(job->admin_comment), ctx.restart_count);
    SlurmJobUpdate u;
    u.job_id = ctx.job_id;
    u.admin_comment = WithPreemptionNote(job->admin_comment, note);
    const Status recorded = *u.admin_comment == job->admin_comment ? Status::Ok() : slurm_->Update(u);
    if (!(ctx.requeue_on_failure && ctx.ckpt_upload) || !recorded.ok()) {
      EventFields f = PreemptedFields(p, *job, note.count,
                                      "Slurm requeues the job at the grace's end (PreemptMode)");
      if (!recorded.ok()) f.emplace_back("warning", "preemption not recorded: " + recorded.message());
      Emit(ctx.job_id, event_kind::kPreempted, -1, step, FormatEventFields(f));
    }
  }
  return p;
}

void FailureHandler::NoteRequeuedBySlurm(const JobContext& ctx) {
  // A preemption without grace time: Slurm requeued the job at the notice, and the requeued
  // job's record no longer says why (no preempt time). Nor would an admin's `scontrol requeue`.
  if (ledger_.Recorded(ctx.job_id, ctx.restart_count)) return;  // autopar's own decision
  auto job = slurm_->LoadJob(ctx.job_id);
  if (!job.ok() || job->restart_count != ctx.restart_count + 1) return;
  {
    std::lock_guard<std::mutex> lock(mu_);  // once a run: its launcher's word or its checkpoint's
    auto it = jobs_.find(ctx.job_id);
    if (it == jobs_.end() || it->second.run.ctx.restart_count != ctx.restart_count ||
        it->second.run.preempt.requeue_noted)
      return;
    it->second.run.preempt.requeue_noted = true;
  }
  Emit(ctx.job_id, event_kind::kRequeuedBySlurm, -1, -1,
       FormatEventFields({{"restart", std::to_string(ctx.restart_count)},
                          {"reason", "the run ended at Slurm's SIGTERM and Slurm requeued the job "
                                     "at once (a preemption without grace time, or scontrol "
                                     "requeue): the next run resumes from the last complete "
                                     "checkpoint"}}));
}

void FailureHandler::OnPreemptedComplete(const JobContext& ctx_in, int64_t step) {
  JobContext ctx;
  Preemption p;
  int64_t ready = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(ctx_in.job_id);
    if (it == jobs_.end()) return;
    Run& run = it->second.run;
    if (run.ctx.restart_count != ctx_in.restart_count) return;
    PreemptWatch& pw = run.preempt;
    pw.complete_step = std::max(pw.complete_step, step);
    if (!pw.slurm.preempted || pw.acted || pw.announced_step < 0 ||
        pw.complete_step < pw.announced_step) {
      return;
    }
    if (!run.ctx.requeue_on_failure || !run.ctx.ckpt_upload) {
      pw.acted = true;  // Slurm requeues it at the grace's end
      return;
    }
    pw.acted = true;
    ctx = run.ctx;
    p = pw.slurm;
    ready = pw.complete_step;
  }
  RequeueForPreemption(ctx, ready, p);
}

void FailureHandler::RequeueForPreemption(const JobContext& ctx, int64_t step, const Preemption& p) {
  if (!ledger_.Claim(ctx.job_id, ctx.restart_count)) return;  // a failure was decided first
  auto job = slurm_->LoadJob(ctx.job_id);
  if (!job.ok()) {
    Emit(ctx.job_id, event_kind::kRequeueFailed, -1, step,
         FormatEventFields({{"class", "preemption"}, {"error", job.message()}}));
    return;
  }
  RequeueDecision d;
  d.action = RequeueAction::kRequeue;
  d.restart_count = ctx.restart_count;
  d.max_restarts = *ctx.requeue_on_failure;
  d.preemption = true;
  d.min_tasks = ElasticMinTasks(ctx, *job);  // the next run may start on fewer nodes
  d.note = ParseFailureNote(job->admin_comment).value_or(PastFailure{ctx.restart_count, "preemption", 0});
  if (!job->excluded_nodes.empty()) {
    if (auto ex = ExpandHostlist(job->excluded_nodes); ex.ok()) d.exclude_nodes = *ex;
  }
  d.reason = "preempted at " + FormatEventTime(p.preempt_time, false) + " (grace " +
             FormatFixed(p.grace_s, 0) + " s): " +
             (step >= 0 ? "step " + std::to_string(step) + " is COMPLETE"
                        : std::string("the program ended at the notice without a checkpoint of "
                                      "its own, so the next run resumes from the last complete "
                                      "one")) +
             "; requeued at once (not counted against --requeue-on-failure)";
  auto r = RecordAndRequeue(ctx, d, step, "preemption", clock_());
  if (!r) return;
  const PreemptionNote note = RecordPreemption(ParsePreemptionNote(job->admin_comment), ctx.restart_count);
  Emit(ctx.job_id, event_kind::kPreempted, -1, step,
       FormatEventFields(PreemptedFields(p, *job, note.count,
                                         "requeued by autopard at once (not counted against "
                                         "--requeue-on-failure)")));
  EventFields out = {{"class", "preemption"}, {"reason", d.reason}};
  for (const auto& w : r->warnings) out.emplace_back("warning", w);
  Emit(ctx.job_id, event_kind::kRequeue, -1, step, FormatEventFields(out));
}

}  // namespace autopar
