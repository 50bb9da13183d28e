// FailureHandler's time-limit handling; see failure_handler.h.
#include <algorithm>
#include <cstdio>

#include "core/hostlist.h"
#include "core/text.h"
#include "core/failure/timeline.h"
#include "failure_handler.h"

namespace autopar {
std::vector<double> FailureHandler::CkptDurationsLocked(const std::string& job_id) const {
  std::vector<double> out;
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return out;
  for (const auto& [step, t] : it->second.ckpt_times) {
    if (t.committed > 0 && t.done >= t.committed) out.push_back(t.done - t.committed);
  }
  return out;
}

void FailureHandler::TickTimeLimits(double now) {
  std::vector<std::pair<std::string, int64_t>> loads;  // job, restart count
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [job, record] : jobs_) {
      if (TimeLimitRefreshDueLocked(&record.run, now)) loads.emplace_back(job, record.run.ctx.restart_count);
    }
  }
  std::vector<PendingEvent> out;
  // Slurm's view, outside the lock (a libslurm call may take a while).
  for (const auto& [job_id, restart_count] : loads) RefreshTimeLimit(job_id, restart_count, now, &out);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [job, record] : jobs_) {
      if (auto request = TimeLimitRequestLocked(job, &record.run, now)) out.push_back(std::move(*request));
    }
  }
  for (const auto& p : out) Emit(p.job_id, p.kind, -1, p.step, p.detail);
}

bool FailureHandler::TimeLimitRefreshDueLocked(Run* run, double now) {
  TimeLimitWatch& tl = run->tl;
  if (!run->ctx.requeue_on_failure || !run->ctx.ckpt_upload || tl.done || tl.acted) return false;
  // After the end time, sooner: Slurm forgets an ended job after MinJobAge, and the missed
  // time limit is journalled from its TIMEOUT state.
  const double every = tl.end_time > 0 && now >= tl.end_time ? std::min(5.0, config_.job_refresh_s)
                                                             : config_.job_refresh_s;
  if (tl.loaded_at >= 0 && now - tl.loaded_at < every) return false;
  tl.loaded_at = now;
  return true;
}

void FailureHandler::RefreshTimeLimit(const std::string& job_id, int64_t restart_count, double now,
                                      std::vector<PendingEvent>* out) {
  auto job = slurm_->LoadJob(job_id);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || it->second.run.ctx.restart_count != restart_count) return;
  TimeLimitWatch& tl = it->second.run.tl;
  if (!job.ok()) {
    // slurmctld busy or down: try again at the next refresh; a job gone long after its end
    // is no longer watched.
    if (tl.end_time > 0 && now > tl.end_time + 600) tl.done = true;
    return;
  }
  if (job->restart_count != restart_count) {
    tl.done = true;  // requeued by someone else: that run is over
    return;
  }
  if (!job->running()) {
    if (tl.requested && !tl.acted && job->state == "TIMEOUT") {
      out->push_back({job_id, event_kind::kTimeLimitMissed, tl.max_step,
                      FormatEventFields(
                          {{"requested_at", FormatEventTime(tl.requested_at, false)},
                           {"end", FormatEventTime(tl.end_time, false)},
                           {"reason", "the job reached its time limit before a checkpoint "
                                      "committed after the request was COMPLETE; not requeued "
                                      "(the program ignored the request or its checkpoint "
                                      "took longer than the margin)"}})});
    }
    tl.done = true;
    return;
  }
  tl.start_time = job->start_time;
  tl.end_time = job->time_limit_min < 0 ? 0 : job->end_time;
}

std::optional<FailureHandler::PendingEvent> FailureHandler::TimeLimitRequestLocked(const std::string& job,
                                                                                   Run* run, double now) {
  TimeLimitWatch& tl = run->tl;
  if (!run->ctx.requeue_on_failure || tl.done || tl.acted || tl.requested || tl.end_time <= 0) {
    return std::nullopt;
  }
  // This node's ranks have all ended (the training finished, or they were killed): nothing
  // to ask. Slurm's state may lag by up to a refresh.
  bool alive = false;
  for (const auto& [rank, process] : run->rank_procs) alive = alive || Alive(process);
  if (!alive) return std::nullopt;
  TimeLimitInputs in;
  in.start_time = tl.start_time;
  in.end_time = tl.end_time;
  if (tl.max_step > tl.first_step) {
    in.step_s = (tl.max_step_time - tl.first_step_time) / static_cast<double>(tl.max_step - tl.first_step);
  }
  in.ckpt_durations_s = CkptDurationsLocked(job);
  TimeLimitPlan plan = PlanTimeLimit(config_.time_limit, in);
  if (!CheckpointDue(plan, now)) return std::nullopt;
  tl.requested = true;
  tl.requested_at = now;
  tl.plan = plan;
  return PendingEvent{job, event_kind::kTimeLimitRequest, tl.max_step,
                      FormatEventFields({{"end", FormatEventTime(tl.end_time, false)},
                                         {"left_s", FormatFixed(tl.end_time - now, 1)},
                                         {"margin_s", FormatFixed(plan.margin_s, 1)},
                                         {"ckpt_estimate_s", FormatFixed(plan.ckpt_estimate_s, 1)},
                                         {"ckpt_observed", std::to_string(in.ckpt_durations_s.size())},
                                         {"step_s", FormatFixed(in.step_s, 1)},
                                         {"plan", plan.Describe()}})};
}

