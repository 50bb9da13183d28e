// RequeuePolicy: what autopard does when a job fails. Pure, no Slurm calls: the daemon
// feeds it a Failure and what it knows of the job (Slurm's restart count, the excluded nodes, the
// previous run's failure) and carries the decision out through SlurmActions
// (service/slurm_actions/slurm_actions.h).
//
// The rules, in order:
//  1. Idempotency. A decision is keyed by the job's restart count (Slurm's `Restarts`,
//     SLURM_RESTART_COUNT in the tasks). A DecisionLedger remembers the restart counts already
//     decided, so several reports of one failure (every rank, every node) give one decision; the
//     requeue itself is guarded again in Slurm by the same count (SlurmActions::Requeue), so
//     several nodes deciding at once still cause exactly one requeue.
//  2. Budget. At most N automatic restarts (N = --requeue-on-failure, already capped by the site's
//     max_requeue). Every automatic restart counts, time-limit ones included, preemptions not:
//     restart n of the job, less its preemptions, is "attempt n of N", and a failure with that
//     many >= N stops the job.
//  3. No loops. A program error (crashed rank or hang) that comes within `early_failure_s` seconds
//     of the run's start, before the run reported any training progress, with the same signature (class + exit code or signal) as the previous run's
//     early failure stops the job with a clear reason instead of a requeue: with the defaults, a
//     script that exits 1 at start is requeued once and then stopped ("exit within the first
//     seconds, twice"). Node loss and time limits are never program errors.
//  4. A time-limit requeue needs progress: if no checkpoint became COMPLETE during the run, a
//     requeue would hit the limit again at the same place, so the job is stopped.
//  5. Exclusion. A lost node is added to the job's excluded nodes; a crashed rank or a hang does not
//     exclude its node (a program fault, not the node's).
//  6. Backoff. Restart n may not begin before `delay_s` = min(backoff_max_s,
//     backoff_initial_s * backoff_multiplier^(n-1)) after the decision (0 for time-limit requeues:
//     nothing failed; at least node_loss_delay_s after a node loss). Slurm adds its own wait (AuthInfo cred_expire); the later of the two wins.
//
// Thread safety: the functions are reentrant; a DecisionLedger is thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autopar/status.h"

namespace autopar {

// kOom: a rank's program ran out of memory (core/failure/oom.h), a program error like a crash;
// an in-place restart re-plans with more headroom (docs/health.md). kBadLoss: the program's loss
// went bad and the job rolls back (--on-bad-loss=rollback); it only ever restarts in place, never
// through the requeue path.
enum class FailureClass { kNodeLoss, kRankCrash, kHang, kTimeLimit, kBadLoss, kOom };
inline constexpr FailureClass kFailureClasses[] = {FailureClass::kNodeLoss, FailureClass::kRankCrash,
                                                    FailureClass::kHang,     FailureClass::kTimeLimit,
                                                    FailureClass::kBadLoss,  FailureClass::kOom};

// "node-loss", "rank-crash", "hang", "time-limit", "bad-loss", "oom".
const char* FailureClassName(FailureClass c);
// The inverse of FailureClassName; the error names the text.
Result<FailureClass> ParseFailureClass(std::string_view name);

// One failure as one node saw it.
struct Failure {
  FailureClass kind = FailureClass::kRankCrash;
  std::string node;        // where it happened (node loss: the node that was lost)
  int rank = -1;           // crashed or hung rank (-1: not one rank)
  int exit_code = -1;      // rank crash: the exit status, or -1 when killed by a signal
  int signal = 0;          // rank crash: the signal that ended it, or 0
  double run_seconds = -1; // how long this run of the job had run when it failed (-1: unknown)
  bool ckpt_progress = false;  // time limit: a checkpoint became COMPLETE during this run
  bool made_progress = false;  // the run reported training progress (a heartbeat) before failing
  std::string note;            // bad loss: what was bad ("loss nan at step 35"); oom: what ran out

