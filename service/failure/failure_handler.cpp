#include "failure_handler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>

#include "core/hostlist.h"
#include "core/failure/launch_events.h"
#include "core/failure/oom.h"
#include "core/text.h"
#include "core/failure/timeline.h"

namespace autopar {
namespace {

// A job of which nothing has run or happened on this node for this long is forgotten (its
// in-place recovery, rollback budget and checkpoint durations with it): a requeued job comes back
// within minutes, and a node must not keep every job it ever ran.
constexpr double kForgetIdleS = 6 * 3600;
constexpr double kSlurmDefaultKillWaitS = 30;  // KillWait when the controller's is not known

}  // namespace

Result<JobContext> JobContextFromEnviron(const std::string& environ) {
  JobContext c;
  bool have_job = false;
  for (const auto& entry : Split(environ, '\0')) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string name = entry.substr(0, eq), value = entry.substr(eq + 1);
    if (name == "SLURM_JOB_ID") {
      c.job_id = value;
      have_job = !value.empty();
    } else if (name == "SLURM_RESTART_COUNT") {
      auto v = ParseInt(value, 0, INT32_MAX);
      if (!v) return Status::Error("SLURM_RESTART_COUNT: not a count: '" + value + "'");
      c.restart_count = *v;
    } else if (name == "AUTOPAR_REQUEUE_ON_FAILURE") {
      auto v = ParseInt(value, 0, 1000000);
      if (!v) return Status::Error("AUTOPAR_REQUEUE_ON_FAILURE: not a count: '" + value + "'");
      c.requeue_on_failure = *v;
    } else if (name == "AUTOPAR_HEARTBEAT_TIMEOUT") {
      auto v = ParseInt(value, 1, 100000000);
      if (!v) {
        return Status::Error("AUTOPAR_HEARTBEAT_TIMEOUT: not a number of seconds: '" + value +
                             "'");
      }
      c.heartbeat_timeout_s = static_cast<double>(*v);
    } else if (name == "AUTOPAR_STACK_DIR") {
      c.stack_dir = value;
    } else if (name == "AUTOPAR_CKPT_UPLOAD") {
      c.ckpt_upload = !value.empty();
    } else if (name == "AUTOPAR_CKPT_DIR") {
      c.checkpoints = !value.empty();
    } else if (name == "AUTOPAR_ON_BAD_LOSS") {
      auto p = ParseBadLossPolicy(value, 1, 1000000);
      if (!p) return Status::Error("AUTOPAR_ON_BAD_LOSS: " + p.message());
      c.bad_loss = *p;
    } else if (name == "AUTOPAR_STRAGGLER_MARGIN") {
      char* end = nullptr;
      const double m = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !(m > 0 && m <= 10)) {
        return Status::Error("AUTOPAR_STRAGGLER_MARGIN: not a fraction in (0, 10]: '" + value + "'");
      }
      c.straggler_margin = m;
    } else if (name == "AUTOPAR_STRAGGLER_WINDOWS") {
      auto v = ParseInt(value, 1, 1000);
      if (!v) return Status::Error("AUTOPAR_STRAGGLER_WINDOWS: not a count in [1, 1000]: '" + value + "'");
      c.straggler_windows = static_cast<int>(*v);
    } else if (name == "AUTOPAR_EXCLUDE_STRAGGLERS") {
      c.exclude_stragglers = value == "yes";
    } else if (name == "AUTOPAR_FAULT_TOLERANCE") {
      c.fault_tolerance = value == "step";
    } else if (name == "AUTOPAR_IDLE_TIMEOUT") {
      auto v = ParseInt(value, 0, 100000000);
      if (!v) return Status::Error("AUTOPAR_IDLE_TIMEOUT: not a number of seconds: '" + value + "'");
      c.idle_timeout_s = static_cast<double>(*v);
    } else if (name == "AUTOPAR_LOSS_SPIKE") {
      auto f = ParseLossSpike(value);
      if (!f) return Status::Error("AUTOPAR_LOSS_SPIKE: " + f.message());
      c.loss_spike = *f;
    } else if (name == "AUTOPAR_RESTARTS_IN_PLACE") {
      auto v = ParseInt(value, 0, 1000000);
      if (!v) return Status::Error("AUTOPAR_RESTARTS_IN_PLACE: not a count: '" + value + "'");
      c.restarts_in_place = *v;
    } else if (name == "AUTOPAR_MIN_NODES") {
      auto v = ParseInt(value, 0, 100000);
      if (!v) return Status::Error("AUTOPAR_MIN_NODES: not a count: '" + value + "'");
      c.min_nodes = *v;
    } else if (name == "AUTOPAR_PLAN_JSON") {
      c.plan = PlanTargetFromJson(value);
    } else if (name == "AUTOPAR_RESTART_GENERATION") {
      auto v = ParseInt(value, 0, 1000000);
      if (!v) return Status::Error("AUTOPAR_RESTART_GENERATION: not a count: '" + value + "'");
      c.generation = *v;
    }
  }
  if (!have_job) return Status::Error("no SLURM_JOB_ID in the environment (not a Slurm task)");
  if (c.stack_dir.empty()) c.stack_dir = DefaultStackDir(c.job_id);
  return c;
}

