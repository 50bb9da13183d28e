// FailureHandler: autopard's failure handling for the jobs of its node. The daemon
// passes it every heartbeat and journal event, and calls Tick() about once a second; it detects
// crashed ranks and hangs, decides with RequeuePolicy, and carries the decision out through
// SlurmActions (GuardedRequeue, CancelWithReason), writing every step to the journal.
//
// Where its inputs come from:
//  - The job's settings are the task's own environment, read from /proc/PID/environ of the peer
//    that sent the heartbeat or event (autopard runs as root; the PID is the kernel's,
//    SO_PEERCRED): SLURM_JOB_ID, SLURM_RESTART_COUNT, AUTOPAR_REQUEUE_ON_FAILURE,
//    AUTOPAR_HEARTBEAT_TIMEOUT (exported by the SPANK plugin). A job without
//    AUTOPAR_REQUEUE_ON_FAILURE is watched and journalled but never requeued.
//  - Crashed ranks: autopar-launch sends an event of kind "rank_exit" (RankExit, launch_events.h:
//    "exit=N [signal=S] run_s=SECONDS ...") when its program ends with a non-zero status on its
//    own (not because the step was being ended).
//  - Node loss: on any failure, the job's nodes whose slurmd no longer accepts connections
//    (SlurmActions::UnreachableNodes) make it a node loss: the node is marked DOWN at once (so the
//    requeued job need not wait for its epilog there until SlurmdTimeout) and excluded.
//  - Hangs: heartbeats (step numbers) per rank; HangDetector with the job's
//    --heartbeat-timeout and kDefaultFirstStepFactor. A rank's process is the heartbeat's sender,
//    or, for a short-lived sender (`autopar heartbeat`), its Slurm task's process (TaskProcessOf);
//    a rank whose process is gone has ended and no longer counts. Before the hung job is
//    requeued, the stacks of this node's ranks' processes are captured into "stack" events.
//
//  - Time limits (jobs with AUTOPAR_REQUEUE_ON_FAILURE and AUTOPAR_CKPT_UPLOAD only: a local-only
//    checkpoint is COMPLETE per node, so no node could tell that every rank has it): Tick() reads the job's end time from
//    Slurm (LoadJob, at most once per `job_refresh_s` per job, so `scontrol update TimeLimit=` is
//    honoured without a libslurm call per heartbeat), the step time from the heartbeats and the
//    checkpoint durations from the journal (ckpt_committed -> ckpt_uploaded/ckpt_complete of a
//    step on this node), and at PlanTimeLimit's request_at journals "time_limit_request"; from
//    then on OnHeartbeat returns true (the heartbeat reply's checkpoint_requested). The program
//    announces the step it checkpoints ("time_limit_checkpoint" event, python/autopar/ckpt.py);
//    when a step committed at/after the request (or the announced one) is COMPLETE, the job is
//    requeued at once (GuardedRequeue, class time-limit; it counts against
//    --requeue-on-failure=N like every automatic restart: requeue_policy.h rule 2). A run that
//    ends TIMEOUT after a request without such a step journals "time_limit_missed".
//
//  - Preemption (failure_handler_preemption.cpp, docs/recovery.md): a program's
//    "termination_checkpoint" (it got SIGTERM and checkpoints a step) or a launcher's "terminated"
//    (its program ended at the SIGTERM) makes autopard ask Slurm; a preempt time in the job's
//    record makes it a preemption (core/failure/preemption.h), recorded in the AdminComment so
//    that it never counts against --requeue-on-failure, and the job is requeued (GuardedRequeue,
//    class preemption) once the announced step is COMPLETE, or at once when the program left no
//    checkpoint. A preempted run is not watched for hangs.
//  - Bad losses (docs/health.md): rank 0's reported loss goes through a LossGuard per
//    run; a NaN/Inf or a spike (AUTOPAR_LOSS_SPIKE) is journalled ("bad_loss") and, by
//    AUTOPAR_ON_BAD_LOSS, left alone (warn), stopped (StopOnce) or rolled back: rank 0's launcher
//    gets BadLossSignal, restarts the program in place and asks Recover(), whose reply limits the
//    next generation's resume to the steps before the bad one. Rollbacks have their own budget
//    (rollback:N) and do not count against --restarts-in-place.
//  - In place (docs/recovery.md): for a job whose ranks run under autopar-launch with
//    AUTOPAR_RESTARTS_IN_PLACE, a hang is handed to the hung ranks' launchers after the stacks
//    and the grace (HungProgramSignal), a rank_exit with generation= is journalled only, and rank
//    0's launcher asks Recover() for the decision about each failed generation (RecoveryPolicy
//    first, then the requeue path). Runs are keyed by (restart count, generation).
//
// Idempotency: per job and restart count one decision on this node (DecisionLedger); across
// nodes GuardedRequeue's restart-count guard makes one requeue. A lock file per job under
// `lock_dir` serializes the check-and-requeue of this node's threads.
//
// Thread safety: all methods may be called from several threads at once.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/failure/hang_detector.h"
#include "core/failure/launch_events.h"
#include "core/failure/preemption.h"
#include "core/health/loss_guard.h"
#include "core/health/progress.h"
#include "core/health/straggler.h"
#include "core/health/usage.h"
#include "core/proto/protocol.h"
#include "core/failure/recovery_policy.h"
#include "core/failure/requeue_policy.h"
#include "service/slurm_actions/slurm_actions.h"
#include "core/failure/stack_capture.h"
#include "core/failure/task_process.h"
#include "core/failure/time_limit.h"
#include "core/site_config.h"