  // What "the same error" means: "rank-crash exit=1", "rank-crash signal=9", "hang", ...
  std::string Signature() const;
  // One line: "rank 3 on node2 exited with status 1 after 2.0 s".
  std::string Describe() const;
};

// The previous run's failure, as recorded at its requeue (see EncodeFailureNote).
struct PastFailure {
  int64_t restart_count = 0;  // the restart count of the run that failed
  std::string signature;
  int early_repeats = 0;      // immediate failures in a row with this signature, that one
                              // included (0: it was not immediate)
};

struct RequeueSettings {
  int64_t max_restarts = 0;        // N of --requeue-on-failure
  double backoff_initial_s = 5;
  double backoff_multiplier = 2;
  double backoff_max_s = 300;
  double early_failure_s = 30;     // a program error this soon after the start is "immediate"
  int early_repeats_to_stop = 2;   // this many immediate failures in a row, same signature: stop
  // Node loss: the next run starts at least this long after the requeue. autopard marks the lost
  // node DOWN, so Slurm could start the next run at once, while the old run's srun on a surviving
  // node still waits (KillWait + 2 s) for the dead node's tasks; since the step ids of the new run
  // start at 0 again, that srun's "forcing job termination" would cancel the new run's step 0.
  // autopard raises it for its cluster's KillWait (NodeLossDelayForCluster).
  double node_loss_delay_s = 15;
};

// Checks ranges; the error names the field ("requeue policy: backoff_multiplier: must be >= 1").
Status ValidateRequeueSettings(const RequeueSettings& s);

// node_loss_delay_s for a cluster whose process tracker is `proctrack_type` and whose KillWait is
// `kill_wait_s`: `configured_s`, or longer where the old run's srun can outlive its batch step.
// proctrack/cgroup and proctrack/pgid keep the step (and so the job, and its next run) until that
// srun has gone; any other tracker (proctrack/linuxproc follows the process tree, and an srun
// whose batch script was killed is reparented out of it) lets the next run start while the
// srun still waits KillWait + 2 s (Slurm's STEP_ABORT_TIME) for the lost node's tasks, then
// cancels "step 0", the new run's: the delay is that wait plus 3 s (the begin time is floored to
// the second, and the srun's abort starts when the requeue signals it). An empty
// `proctrack_type` (Slurm's settings not known) is taken as such a tracker.
double NodeLossDelayForCluster(double configured_s, const std::string& proctrack_type,
                               double kill_wait_s);

enum class RequeueAction {
  kRequeue,         // requeue the job (with delay_s and exclude_nodes)
  kStop,            // end the job; `reason` says why
  kAlreadyDecided,  // this restart count was decided before (another report of the same failure)
};
const char* RequeueActionName(RequeueAction a);  // "requeue", "stop", "already-decided"

struct RequeueDecision {
  RequeueAction action = RequeueAction::kStop;
  int64_t restart_count = 0;  // the run this decision is about (the guard for SlurmActions)
  int64_t attempt = 0;        // kRequeue: n of "attempt n of N" (restart_count + 1)
  int64_t max_restarts = 0;
  double delay_s = 0;         // kRequeue: earliest start of the next run, seconds from now
  std::vector<std::string> exclude_nodes;  // kRequeue: the job's whole excluded list afterwards
  PastFailure note;           // kRequeue: what to remember for the next run's decision
  bool preemption = false;    // kRequeue: the run was preempted (recorded, not counted)
  // kRequeue: the fewest tasks the next run may start with (an elastic job's floor times its
  // tasks per node; 0: as Slurm has it). Slurm keeps the task count of the run that ended, which
  // would make the next run wait for as many nodes.
  int64_t min_tasks = 0;
  std::string reason;         // one line for the journal and the job's AdminComment
};

// The pure decision (rules 2-6; rule 1 is the ledger's and the caller's). `previous` is the
// failure recorded at the last requeue, if any; `excluded_now` the job's excluded nodes;
// `not_counted` the restarts that do not count against the budget (preemptions:
// core/failure/preemption.h), so the budget is restart_count - not_counted.
RequeueDecision DecideRequeue(const RequeueSettings& settings, const Failure& failure,
                              int64_t restart_count, const std::optional<PastFailure>& previous,
                              const std::vector<std::string>& excluded_now, int64_t not_counted = 0);

// The delay before restart `attempt` (1-based), rule 6.
double RequeueBackoffSeconds(const RequeueSettings& s, int64_t attempt);

// The note stored with the job at a requeue (in its AdminComment), so that whichever node decides
// the next failure knows the previous one: "autopar-failure restart=0 early=1 sig=rank-crash exit=1"
// (early = early_repeats).
std::string EncodeFailureNote(const PastFailure& note);
// Finds and parses the note anywhere in `text` (other text around it is ignored); nullopt when
// there is none or it is malformed.
std::optional<PastFailure> ParseFailureNote(std::string_view text);

// Remembers, per job, the restart counts that were decided, so each is decided once. Thread-safe.
class DecisionLedger {
 public:
  // True the first time (job_id, restart_count) is claimed, false afterwards. Claims for restart
  // counts lower than one already claimed are stale reports of an earlier run: false too.
  bool Claim(const std::string& job_id, int64_t restart_count);
  // The decision recorded for the claim, for reporting duplicates (nullopt: none recorded).
  void Record(const std::string& job_id, const RequeueDecision& decision);
  std::optional<RequeueDecision> Recorded(const std::string& job_id, int64_t restart_count) const;
  // Forgets a job (it ended).
  void Forget(const std::string& job_id);

 private:
  mutable std::mutex mu_;
  std::map<std::string, int64_t> highest_;  // job -> highest claimed restart count
  std::map<std::pair<std::string, int64_t>, RequeueDecision> decisions_;
};

}  // namespace autopar