JobLimits JobLimitsOf(const SiteConfig& site) {
  JobLimits l;
  l.max_requeue = site.max_requeue;
  l.max_restarts_in_place = site.max_restarts_in_place;
  l.max_rollbacks = site.max_rollbacks;
  l.min_heartbeat_timeout_s = static_cast<double>(site.min_heartbeat_timeout);
  l.max_heartbeat_timeout_s = static_cast<double>(site.max_heartbeat_timeout);
  return l;
}

void ClampToLimits(const JobLimits& limits, JobContext* ctx) {
  if (ctx->requeue_on_failure) {
    ctx->requeue_on_failure = std::min(*ctx->requeue_on_failure, limits.max_requeue);
  }
  ctx->restarts_in_place = std::min(ctx->restarts_in_place, limits.max_restarts_in_place);
  ctx->bad_loss.rollbacks = std::min(ctx->bad_loss.rollbacks, limits.max_rollbacks);
  if (ctx->heartbeat_timeout_s > 0) {
    ctx->heartbeat_timeout_s = std::clamp(ctx->heartbeat_timeout_s, limits.min_heartbeat_timeout_s,
                                          limits.max_heartbeat_timeout_s);
  }
}

FailureHandler::FailureHandler(FailureHandlerConfig config, SlurmActions* slurm, ProcAccess proc,
                               Journal journal, Clock clock)
    : config_(std::move(config)),
      slurm_(slurm),
      proc_(std::move(proc)),
      journal_(std::move(journal)),
      clock_(std::move(clock)) {}

void FailureHandler::Emit(const std::string& job_id, const std::string& kind, int rank,
                          int64_t step, const std::string& detail) {
  if (!journal_) return;
  JournalEvent e;
  e.time = clock_();
  e.node = config_.node;
  e.job_id = job_id;
  e.kind = kind;
  e.rank = rank;
  e.step = step;
  e.detail = detail;
  journal_(e);
}

std::optional<JobContext> FailureHandler::ContextOf(pid_t pid) {
  auto process = ReadProcStat(pid, proc_);
  if (!process) return std::nullopt;
  return ContextOf(*process);
}

std::optional<JobContext> FailureHandler::ContextOf(const ProcStat& process) {
  const auto key = std::make_pair(process.pid, process.start_ticks);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = contexts_.find(key);
    if (it != contexts_.end()) return it->second;
  }
  auto env = proc_.read_file("/proc/" + std::to_string(process.pid) + "/environ");
  if (!env.ok()) return std::nullopt;
  auto ctx = JobContextFromEnviron(*env);
  if (!ctx.ok()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  ClampToLimits(config_.limits, &*ctx);
  if (contexts_.size() > 4096) contexts_.clear();  // bounded; entries are cheap to read again
  contexts_[key] = *ctx;
  return *ctx;
}

pid_t FailureHandler::RankProcessOf(const std::string& job_id, int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto job = jobs_.find(job_id);
  if (job == jobs_.end()) return 0;
  const auto& procs = job->second.run.rank_procs;
  auto p = procs.find(rank);
  return p == procs.end() ? 0 : p->second.pid;
}

FailureHandler::Run FailureHandler::NewRun(const JobContext& ctx, double since) const {
  Run run;
  run.ctx = ctx;
  if (ctx.heartbeat_timeout_s > 0) {
    HangSettings hs;
    hs.timeout_s = ctx.heartbeat_timeout_s;
    hs.first_step_factor = config_.first_step_factor;
    run.hang = std::make_unique<HangDetector>(hs, since);
  }
  return run;
}

void FailureHandler::ForgetIdleJobsLocked(double now) {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const JobRecord& job = it->second;
    bool busy = now - job.seen < kForgetIdleS || job.pending_rollback || job.usage.usage;
    for (auto p = job.run.rank_procs.begin(); !busy && p != job.run.rank_procs.end(); ++p) {
      busy = Alive(p->second);
    }
    if (busy) {
      ++it;
      continue;
    }
    ledger_.Forget(it->first);
    it = jobs_.erase(it);
  }
}