namespace autopar {

// The settings a job's task carries in its environment.
struct JobContext {
  std::string job_id;
  int64_t restart_count = 0;
  std::optional<int64_t> requeue_on_failure;  // unset: the job did not ask for requeues
  double heartbeat_timeout_s = 0;             // 0: no hang detection
  std::string stack_dir;                      // AUTOPAR_STACK_DIR or DefaultStackDir(job)
  bool ckpt_upload = false;  // AUTOPAR_CKPT_UPLOAD is set: a COMPLETE step is in shared storage
  bool checkpoints = false;  // AUTOPAR_CKPT_DIR is set: the job checkpoints
  // Bad losses: AUTOPAR_ON_BAD_LOSS (unset: warn) and AUTOPAR_LOSS_SPIKE (0: off).
  BadLossPolicy bad_loss;
  double loss_spike = 0;
  double idle_timeout_s = 0;  // AUTOPAR_IDLE_TIMEOUT (0: never flagged idle)
  // Stragglers: AUTOPAR_STRAGGLER_MARGIN and _WINDOWS (the site's plugstack settings),
  // and whether a flagged node is left out of the job's next restart (AUTOPAR_EXCLUDE_STRAGGLERS).
  double straggler_margin = 0.25;
  int straggler_windows = 3;
  bool exclude_stragglers = false;
  int64_t restarts_in_place = 0;  // AUTOPAR_RESTARTS_IN_PLACE
  int64_t min_nodes = 0;          // AUTOPAR_MIN_NODES: an elastic run's floor (0: not elastic)
  bool fault_tolerance = false;   // AUTOPAR_FAULT_TOLERANCE=step (docs/ft.md)
  // AUTOPAR_RESTART_GENERATION, which autopar-launch gives the program when the job restarts in
  // place (-1: the program was not started by such a launcher).
  int64_t generation = -1;
  // AUTOPAR_PLAN_JSON's prediction (measured against it); nullopt without a plan.
  std::optional<PlanTarget> plan;
  // In-place restarts are carried out by the launchers: a hang on this node is handed to them.
  bool in_place() const { return restarts_in_place > 0 && generation >= 0; }
};
// Parses /proc/PID/environ content (NUL-separated NAME=VALUE). Errors: no SLURM_JOB_ID, or a
// malformed AUTOPAR_* value (named).
Result<JobContext> JobContextFromEnviron(const std::string& environ);

// What the site lets a job ask for: the autopar.so line of plugstack.conf (max_requeue, ...),
// which the plugin enforced at submit. The AUTOPAR_* environment autopard reads afterwards is its
// owner's to change, so what it says is kept within these (ClampToLimits) before root acts on it.
struct JobLimits {
  int64_t max_requeue = 0;
  int64_t max_restarts_in_place = 0;
  int64_t max_rollbacks = 0;
  double min_heartbeat_timeout_s = 0;
  double max_heartbeat_timeout_s = 0;
};
JobLimits JobLimitsOf(const SiteConfig& site);
// The fewest tasks a requeued run of `ctx`'s elastic job may start with (RequeueDecision::min_tasks):
// its floor (--min-nodes) times its tasks per node; 0 for a job that is not elastic.
int64_t ElasticMinTasks(const JobContext& ctx, const SlurmJob& job);
void ClampToLimits(const JobLimits& limits, JobContext* ctx);

struct FailureHandlerConfig {
  std::string node;      // this node's name, for the journal
  std::string lock_dir;  // where per-job lock files go (autopard's state_dir); empty: no lock
  RequeueSettings policy;  // backoff and immediate-failure rules; max_restarts comes per job
  double first_step_factor = kDefaultFirstStepFactor;
  int python_stack_wait_ms = 2000;
  // Reads rank `pid`'s Python stack dump at `path` (a file its owner names). Empty: the
  // ProcAccess's read_file. autopard reads as the process's owner, regular files only, without
  // blocking, at most a bounded size (Daemon::EnableFailureHandling).
  std::function<Result<std::string>(int pid, const std::string& path)> read_dump;
  double progress_interval_s = 30;  // "progress" events: at most one per job per interval
  // After a hang is detected and this node's stacks are captured, the requeue waits this long:
  // every node of the job detects the same hang, each on its own 1 s tick, and the node that
  // holds the stopped rank must capture its stack before the requeue ends the job's tasks. A
  // fault-tolerant group's hang is handed to this node's launchers at once: only the hung
  // program is replaced, and every node captures its own stacks before it hands over.
  double hang_requeue_grace_s = 3;
  int node_probe_timeout_ms = 1000;  // per node of the job, when a failure is classified
  TimeLimitSettings time_limit;      // the margin formula (time_limit.h)
  JobLimits limits = JobLimitsOf(SiteConfig{});  // the plugin's defaults
  double job_refresh_s = 30;         // how often a watched job's end time is read from Slurm
};

// What rank 0's heartbeat carries beyond its step: every rank's compute time of the step and
// node; `leads`: the sender is not rank 0 but reports in its place (protocol.h, docs/ft.md).
struct RanksReport {
  std::vector<double> compute_s;
  std::vector<std::string> nodes;
  bool leads = false;
};

class FailureHandler {
 public:
  using Journal = std::function<void(const JournalEvent&)>;
  using Clock = std::function<double()>;  // seconds since the epoch

