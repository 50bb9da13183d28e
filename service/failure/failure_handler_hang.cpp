// Hangs (failure_handler.h): each Tick checks every run's HangDetector; a hung run is journalled
// with the stacks of its ranks on this node, then, after hang_requeue_grace_s, requeued or, in a
// job that restarts in place, handed to the launchers of its ranks.
#include <algorithm>

#include "core/failure/timeline.h"
#include "core/text.h"
#include "failure_handler.h"

namespace autopar {

Failure FailureHandler::HangFailure(const Run& run) const {
  Failure failure;
  failure.kind = FailureClass::kHang;
  failure.node = config_.node;
  failure.rank = run.hang_rank.value_or(-1);
  failure.run_seconds = -1;  // a hang is never "immediate": its limit already waited
  failure.made_progress = run.hang_progress;
  return failure;
}

void FailureHandler::Tick() {
  const double now = clock_();
  TickTimeLimits(now);
  TickUsage(now);
  HangWork work = CheckHangs(now, true);
  for (const auto& h : work.hung) ReportHang(h);
  if (!work.hung.empty()) {
    // A hang handed over at once (a fault-tolerant group's) is due now, not on the next tick.
    HangWork more = CheckHangs(clock_(), false);
    for (const auto& h : more.hung) ReportHang(h);  // hung in the meantime: handed over next tick
    work.due.insert(work.due.end(), more.due.begin(), more.due.end());
    work.hand_over.insert(work.hand_over.end(), more.hand_over.begin(), more.hand_over.end());
  }
  for (const auto& [ctx, failure] : work.due) HandleFailure(ctx, failure);
  for (const auto& [ctx, procs] : work.hand_over) HandHangToLaunchers(ctx, procs);
}

FailureHandler::HangWork FailureHandler::CheckHangs(double now, bool forget_idle) {
  HangWork work;
  std::lock_guard<std::mutex> lock(mu_);
  if (forget_idle) ForgetIdleJobsLocked(now);
  for (auto& [id, job] : jobs_) {
    if (!job.run.ctx.job_id.empty()) CheckHangLocked(&job.run, now, &work);
  }
  return work;
}

void FailureHandler::CheckHangLocked(Run* run, double now, HangWork* work) {
  // A preempted run's programs hold after their checkpoint until Slurm or the requeue ends them.
  if (run->preempt.slurm.preempted) return;
  if (run->hang_requeue_at && now >= *run->hang_requeue_at) {
    run->hang_requeue_at.reset();
    if (run->ctx.in_place()) {
      work->hand_over.emplace_back(run->ctx, run->rank_procs);
      // The launchers replace what hung and the run goes on (a fault-tolerant group: same run,
      // same generation), or restart every program (a new generation, watched anew): either
      // way the watch starts over, so the next hang is seen as this one was.
      run->hang_reported = false;
      run->hang_rank.reset();
      if (run->hang) run->hang->Rearm(now);
    } else {
      work->due.emplace_back(run->ctx, HangFailure(*run));
    }
  }
  if (!run->hang || run->hang_reported) return;
  // A program that checkpoints for its time limit and then waits for the requeue makes no
  // progress on purpose: no hang (the time limit ends it if the requeue never comes).
  if (run->tl.ckpt_step >= 0 || run->tl.announced_step >= 0) return;
  // Ranks whose process is gone have ended (a clean exit is not reported): they no longer
  // count, and a run whose ranks are all gone cannot hang.
  for (const auto& [rank, process] : run->rank_procs) {
    if (!Alive(process)) run->hang->RankExited(rank);
  }
  HangVerdict v = run->hang->Check(now);
  if (!v.hung) return;
  run->hang_reported = true;
  work->hung.push_back({run->ctx, v, run->rank_procs});
}

void FailureHandler::ReportHang(const HungRun& h) {
  Emit(h.ctx.job_id, event_kind::kHeartbeatMissed, -1, h.verdict.last_step,
       FormatEventFields({{"idle_s", FormatFixed(h.verdict.idle_s, 1)},
                          {"limit_s", FormatFixed(h.verdict.limit_s, 1)},
                          {"reason", h.verdict.Describe()}}));
  CaptureHungStacks(h);
  // The requeue comes on a later Tick, after the grace (see hang_requeue_grace_s).
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(h.ctx.job_id);
  if (it == jobs_.end() || it->second.run.ctx.restart_count != h.ctx.restart_count) return;
  Run& run = it->second.run;
  const bool at_once = run.ctx.in_place() && run.ctx.fault_tolerance;
  run.hang_requeue_at = clock_() + (at_once ? 0 : config_.hang_requeue_grace_s);
  if (h.verdict.suspects.size() == 1) run.hang_rank = h.verdict.suspects[0];
  run.hang_progress = h.verdict.last_step >= 0;
}

void FailureHandler::CaptureHungStacks(const HungRun& h) {
  // Stacks of every local rank, the suspects first: a hang is often visible in the others too
  // (they wait in the collective the suspect never joins).
  std::vector<int> order = h.verdict.suspects;
  for (const auto& [rank, process] : h.procs) {
    if (std::find(order.begin(), order.end(), rank) == order.end()) order.push_back(rank);
  }
  for (int rank : order) {
    auto it = h.procs.find(rank);
    // Never another process that took a gone rank's pid (it may not even be the user's).
    if (it == h.procs.end() || !Alive(it->second)) continue;
    StackCaptureOptions o;
    o.python_dump_path = PythonStackDumpPath(h.ctx.stack_dir, rank);
    o.python_wait_ms = config_.python_stack_wait_ms;
    o.read_dump = DumpReader(it->second.pid);
    StackCapture c = CaptureStack(it->second.pid, o, proc_);
    Emit(h.ctx.job_id, event_kind::kStack, rank, h.verdict.last_step, c.ToDetail());
    if (std::string k = c.KernelDetail(); !k.empty()) {
      Emit(h.ctx.job_id, event_kind::kStackKernel, rank, h.verdict.last_step, k);
    }
  }
}

std::function<Result<std::string>(const std::string&)> FailureHandler::DumpReader(int pid) const {
  if (!config_.read_dump) return nullptr;  // proc_.read_file
  auto read = config_.read_dump;
  return [read, pid](const std::string& path) { return read(pid, path); };
}

void FailureHandler::HandHangToLaunchers(const JobContext& ctx,
                                         const std::map<int, RankProcess>& procs) {
  for (const auto& [rank, process] : procs) {
    std::optional<ProcStat> p = LauncherOf(ctx, process);
    if (!p) continue;
    Status st = proc_.queue_signal
                    ? proc_.queue_signal(p->pid, HungProgramSignal(), static_cast<int>(ctx.generation))
                    : Status::Error("no way to signal the launcher");
    EventFields f = {{"launcher_pid", std::to_string(p->pid)},
                     {"generation", std::to_string(ctx.generation)},
                     {"result", st.ok() ? "told" : st.message()}};
    Emit(ctx.job_id, event_kind::kHangStop, rank, -1, FormatEventFields(f));
  }
}

std::optional<ProcStat> FailureHandler::LauncherOf(const JobContext& ctx,
                                                  const RankProcess& process) {
  if (!Alive(process)) return std::nullopt;
  // The nearest ancestor named autopar-launch, of the same job (a program may run under a
  // wrapper such as bash).
  std::optional<ProcStat> p = ReadProcStat(process.pid, proc_);
  for (int depth = 0; p && depth < 8 && p->comm != "autopar-launch"; ++depth) {
    p = p->ppid > 1 ? ReadProcStat(p->ppid, proc_) : std::nullopt;
  }
  if (!p || p->comm != "autopar-launch") return std::nullopt;
  auto launcher_ctx = ContextOf(*p);
  if (!launcher_ctx || launcher_ctx->job_id != ctx.job_id) return std::nullopt;
  return p;
}

}  // namespace autopar