bool FailureHandler::ResumeWatch(const std::string& job_id, int rank, int64_t step, pid_t pid,
                                 double time) {
  // Nothing when the rank's process ended meanwhile or its pid now belongs to someone else.
  auto sender = SenderInJob(job_id, pid, /*short_lived=*/false);
  if (!sender) return false;
  const ProcStat* process = &sender->process;
  const JobContext* ctx = &sender->ctx;
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord& job = jobs_[job_id];
  job.seen = clock_();
  Run& run = job.run;
  if (run.ctx.job_id.empty()) {
    run = NewRun(*ctx, time);
  } else if (std::make_pair(ctx->restart_count, ctx->generation) !=
             std::make_pair(run.ctx.restart_count, run.ctx.generation)) {
    return false;  // another run of the job is watched already
  }
  run.rank_procs[rank] = RankProcess{process->pid, process->start_ticks};
  run.heartbeats = true;
  if (run.hang) run.hang->Heartbeat(rank, step, time);
  return true;
}

void FailureHandler::SetLimits(const JobLimits& limits) {
  std::lock_guard<std::mutex> lock(mu_);
  config_.limits = limits;
}

bool FailureHandler::Alive(const RankProcess& p) const {
  auto now = ReadProcStat(p.pid, proc_);
  return now && now->start_ticks == p.start_ticks;
}

bool FailureHandler::OnHeartbeat(const std::string& job_id, int rank, int64_t step, pid_t pid,
                                 bool short_lived, int64_t samples, int64_t tokens,
                                 std::optional<double> loss, const RanksReport& ranks) {
  auto sender = SenderInJob(job_id, pid, short_lived);
  if (!sender) return false;  // not a task of that job: nothing to watch
  const ProcStat* process = &sender->process;
  const JobContext* ctx = &sender->ctx;
  const double now = clock_();
  HeartbeatNews news;  // journalled below, outside the lock
  bool requested = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    JobRecord& job = jobs_[job_id];
    job.seen = now;
    Run& run = job.run;
    const auto run_key = [](const JobContext& c) {
      return std::make_pair(c.restart_count, c.generation);
    };
    if (run.ctx.job_id.empty() || run_key(*ctx) > run_key(run.ctx)) {
      // A new run of the job (a requeue) or of its program (in place): start over.
      run = NewRun(*ctx, now);
    } else if (run_key(*ctx) < run_key(run.ctx)) {
      return false;  // a late heartbeat of an earlier run
    }
    if (rank == 0 || ranks.leads) WatchRankZeroLocked(&job, *ctx, ProgressSample{now, step, samples, tokens, loss},
                                       ranks, &news);
    run.rank_procs[rank] = RankProcess{process->pid, process->start_ticks};
    run.heartbeats = true;
    if (job.usage.usage) job.usage.usage->Progress(now);
    if (run.hang) run.hang->Heartbeat(rank, step, now);
    requested = run.tl.OnStep(step, now);
  }
  // The journal writes to the state database and calls back into OnEvent: never under mu_.
  if (news.first_step) Emit(job_id, event_kind::kFirstStep, rank, step, FormatEventFields(*news.first_step));
  if (news.progress) Emit(job_id, event_kind::kProgress, rank, step, FormatEventFields(*news.progress));
  if (news.bad_loss) OnBadLoss(*ctx, *news.bad_loss, RankProcess{process->pid, process->start_ticks});
  for (const auto& f : news.stragglers) {
    EventFields fields = f.Fields();
    fields.emplace_back("margin", FormatFixed(ctx->straggler_margin, 2));
    fields.emplace_back("excluded_next", ctx->exclude_stragglers ? "yes" : "no");
    Emit(job_id, event_kind::kStraggler, f.rank, step, FormatEventFields(fields));
  }
  return requested;
}

std::optional<FailureHandler::Sender> FailureHandler::SenderInJob(const std::string& job_id, pid_t pid,
                                                                  bool short_lived) {
  auto process = short_lived ? TaskProcessOf(pid, proc_) : ReadProcStat(pid, proc_);
  if (!process) return std::nullopt;
  auto ctx = ContextOf(*process);
  if (!ctx || ctx->job_id != job_id) return std::nullopt;
  return Sender{*process, *ctx};
}

void FailureHandler::OnFinishing(const std::string& job_id, pid_t pid) {
  auto sender = SenderInJob(job_id, pid, /*short_lived=*/false);
  if (!sender) return;
  const JobContext* ctx = &sender->ctx;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  Run& run = it->second.run;
  if (run.ctx.restart_count != ctx->restart_count || run.ctx.generation != ctx->generation) return;
  if (run.hang) run.hang->Finishing(clock_());
}