  FailureHandler(FailureHandlerConfig config, SlurmActions* slurm, ProcAccess proc,
                 Journal journal, Clock clock);

  // A heartbeat of `rank` at `step`, sent by process `pid`; `short_lived`: the sender exits right
  // after (protocol.h). Returns true when the program is asked to checkpoint now because the
  // job's time limit is near (the reply's checkpoint_requested).
  // `samples`, `tokens`, `loss`: the step's progress when the program sends it (-1 /
  // nullopt: not given); rank 0's (or those of the rank that `ranks.leads` in its place) become
  // "progress" events at most once per progress_interval_s.
  bool OnHeartbeat(const std::string& job_id, int rank, int64_t step, pid_t pid,
                   bool short_lived = false, int64_t samples = -1, int64_t tokens = -1,
                   std::optional<double> loss = std::nullopt, const RanksReport& ranks = {});
  // A rank's program, process `pid`, is finishing (a heartbeat with "finishing", protocol.h): the
  // hang watch of its run on this node gives its exit the first-step allowance
  // (HangDetector::Finishing). A process that is not a task of the job, or of an earlier run, is
  // ignored.
  void OnFinishing(const std::string& job_id, pid_t pid);
  // The process whose life is `rank`'s on this node, as the last heartbeat found it (0: none), for
  // the state database (ResumeWatch after a restart of autopard).
  pid_t RankProcessOf(const std::string& job_id, int rank) const;
  // A restarted autopard watches again a rank whose last heartbeat (before the restart) came from
  // `pid` at epoch `time` at `step`: when that process still runs as a task of the job, its run is
  // watched for hangs as if that heartbeat had just come at `time`, with the first-step allowance
  // (the detector cannot know the run had made progress), so a rank that hung while autopard was
  // down is found. Returns whether the rank is watched.
  bool ResumeWatch(const std::string& job_id, int rank, int64_t step, pid_t pid, double time);