void FailureHandler::OnCheckpointEvent(const JournalEvent& e, pid_t pid) {
  const bool announce = e.kind == event_kind::kTimeLimitCheckpoint;
  std::optional<JobContext> sender;
  if (announce) {
    sender = ContextOf(pid);
    if (!sender || sender->job_id != e.job_id) return;  // only the job's own tasks announce
  }
  JobContext ctx;
  TimeLimitPlan plan;
  bool progress = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    JobRecord& job = jobs_[e.job_id];
    job.seen = clock_();
    if (!announce && e.step >= 0) {
      auto& steps = job.ckpt_times;
      CkptTimes& t = steps[e.step];
      if (e.kind == event_kind::kCkptCommitted) {
        t.committed = t.committed > 0 ? std::min(t.committed, e.time) : e.time;
      } else {
        t.done = std::max(t.done, e.time);
      }
      while (steps.size() > 64) steps.erase(steps.begin());
    }
    Run& run = job.run;
    if (run.ctx.job_id.empty()) return;
    TimeLimitWatch& tl = run.tl;
    if (!run.ctx.requeue_on_failure || tl.acted || e.step < 0) return;
    if (announce) {
      if (sender->restart_count != run.ctx.restart_count) return;  // a late one of an earlier run
      tl.announced_step = std::max(tl.announced_step, e.step);
      return;
    }
    if (e.kind == event_kind::kCkptCommitted) {
      if (tl.delivered_step >= 0 && tl.ckpt_step < 0 && e.step >= tl.delivered_step &&
          e.time >= tl.delivered_at) {
        tl.ckpt_step = e.step;
      }
      return;
    }
    if (e.kind != event_kind::kCkptComplete) return;
    const int64_t want = tl.announced_step >= 0 ? tl.announced_step : tl.ckpt_step;
    if (want < 0 || e.step < want) return;
    tl.acted = true;
    ctx = run.ctx;
    plan = tl.plan;
    // Progress: the step is one this run trained (its first heartbeat was at or before it), not
    // the step it resumed from committed again; otherwise the next run would stop at the same
    // place, and the policy stops instead of looping.
    progress = tl.first_step >= 0 && e.step >= tl.first_step;
  }
  RequeueForTimeLimit(ctx, e.step, plan, progress);
}

void FailureHandler::RequeueForTimeLimit(const JobContext& ctx, int64_t step,
                                         const TimeLimitPlan& plan, bool progress) {
  // One decision per run on this node: a failure decided first wins, and vice versa.
  if (!ledger_.Claim(ctx.job_id, ctx.restart_count)) return;
  auto job = slurm_->LoadJob(ctx.job_id);
  if (!job.ok()) {
    Emit(ctx.job_id, event_kind::kRequeueFailed, -1, step,
         FormatEventFields({{"class", FailureClassName(FailureClass::kTimeLimit)},
                            {"error", job.message()}}));
    return;
  }
  if (job->restart_count > ctx.restart_count) return;  // another node has requeued it already
  const double now = clock_();
  Failure f;
  f.kind = FailureClass::kTimeLimit;
  f.node = config_.node;
  f.run_seconds = job->start_time > 0 ? now - job->start_time : -1;
  f.ckpt_progress = progress;
  f.made_progress = true;
  RequeueDecision d = DecideFor(ctx, f, *job, std::nullopt);
  const std::string end = job->end_time > 0 ? FormatEventTime(job->end_time, false) : "?";
  if (d.action == RequeueAction::kStop) {
    // The checkpoint is safe; without a restart left the job simply runs into its time limit,
    // as it would without autopar (it is not cancelled: TIMEOUT says what happened).
    ledger_.Record(ctx.job_id, d);
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_[ctx.job_id].last = d;
    }
    Emit(ctx.job_id, event_kind::kTimeLimitNotRequeued, -1, step,
         FormatEventFields({{"end", end}, {"reason", d.reason}}));
    return;
  }
  d.reason = "time limit (end " + end + "): step " + std::to_string(step) +
             " is COMPLETE; requeue " + std::to_string(d.attempt) + " of " +
             std::to_string(d.max_restarts) +
             " (counts against --requeue-on-failure: its budget is Slurm's restart count)";
  auto r = RecordAndRequeue(ctx, d, step, FailureClassName(FailureClass::kTimeLimit), now);
  if (!r) return;
  EventFields out = {{"class", FailureClassName(FailureClass::kTimeLimit)},
                     {"attempt", std::to_string(d.attempt)},
                     {"of", std::to_string(d.max_restarts)},
                     {"delay_s", FormatFixed(d.delay_s, 1)}};
  if (plan.limited) out.emplace_back("margin_s", FormatFixed(plan.margin_s, 1));
  out.emplace_back("reason", d.reason);
  for (const auto& w : r->warnings) out.emplace_back("warning", w);
  Emit(ctx.job_id, event_kind::kRequeue, -1, step, FormatEventFields(out));
}

}  // namespace autopar