void FailureHandler::WatchRankZeroLocked(JobRecord* job, const JobContext& ctx,
                                         const ProgressSample& sample, const RanksReport& ranks,
                                         HeartbeatNews* news) {
  Run& run = job->run;
  if (ctx.generation > 0 && !run.first_step_told) {
    // The end of an in-place recovery: the restarted program's first step.
    run.first_step_told = true;
    news->first_step = EventFields{{"generation", std::to_string(ctx.generation)}};
    if (job->recovering_since) {
      news->first_step->emplace_back("since_failure_s",
                                     FormatFixed(sample.time - *job->recovering_since, 3));
      job->recovering_since.reset();  // the recovery is over
    }
  }
  // The job's measured progress against its plan, a window per run.
  if (!run.progress) run.progress = std::make_unique<ProgressTracker>(config_.progress_interval_s);
  news->progress = run.progress->Add(sample, ctx.plan);
  if (sample.loss) {
    if (!run.loss_guard) {
      LossGuardSettings ls;
      ls.spike_factor = ctx.loss_spike;
      run.loss_guard = std::make_unique<LossGuard>(ls);
    }
    news->bad_loss = run.loss_guard->Add(sample.step, *sample.loss);
  }
  if (ranks.compute_s.empty()) return;
  if (!run.stragglers) {
    StragglerSettings ss;
    ss.margin = ctx.straggler_margin;
    ss.windows = ctx.straggler_windows;
    ss.window_s = config_.progress_interval_s;
    run.stragglers = std::make_unique<StragglerDetector>(ss);
  }
  if (!ranks.nodes.empty()) run.stragglers->SetNodes(ranks.nodes);
  news->stragglers = run.stragglers->Add(sample.time, ranks.compute_s);
  for (const auto& f : news->stragglers) {
    if (!f.node.empty()) job->straggler_nodes.insert(f.node);
  }
}

bool FailureHandler::TimeLimitWatch::OnStep(int64_t step, double now) {
  if (first_step < 0) {
    first_step = step;
    first_step_time = now;
  }
  if (step > max_step) {
    max_step = step;
    max_step_time = now;
  }
  if (requested && delivered_step < 0) {
    delivered_at = now;
    delivered_step = step;
  }
  return requested;
}

void FailureHandler::OnEvent(const JournalEvent& e, pid_t pid) {
  if (e.kind == event_kind::kCkptCommitted || e.kind == event_kind::kCkptUploaded ||
      e.kind == event_kind::kCkptComplete || e.kind == event_kind::kTimeLimitCheckpoint) {
    OnCheckpointEvent(e, pid);
    if (e.kind == event_kind::kCkptComplete && e.step >= 0) {
      JobContext ctx;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = jobs_.find(e.job_id);
        if (it == jobs_.end() || it->second.run.ctx.job_id.empty()) return;
        ctx = it->second.run.ctx;
      }
      OnPreemptedComplete(ctx, e.step);
    }
    return;
  }
  if (e.kind == event_kind::kTerminationCheckpoint) {
    OnTerminationCheckpoint(e, pid);
    return;
  }
  if (e.kind == event_kind::kTerminated) {
    OnTerminated(e, pid);
    return;
  }
  if (e.kind != event_kind::kRankExit) return;
  auto exit = RankExit::Parse(ParseEventFields(e.detail));
  if (!exit) {
    Emit(e.job_id, event_kind::kRequeueFailed, e.rank, -1,
         FormatEventFields({{"error", exit.message() + "; no decision"}}));
    return;
  }
  // A clean exit, or in place (rank 0's launcher asks for the decision: Recover): journalled,
  // and the rank no longer counts for the hang watch.
  if (exit->Clean() || exit->generation >= 0) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(e.job_id);
    if (it != jobs_.end() && it->second.run.hang) it->second.run.hang->RankExited(e.rank);
    return;
  }
  auto ctx = ContextOf(pid);
  if (!ctx || ctx->job_id != e.job_id) {
    Emit(e.job_id, event_kind::kRequeueFailed, e.rank, -1,
         FormatEventFields({{"error", "the rank_exit report did not come from a task of job " +
                                          e.job_id + "; no decision"}}));
    return;
  }
  Failure failure;
  failure.kind = exit->oom.empty() ? FailureClass::kRankCrash : FailureClass::kOom;
  failure.note = exit->oom;
  failure.node = e.node.empty() ? config_.node : e.node;
  failure.rank = e.rank;
  failure.exit_code = exit->exit_status;
  failure.signal = exit->Signal();
  failure.run_seconds = exit->run_s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(e.job_id);
    if (it != jobs_.end() && it->second.run.ctx.restart_count == ctx->restart_count) {
      Run& run = it->second.run;
      failure.made_progress = run.heartbeats;
      if (run.hang) run.hang->RankExited(e.rank);
    }
  }
  HandleFailure(*ctx, failure);
}

RequeueSettings FailureHandler::Policy(const Failure& f) const {
  RequeueSettings s = config_.policy;
  if (f.kind != FailureClass::kNodeLoss) return s;  // no question to slurmctld on a rank's failure
  auto tracking = slurm_->ProcessTracking();
  s.node_loss_delay_s = tracking.ok()
      ? NodeLossDelayForCluster(s.node_loss_delay_s, tracking->first, tracking->second)
      : NodeLossDelayForCluster(s.node_loss_delay_s, "", kSlurmDefaultKillWaitS);
  return s;
}