  // A journal event; `pid` is the sender's (0: from the daemon itself, e.g. the uploader's
  // ckpt_* events, which the time-limit handling needs).
  void OnEvent(const JournalEvent& event, pid_t pid);
  // A rank's usage_sample (autopar-launch, launcher/usage_reporter.h), not journalled: this node's
  // share of the job is summarised ("usage") and checked for idleness ("idle") in Tick().
  void OnUsageSample(const JournalEvent& sample, pid_t pid);
  // Checks for hangs, time limits and idle allocations; call about once a second.
  void Tick();

  // A failed generation of a job that restarts in place: rank 0's launcher's `recover` request
  // (protocol.h), `detail` its failure fields, `pid` the sender. Journals the failure and the
  // decision (RecoveryPolicy, then RequeuePolicy when the requeue path takes over, which it
  // carries out before returning). Errors: the sender is not a task of the job, a malformed
  // detail.
  Result<RecoverReply> Recover(const std::string& job_id, int rank, const std::string& detail,
                               pid_t pid);

  // The site's bounds, reloaded (autopard's SIGHUP): processes seen from now on are clamped to
  // them (a process's context already read keeps the bounds it was read with).
  void SetLimits(const JobLimits& limits);

  // The outcome of the last failure handled for a job on this node, for tests and status.
  std::optional<RequeueDecision> LastDecision(const std::string& job_id) const;