int64_t ElasticMinTasks(const JobContext& ctx, const SlurmJob& job) {
  if (ctx.min_nodes <= 0 || job.ntasks_per_node <= 0) return 0;
  // AUTOPAR_MIN_NODES is the job's own word: never more tasks than the job asked for (a smaller
  // minimum only lets its next run start on fewer of its own nodes).
  const int64_t tasks = ctx.min_nodes * job.ntasks_per_node;
  return job.tasks > 0 ? std::min(tasks, job.tasks) : tasks;
}

RequeueDecision FailureHandler::DecideFor(const JobContext& ctx, const Failure& f,
                                          const SlurmJob& job,
                                          const std::optional<PastFailure>& history) const {
  std::vector<std::string> excluded;
  if (!job.excluded_nodes.empty()) {
    auto ex = ExpandHostlist(job.excluded_nodes);
    if (ex.ok()) excluded = *ex;
  }
  RequeueSettings settings = Policy(f);
  settings.max_restarts = *ctx.requeue_on_failure;
  if (ctx.exclude_stragglers) {
    // The next run leaves out the nodes flagged as stragglers (this node knows them when it
    // holds rank 0: it decides every in-place job's requeue).
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = jobs_.find(ctx.job_id); it != jobs_.end()) {
      for (const auto& n : it->second.straggler_nodes) {
        if (std::find(excluded.begin(), excluded.end(), n) == excluded.end()) excluded.push_back(n);
      }
    }
  }
  // Preemptions restarted the job without spending its budget (core/failure/preemption.h).
  const int64_t preemptions =
      ctx.restart_count - FailureRestarts(ctx.restart_count, ParsePreemptionNote(job.admin_comment));
  RequeueDecision d = DecideRequeue(settings, f, ctx.restart_count,
                                    history ? history : ParseFailureNote(job.admin_comment), excluded,
                                    preemptions);
  d.min_tasks = ElasticMinTasks(ctx, job);
  return d;
}

namespace {
EventFields FailureFields(const JobContext& ctx, const Failure& failure) {
  EventFields fields = {{"class", FailureClassName(failure.kind)}};
  if (failure.kind == FailureClass::kRankCrash) {
    if (failure.exit_code >= 0) fields.emplace_back("exit", std::to_string(failure.exit_code));
    if (failure.signal > 0) fields.emplace_back("signal", std::to_string(failure.signal));
  }
  fields.emplace_back("restart", std::to_string(ctx.restart_count));
  return fields;
}
}  // namespace

void FailureHandler::HandleFailure(const JobContext& ctx, const Failure& failure) {
  EventFields fields = FailureFields(ctx, failure);
  fields.emplace_back("reason", failure.Describe());
  if (!ctx.requeue_on_failure) {
    fields.emplace_back("requeue", "off");
    Emit(ctx.job_id, event_kind::kFailure, failure.rank, -1, FormatEventFields(fields));
    return;
  }
  // One decision per run on this node; the first report wins.
  if (!ledger_.Claim(ctx.job_id, ctx.restart_count)) return;
  Emit(ctx.job_id, event_kind::kFailure, failure.rank, -1, FormatEventFields(fields));

  auto job = slurm_->LoadJob(ctx.job_id);
  if (!job.ok()) {
    Emit(ctx.job_id, event_kind::kRequeueFailed, -1, -1,
         FormatEventFields({{"error", job.message()}}));
    return;
  }
  if (job->restart_count > ctx.restart_count) return;  // another node has requeued it already
  std::vector<std::string> lost_nodes;
  Failure f = ClassifyNodeLoss(ctx, failure, *job, &lost_nodes);
  RequeuePath(ctx, f, *job, lost_nodes, std::nullopt);
}

Failure FailureHandler::ClassifyNodeLoss(const JobContext& ctx, const Failure& failure,
                                         const SlurmJob& job, std::vector<std::string>* lost) {
  if (failure.kind == FailureClass::kTimeLimit || job.nodes.empty()) return failure;
  // A rank that crashed because a peer node died (gloo: "Connection closed by peer") is a node
  // loss: the dead node's slurmd no longer answers. Excluding it lets the next run start at
  // once elsewhere instead of waiting for slurmctld to mark it DOWN.
  auto nodes = ExpandHostlist(job.nodes);
  if (!nodes.ok()) return failure;
  *lost = slurm_->UnreachableNodes(*nodes, config_.node_probe_timeout_ms);
  if (lost->empty()) return failure;
  Failure f;
  f.kind = FailureClass::kNodeLoss;
  f.node = lost->front();
  f.run_seconds = failure.run_seconds;
  f.made_progress = failure.made_progress;
  Emit(ctx.job_id, event_kind::kFailure, -1, -1,
       FormatEventFields({{"class", FailureClassName(f.kind)},
                          {"lost", Join(*lost, ",")},
                          {"reason", f.Describe()}}));
  return f;
}

std::string FailureHandler::RequeuePath(const JobContext& ctx, const Failure& f,
                                        const SlurmJob& job,
                                        const std::vector<std::string>& lost_nodes,
                                        const std::optional<PastFailure>& history) {
  // After the decision is carried out (requeued with the node excluded, or stopped), the lost
  // nodes are marked DOWN: before it, slurmctld would requeue the job itself for the node failure
  // and our exclusion would come too late.
  // Only on evidence a user cannot fake (LossEvidence): the exclusion stays the job's own.
  auto mark_down = [&] {
    for (const auto& n : lost_nodes) {
      auto evidence = slurm_->LossEvidence(n, config_.node_probe_timeout_ms);
      if (!evidence.ok()) {
        Emit(ctx.job_id, event_kind::kNodeDown, -1, -1,
             FormatEventFields({{"node", n}, {"result", "not marked: " + evidence.message()}}));
        continue;
      }
      Status down = slurm_->MarkNodeDown(n, "autopar: " + *evidence + " (job " + ctx.job_id + ")");
      Emit(ctx.job_id, event_kind::kNodeDown, -1, -1,
           FormatEventFields({{"node", n}, {"result", down.ok() ? "DOWN" : down.message()},
                              {"evidence", *evidence}}));
    }
  };
  RequeueDecision d = DecideFor(ctx, f, job, history);
  const double now = clock_();
  if (d.action == RequeueAction::kStop) {
    ledger_.Record(ctx.job_id, d);
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_[ctx.job_id].last = d;
    }
    const std::string lock = RequeueLockPath(ctx.job_id);
    auto stopped = StopOnce(*slurm_, ctx.job_id, ctx.restart_count, d.reason, lock);
    mark_down();
    if (!stopped.ok()) {
      Emit(ctx.job_id, event_kind::kStopped, -1, -1,
           FormatEventFields({{"reason", d.reason}, {"note", stopped.message()}}));
    } else if (*stopped) {
      Emit(ctx.job_id, event_kind::kStopped, -1, -1, FormatEventFields({{"reason", d.reason}}));
    }
    return "stop";
  }
  auto r = RecordAndRequeue(ctx, d, -1, "", now);
  if (!r) {
    mark_down();
    return "requeue";
  }
  EventFields out = {{"attempt", std::to_string(d.attempt)},
                     {"of", std::to_string(d.max_restarts)},
                     {"delay_s", FormatFixed(d.delay_s, 1)}};
  if (!d.exclude_nodes.empty()) out.emplace_back("exclude", Join(d.exclude_nodes, ","));
  out.emplace_back("reason", d.reason);
  for (const auto& w : r->warnings) out.emplace_back("warning", w);
  Emit(ctx.job_id, event_kind::kRequeue, -1, -1, FormatEventFields(out));
  mark_down();
  return "requeue";
}

Result<RecoverReply> FailureHandler::Recover(const std::string& job_id, int rank,
                                             const std::string& detail, pid_t pid) {
  auto ctx = ContextOf(pid);
  if (!ctx || ctx->job_id != job_id) {
    return Status::Error("recover: the request did not come from a task of job " + job_id);
  }
  auto d = RecoverDetail::Parse(ParseEventFields(detail));
  if (!d) return d.status();
  if (*ParseFailureClass(d->kind) == FailureClass::kBadLoss) {
    return RecoverBadLoss(*ctx, d->generation);
  }
  Failure failure = FailureOfDetail(*ctx, *d, rank);
  std::vector<std::string> lost_nodes;
  NodeLoss loss;
  auto job = slurm_->LoadJob(job_id);
  if (failure.kind == FailureClass::kNodeLoss) {
    // Rank 0's launcher names the nodes whose launchers are gone and the spares left alive
    // (launcher/restart_logic.h). That is evidence, not a verdict: only nodes of this job's
    // allocation whose slurmd is gone count as lost (root marks them DOWN on the requeue path).
    lost_nodes = ConfirmLostNodes(job_id, d->lost, job);
    if (lost_nodes.empty()) {
      // Nothing of the claim holds: the job's own ranks failed (on a node that still answers).
      failure.kind = FailureClass::kRankCrash;
    } else {
      failure.node = Join(lost_nodes, ",");
      failure.rank = -1;
      loss = NodeLoss{static_cast<int64_t>(lost_nodes.size()), d->spares, d->remaining,
                      d->min_nodes, d->plan_refusal};
    }
  } else if (job.ok()) {
    failure = ClassifyNodeLoss(*ctx, failure, *job, &lost_nodes);
  }
  JournalRecoverFailure(*ctx, failure, d->generation, lost_nodes, loss);
  // Rollbacks (a bad loss) have a budget of their own: the generations they took do not count
  // against --restarts-in-place.
  int64_t rolled_back = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = jobs_.find(job_id); it != jobs_.end()) rolled_back = it->second.rollbacks;
  }
  RecoveryDecision decision =
      DecideRecovery(Policy(failure), failure, ctx->restart_count,
                     std::max<int64_t>(0, d->generation - rolled_back), ctx->restarts_in_place,
                     ParseFailureNote(d->history), loss);
  if (!d->unreachable.empty() && decision.action == RecoveryAction::kRestartInPlace) {
    // The launcher that failed could not reach every other launcher (their programs ended).
    decision = RecoveryDecision{};
    decision.generation = d->generation;
    decision.reason = failure.Describe() + "; no in-place restart: the launchers of ranks " +
                      d->unreachable + " cannot be reached";
  }
  return CarryOutRecovery(*ctx, failure, d->generation, decision, job, lost_nodes);
}