 private:
  // Time-limit state of one run on this node.
  struct TimeLimitWatch {
    double loaded_at = -1;     // clock time of the last LoadJob (-1: never)
    double start_time = 0;     // Slurm's, of this run
    double end_time = 0;       // Slurm's (0: no time limit)
    int64_t first_step = -1;   // step time: from the first to the highest heartbeat step
    double first_step_time = 0;
    int64_t max_step = -1;
    double max_step_time = 0;
    bool requested = false;    // this node asked the program to checkpoint
    double requested_at = 0;
    double delivered_at = 0;   // the first heartbeat reply that carried the request
    int64_t delivered_step = -1;  // that heartbeat's step
    TimeLimitPlan plan;
    int64_t ckpt_step = -1;    // the first step committed on this node at/after the request
    int64_t announced_step = -1;  // the step the program said it checkpoints for the limit
    bool acted = false;        // requeued (or decided not to) for the time limit
    bool done = false;         // the run ended or has no time limit to watch
    // A heartbeat of `step`: the step time's span, the request's delivery; whether the program
    // is asked to checkpoint for its time limit (the heartbeat's reply says so).
    bool OnStep(int64_t step, double now);
  };
  // Preemption state of one run on this node (failure_handler_preemption.cpp).
  struct PreemptWatch {
    double checked_at = -1;       // clock time Slurm was last asked (-1: never)
    Preemption slurm;             // Slurm's record, once it says preempted
    int64_t announced_step = -1;  // the step the program checkpoints at its SIGTERM
    int64_t complete_step = -1;   // the newest step COMPLETE in this run
    bool acted = false;           // requeued (or left to Slurm) for the preemption
    bool terminated = false;      // a launcher said its program ended at the SIGTERM
    bool requeue_noted = false;   // requeued_by_slurm journalled
  };
  // The process whose life is a rank's on this node.
  struct RankProcess {
    pid_t pid = 0;
    uint64_t start_ticks = 0;  // with pid: the same process (pids are reused)
  };
  struct Run {
    JobContext ctx;
    TimeLimitWatch tl;
    PreemptWatch preempt;
    std::unique_ptr<HangDetector> hang;
    std::map<int, RankProcess> rank_procs;
    bool heartbeats = false;  // a rank of this run sent a heartbeat (training made progress)
    bool hang_reported = false;
    std::optional<double> hang_requeue_at;  // a detected hang, requeued at this time (Tick)
    std::optional<int> hang_rank;           // its single suspect, if one
    bool hang_progress = false;             // the run made progress before it hung
    bool first_step_told = false;           // first_step journalled for this generation
    std::unique_ptr<ProgressTracker> progress;  // rank 0's steps
    std::unique_ptr<LossGuard> loss_guard;      // rank 0's losses
    std::unique_ptr<StragglerDetector> stragglers;  // every rank's compute times
  };
  // A rollback handed to rank 0's launcher, waiting for its `recover` request.
  struct PendingRollback {
    int64_t restart_count = 0;
    int64_t generation = 0;
    LossAnomaly anomaly;
    BadLossDecision decision;
  };
  // This node's share of a job (utilisation and idleness), per run of the job.
  struct UsageWatch {
    int64_t restart_count = 0;
    double last_sample = 0;
    std::unique_ptr<NodeUsage> usage;  // null: no samples (any more)
  };
  // A checkpoint step's earliest commit and latest upload/completion seen on this node.
  struct CkptTimes {
    double committed = 0;
    double done = 0;
  };
  // Everything this node keeps about one job: its current run and what outlives a run. One
  // record per job, forgotten (ForgetIdleJobsLocked) once nothing of it has run or happened on
  // this node for a while.
  struct JobRecord {
    Run run;  // the current run here (run.ctx.job_id empty: none seen yet)
    std::optional<RequeueDecision> last;      // the last failure decided here
    std::optional<double> recovering_since;   // an in-place recovery's failure (the launcher's
                                              // clock), until the restarted program's first step
    int64_t rollbacks = 0;                    // carried out (--on-bad-loss=rollback:N's budget)
    std::optional<PendingRollback> pending_rollback;  // handed to rank 0's launcher
    std::set<std::string> straggler_nodes;    // flagged in its runs (rank 0's), kept across runs
    UsageWatch usage;
    std::map<int64_t, CkptTimes> ckpt_times;  // step -> times, the newest 64, kept across runs
    double seen = 0;                          // the clock at its last heartbeat, event or sample
  };

  // What a heartbeat found, journalled once the lock is released.
  struct HeartbeatNews {
    std::optional<EventFields> first_step;  // an in-place recovery's end
    std::optional<EventFields> progress;    // a progress window closed
    std::optional<LossAnomaly> bad_loss;
    std::vector<StragglerFlag> stragglers;
  };
  // Rank 0's heartbeat: the job's progress, loss and stragglers (mu_ held).
  void WatchRankZeroLocked(JobRecord* job, const JobContext& ctx, const ProgressSample& sample,
                           const RanksReport& ranks, HeartbeatNews* news);
  // A fresh run of `ctx` (a new run of the job or of its program), its hang watch from `since`.
  Run NewRun(const JobContext& ctx, double since) const;
  // Forgets the jobs of which nothing runs on this node, nothing is under way (a rollback, usage
  // samples) and nothing happened for kForgetIdleS (mu_ held).
  void ForgetIdleJobsLocked(double now);
  // The job context for `pid` (cached per process), or nullopt when unreadable.
  std::optional<JobContext> ContextOf(pid_t pid);
  std::optional<JobContext> ContextOf(const ProcStat& process);
  // A request's sender, when it is a task of `job_id`: its own process or, for a short-lived
  // sender, its task's (TaskProcessOf), with the task's context. Else nothing to act on.
  struct Sender {
    ProcStat process;
    JobContext ctx;
  };
  std::optional<Sender> SenderInJob(const std::string& job_id, pid_t pid, bool short_lived);
  // Whether a rank's process still runs.
  bool Alive(const RankProcess& p) const;
  // Time limits: reads end times, plans, journals requests and missed limits (from Tick).
  void TickTimeLimits(double now);
  // An event decided under mu_, journalled once it is released.
  struct PendingEvent {
    std::string job_id;
    std::string kind;
    int64_t step = -1;
    std::string detail;
  };
  // TickTimeLimits' parts: whether Slurm's view of a run's end is to be read again now (mu_
  // held); that view read and applied (a missed limit noted in `out`); the checkpoint request a
  // run's plan makes due now (mu_ held).
  bool TimeLimitRefreshDueLocked(Run* run, double now);
  void RefreshTimeLimit(const std::string& job_id, int64_t restart_count, double now,
                        std::vector<PendingEvent>* out);
  std::optional<PendingEvent> TimeLimitRequestLocked(const std::string& job, Run* run, double now);
  // Checkpoint events for the time limit (from OnEvent).
  void OnCheckpointEvent(const JournalEvent& event, pid_t pid);
  // Requeues `ctx`'s run for its time limit now that `step` is COMPLETE.
  // `progress`: the step was trained in this run (not the resumed one again).
  void RequeueForTimeLimit(const JobContext& ctx, int64_t step, const TimeLimitPlan& plan,
                           bool progress);
  // Preemption (failure_handler_preemption.cpp): a program's termination_checkpoint; a
  // launcher's "terminated" (its program ended at the SIGTERM without one); Slurm asked whether
  // the run is preempted (at most every 2 s per run, and once for "terminated": a task's word
  // only makes root ask, never act), journalled by the batch host's node, the preemption
  // if so; a COMPLETE step of a preempted run; the requeue at once.
  void OnTerminationCheckpoint(const JournalEvent& e, pid_t pid);
  void OnTerminated(const JournalEvent& e, pid_t pid);
  std::optional<Preemption> ConfirmPreemption(const JobContext& ctx);
  // The run ended at the SIGTERM of a requeue Slurm made itself (no grace time): journalled.
  void NoteRequeuedBySlurm(const JobContext& ctx);
  void OnPreemptedComplete(const JobContext& ctx, int64_t step);
  void RequeueForPreemption(const JobContext& ctx, int64_t step, const Preemption& p);
  // Records decision `d` (kRequeue) as this run's and requeues the job (GuardedRequeue); the
  // result when this node's call requeued it (the node that did journals it); nullopt otherwise,
  // with requeue_failed journalled (class=CLS when given) when Slurm could not be asked.
  std::optional<GuardedRequeueResult> RecordAndRequeue(const JobContext& ctx,
                                                       const RequeueDecision& d, int64_t step,
                                                       const std::string& cls, double now);
  std::string RequeueLockPath(const std::string& job_id) const;
  // The observed checkpoint durations of a job on this node, oldest first (mu_ held).
  std::vector<double> CkptDurationsLocked(const std::string& job_id) const;
  // config_.policy for `f`: after a node loss, with the delay this cluster needs
  // (NodeLossDelayForCluster; Slurm is asked once, and only then).
  RequeueSettings Policy(const Failure& f) const;
  // RequeuePolicy's decision for `f` of `ctx`'s run, with the job as Slurm has it now; the
  // previous failure is `history` when set (in place), else the note in the job's AdminComment.
  RequeueDecision DecideFor(const JobContext& ctx, const Failure& f, const SlurmJob& job,
                            const std::optional<PastFailure>& history) const;
  // Decides and acts on one failure of `ctx`'s run; never throws, journals everything.
  void HandleFailure(const JobContext& ctx, const Failure& failure);
  // CaptureStack's reader of the Python dump of process `pid` (null: the ProcAccess's).
  std::function<Result<std::string>(const std::string&)> DumpReader(int pid) const;
  // Of the nodes a recover request names as lost (a hostlist), those of the job's allocation
  // whose slurmd does not answer; every other one is journaled as a refused claim with its reason.
  std::vector<std::string> ConfirmLostNodes(const std::string& job_id, const std::string& claimed,
                                            const Result<SlurmJob>& job);
  // A crashed rank whose peer node died is a node loss: probes the job's nodes and, when some
  // are unreachable, journals and returns the node-loss failure (`lost` gets the nodes).
  Failure ClassifyNodeLoss(const JobContext& ctx, const Failure& failure, const SlurmJob& job,
                           std::vector<std::string>* lost);
  // The requeue path for a failure already journalled: RequeuePolicy's decision (with `history`
  // as the previous failure when set), carried out. Returns "requeue" or "stop" (what was done).
  std::string RequeuePath(const JobContext& ctx, const Failure& failure, const SlurmJob& job,
                          const std::vector<std::string>& lost_nodes,
                          const std::optional<PastFailure>& history);
  // Hangs (failure_handler_hang.cpp): what one Tick found, acted on once mu_ is released.
  struct HungRun {
    JobContext ctx;
    HangVerdict verdict;
    std::map<int, RankProcess> procs;
  };
  struct HangWork {
    std::vector<HungRun> hung;                         // newly hung: journal them, take stacks
    std::vector<std::pair<JobContext, Failure>> due;   // hangs whose grace has passed
    std::vector<std::pair<JobContext, std::map<int, RankProcess>>> hand_over;  // in place
  };
  // The failure a hang of `run` is, once its grace has passed.
  Failure HangFailure(const Run& run) const;
  // Checks one run's hang watch at `now` and notes what is to be done (mu_ held).
  void CheckHangLocked(Run* run, double now, HangWork* work);
  // Every watched run's hang watch at `now` (mu_ taken here); forgets idle jobs first if asked.
  HangWork CheckHangs(double now, bool forget_idle);
  // Journals a newly hung run with its ranks' stacks and sets its requeue after the grace.
  void ReportHang(const HungRun& h);
  void CaptureHungStacks(const HungRun& h);
  // A hang in a job that restarts in place: tells the launchers of this node's ranks (their
  // programs hung) with HungProgramSignal, so that they stop and restart the program.
  void HandHangToLaunchers(const JobContext& ctx, const std::map<int, RankProcess>& procs);
  // The launcher (autopar-launch) of a rank's process, of the same job; nullopt when none.
  std::optional<ProcStat> LauncherOf(const JobContext& ctx, const RankProcess& process);
  // A bad loss of rank 0 (failure_handler_loss.cpp): journals it and acts by --on-bad-loss.
  void OnBadLoss(const JobContext& ctx, const LossAnomaly& anomaly, const RankProcess& rank0);
  // Recover()'s parts: the failure a launcher's detail claims (with what this node saw of the
  // run); its journal entry; the decision journalled and carried out (a requeue before the reply).
  Failure FailureOfDetail(const JobContext& ctx, const RecoverDetail& d, int rank);
  void JournalRecoverFailure(const JobContext& ctx, const Failure& failure, int64_t generation,
                             const std::vector<std::string>& lost_nodes, const NodeLoss& loss);
  Result<RecoverReply> CarryOutRecovery(const JobContext& ctx, const Failure& failure,
                                        int64_t generation, RecoveryDecision d,
                                        const Result<SlurmJob>& job,
                                        const std::vector<std::string>& lost_nodes);
  // Recover() for a generation that rank 0's launcher stopped for a rollback.
  Result<RecoverReply> RecoverBadLoss(const JobContext& ctx, int64_t generation);
  void Emit(const std::string& job_id, const std::string& kind, int rank, int64_t step,
            const std::string& detail);
  // Usage summaries and idle flags due (failure_handler_usage.cpp, from Tick).
  void TickUsage(double now);

  FailureHandlerConfig config_;
  SlurmActions* slurm_;
  ProcAccess proc_;
  Journal journal_;
  Clock clock_;
  DecisionLedger ledger_;

  mutable std::mutex mu_;
  std::map<std::pair<pid_t, uint64_t>, JobContext> contexts_;  // (pid, start) -> context
  std::map<std::string, JobRecord> jobs_;                       // job id -> what this node keeps
};

}  // namespace autopar