Failure FailureHandler::FailureOfDetail(const JobContext& ctx, const RecoverDetail& d, int rank) {
  Failure failure;
  failure.kind = *ParseFailureClass(d.kind);
  failure.node = d.node.empty() ? config_.node : d.node;
  failure.rank = rank;
  failure.exit_code = d.exit_status;
  failure.signal = d.Signal();
  failure.run_seconds = d.run_s;
  if (failure.kind == FailureClass::kOom) failure.note = d.error;
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord& job = jobs_[ctx.job_id];
  job.seen = clock_();
  // When the launcher saw the failure (its clock): the job's own first_step since_failure_s,
  // kept within the last day and never after now.
  if (d.detected > 0) job.recovering_since = std::clamp(d.detected, job.seen - 86400, job.seen);
  // Progress: a heartbeat of the failed generation on this node (rank 0's: every rank of a
  // data-parallel job steps together).
  const Run& run = job.run;
  failure.made_progress = run.ctx.generation == d.generation &&
                          run.ctx.restart_count == ctx.restart_count && run.heartbeats;
  return failure;
}

void FailureHandler::JournalRecoverFailure(const JobContext& ctx, const Failure& failure,
                                           int64_t generation,
                                           const std::vector<std::string>& lost_nodes,
                                           const NodeLoss& loss) {
  EventFields fields = FailureFields(ctx, failure);
  fields.emplace_back("generation", std::to_string(generation));
  if (loss.lost > 0) {
    fields.emplace_back("lost", Join(lost_nodes, ","));
    fields.emplace_back("spares", std::to_string(loss.spares));
    if (loss.min_nodes > 0) {
      fields.emplace_back("remaining", std::to_string(loss.remaining));
      fields.emplace_back("min_nodes", std::to_string(loss.min_nodes));
    }
  }
  fields.emplace_back("reason", failure.Describe());
  Emit(ctx.job_id, event_kind::kFailure, failure.rank, -1, FormatEventFields(fields));
}

Result<RecoverReply> FailureHandler::CarryOutRecovery(const JobContext& ctx, const Failure& failure,
                                                      int64_t generation, RecoveryDecision d,
                                                      const Result<SlurmJob>& job,
                                                      const std::vector<std::string>& lost_nodes) {
  const std::string& job_id = ctx.job_id;
  EventFields out = {{"action", RecoveryActionName(d.action)},
                     {"generation", std::to_string(generation)}};
  RecoverReply reply;
  reply.reason = d.reason;
  if (d.action == RecoveryAction::kRestartInPlace) {
    out.emplace_back("attempt", std::to_string(d.attempt));
    out.emplace_back("of", std::to_string(d.budget));
    if (failure.kind == FailureClass::kOom && ctx.plan && ctx.plan->mem_gib > 0) {
      // The plan that ran out predicted too little: the next one must fit in less (docs/health.md).
      reply.max_mem_gib = OomReplanMemGib(ctx.plan->mem_gib);
      d.reason += "; re-planned within " + FormatFixed(reply.max_mem_gib, 1) +
                  " GiB per GPU (the plan that ran out: " + FormatFixed(ctx.plan->mem_gib, 1) + " GiB)";
      out.emplace_back("max_mem_gib", FormatFixed(reply.max_mem_gib, 2));
    }
    if (ctx.exclude_stragglers) {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = jobs_.find(job_id); it != jobs_.end()) {
        const auto& nodes = it->second.straggler_nodes;
        reply.exclude_nodes.assign(nodes.begin(), nodes.end());
      }
    }
    if (!reply.exclude_nodes.empty()) {
      d.reason += "; leaving out the straggler node(s) " + Join(reply.exclude_nodes, ",") +
                  " where a spare node can take their place (--exclude-stragglers)";
      out.emplace_back("exclude", Join(reply.exclude_nodes, ","));
    }
    reply.reason = d.reason;
    out.emplace_back("reason", d.reason);
    Emit(job_id, event_kind::kRecovery, -1, -1, FormatEventFields(out));
    reply.action = RecoveryActionName(d.action);
    if (d.history) reply.history = EncodeFailureNote(*d.history);
    return reply;
  }
  if (!ctx.requeue_on_failure) {
    out[0].second = "none";
    reply.action = "none";
    reply.reason = d.reason + "; --requeue-on-failure is off: the job ends";
    out.emplace_back("reason", reply.reason);
    Emit(job_id, event_kind::kRecovery, -1, -1, FormatEventFields(out));
    return reply;
  }
  out.emplace_back("reason", d.reason);
  Emit(job_id, event_kind::kRecovery, -1, -1, FormatEventFields(out));
  if (!job.ok()) {
    Emit(job_id, event_kind::kRequeueFailed, -1, -1, FormatEventFields({{"error", job.message()}}));
    return Status::Error("recover: " + job.message());
  }
  if (!ledger_.Claim(job_id, ctx.restart_count)) {
    reply.action = "requeue";  // this run was decided already (a rank_exit of the same run)
    return reply;
  }
  reply.action = RequeuePath(ctx, failure, *job, lost_nodes, d.history);
  return reply;
}

std::vector<std::string> FailureHandler::ConfirmLostNodes(const std::string& job_id,
                                                          const std::string& claimed,
                                                          const Result<SlurmJob>& job) {
  std::vector<std::string> named;
  auto hosts = ExpandHostlist(claimed);
  if (!hosts.ok()) {
    Emit(job_id, event_kind::kClaimRefused, -1, -1,
         FormatEventFields({{"claim", "lost"}, {"node", claimed}, {"reason", hosts.message()}}));
    return {};
  }
  // A claim is charged to the job as one event per verdict, whatever its length (a lost= of
  // 65,535 names once cost a quadratic de-duplication and a journal row each).
  std::unordered_set<std::string> seen;
  for (auto& h : *hosts) {
    if (seen.insert(h).second) named.push_back(std::move(h));
  }
  auto refuse = [&](const std::vector<std::string>& nodes, const std::string& reason) {
    if (nodes.empty()) return;
    constexpr size_t kNamed = 8;  // named in the event; the rest counted
    std::vector<std::string> shown(nodes.begin(), nodes.begin() + static_cast<long>(std::min(kNamed, nodes.size())));
    std::string list = Join(shown, ",");
    if (nodes.size() > kNamed) list += ",...";
    Emit(job_id, event_kind::kClaimRefused, -1, -1,
         FormatEventFields({{"claim", "lost"}, {"node", list}, {"count", std::to_string(nodes.size())},
                            {"reason", reason}}));
  };
  Result<std::vector<std::string>> allocation =
      job.ok() ? ExpandHostlist(job->nodes) : Result<std::vector<std::string>>(job.status());
  if (!allocation.ok()) {
    refuse(named, "the job's allocation cannot be read from Slurm: " + allocation.message());
    return {};
  }
  const std::unordered_set<std::string> allocated(allocation->begin(), allocation->end());
  std::vector<std::string> in_job, outside;
  for (auto& n : named) (allocated.count(n) ? in_job : outside).push_back(std::move(n));
  refuse(outside, "not a node of job " + job_id + " (" + job->nodes + ")");
  if (in_job.empty()) return {};
  std::vector<std::string> gone = slurm_->UnreachableNodes(in_job, config_.node_probe_timeout_ms);
  const std::unordered_set<std::string> unreachable(gone.begin(), gone.end());
  std::vector<std::string> confirmed, answering;
  for (auto& n : in_job) (unreachable.count(n) ? confirmed : answering).push_back(std::move(n));
  refuse(answering, "its slurmd still answers");
  return confirmed;
}

std::optional<RequeueDecision> FailureHandler::LastDecision(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.last;
}

std::string FailureHandler::RequeueLockPath(const std::string& job_id) const {
  return config_.lock_dir.empty() ? "" : config_.lock_dir + "/requeue-" + job_id + ".lock";
}

std::optional<GuardedRequeueResult> FailureHandler::RecordAndRequeue(const JobContext& ctx,
                                                                     const RequeueDecision& d,
                                                                     int64_t step,
                                                                     const std::string& cls,
                                                                     double now) {
  ledger_.Record(ctx.job_id, d);
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[ctx.job_id].last = d;
  }
  auto r = GuardedRequeue(*slurm_, ctx.job_id, d, now, RequeueLockPath(ctx.job_id));
  if (!r.ok()) {
    EventFields fields;
    if (!cls.empty()) fields.emplace_back("class", cls);
    fields.emplace_back("error", r.message());
    Emit(ctx.job_id, event_kind::kRequeueFailed, -1, step, FormatEventFields(fields));
    return std::nullopt;
  }
  if (r->outcome != RequeueOutcome::kRequeued) return std::nullopt;  // the node that did journals
  return *r;
}

}  // namespace autopar
