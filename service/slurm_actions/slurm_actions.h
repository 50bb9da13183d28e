// SlurmActions: the few things autopard asks of Slurm when a job fails, behind one small
// interface so tests inject a Slurm that refuses. The libslurm implementation
// (MakeLibSlurmActions, library autopar_slurm_actions in service/slurm_actions) needs root or
// SlurmUser for requeue, update and cancel of another user's job.
//
// GuardedRequeue carries out a RequeueDecision (requeue_policy.h) exactly once however many nodes
// or threads call it for the same failure: the requeue is keyed by the job's restart count.
//
// Thread safety: the libslurm implementation may be called from several threads (its calls are
// serialized); GuardedRequeue is reentrant.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/failure/requeue_policy.h"
#include "autopar/status.h"

namespace autopar {

struct SlurmJob {
  std::string job_id;
  uid_t user_id = 0;
  std::string state;        // Slurm's base state: "PENDING", "RUNNING", "COMPLETED", "FAILED", ...
  bool completing = false;  // the COMPLETING flag (ending, or requeued and still cleaning up)
  bool requeue_flag = false;  // the REQUEUE flag (a requeue is under way)
  bool requeue_allowed = false;  // the job may be requeued (sbatch --requeue / JobRequeue=1)
  bool batch = false;       // a batch job (only batch jobs can be requeued)
  int64_t restart_count = 0;
  double submit_time = 0;   // seconds since the epoch; 0: unknown
  double start_time = 0;    // actual or expected
  double end_time = 0;      // actual or expected (start + time limit); 0: none
  double eligible_time = 0; // when a pending job may start (after a requeue: Slurm's wait)
  // When Slurm signalled the run's preemption (0: not preempted); its end_time is then the end of
  // the grace (core/failure/preemption.h).
  double preempt_time = 0;
  std::string partition;
  int64_t time_limit_min = -1;  // -1: unlimited
  std::string nodes;        // allocated nodes, Slurm's hostlist ("node[1-2]"); empty when pending
  int64_t cpus = 0;         // allocated (or requested) CPUs; 0: unknown
  int64_t tasks = 0;        // requested tasks (-n); 0: not given
  int64_t ntasks_per_node = 0;  // --ntasks-per-node; 0: not given
  // The most ranks the job's steps can have (tasks, or one per CPU); 0: unknown.
  int64_t max_ranks() const { return std::max(cpus, tasks); }
  std::string batch_host;
  std::string excluded_nodes;  // hostlist expression as Slurm keeps it
  std::string admin_comment;
  std::string reason;       // Slurm's state reason ("BeginTime", "None", ...)

  bool running() const { return state == "RUNNING"; }
  bool pending() const { return state == "PENDING"; }
};

// Fields to change; unset ones are left alone.
struct SlurmJobUpdate {
  std::string job_id;
  std::optional<std::string> excluded_nodes;  // the whole new list (comma-separated)
  std::optional<double> begin_time;           // seconds since the epoch
  std::optional<std::string> admin_comment;
  std::optional<int64_t> num_tasks;           // a pending job's task count
};

class SlurmActions {
 public:
  virtual ~SlurmActions() = default;
  // Errors: "job 42: <libslurm's error>" (an unknown job says so).
  virtual Result<SlurmJob> LoadJob(const std::string& job_id) = 0;
  // The most tasks of any running step of the job (slurm_get_job_steps): how many ranks its
  // programs can have, also with --overcommit. 0: none running, or unknown.
  virtual int64_t MaxStepTasks(const std::string& job_id) {
    (void)job_id;
    return 0;
  }
  // slurm_requeue(job, 0).
  virtual Status Requeue(const std::string& job_id) = 0;
  // slurm_update_job with the set fields.
  virtual Status Update(const SlurmJobUpdate& update) = 0;
  // slurm_kill_job(job, SIGKILL): the job ends CANCELLED.
  virtual Status Cancel(const std::string& job_id) = 0;
  // Of `nodes`, those whose slurmd does not accept a TCP connection at its NodeAddr:Port within
  // `timeout_ms` (a node that died as a whole: its slurmd is gone long before slurmctld marks it
  // DOWN after SlurmdTimeout). Nodes Slurm does not know are left out.
  virtual std::vector<std::string> UnreachableNodes(const std::vector<std::string>& nodes,
                                                    int timeout_ms) = 0;
  // Whether `node`'s loss is certain enough to take it out of the whole cluster (DOWN), not only
  // out of one job's next run: its slurmd refuses connections (nothing listens there: the
  // process or the host is gone) or cannot be routed to, or slurmctld itself finds it not
  // responding. A connection that only times out is not enough: a user who fills slurmd's accept
  // queue causes the same. Returns the evidence, or an error saying why the node is left to
  // slurmctld (its own SlurmdTimeout).
  virtual Result<std::string> LossEvidence(const std::string& /*node*/, int /*timeout_ms*/) {
    return std::string("slurmd unreachable");
  }
  // slurm_update_node(state=DOWN, reason): a node found unreachable is taken out at once, so the
  // requeued job does not wait in COMPLETING for its epilog there until slurmctld's own
  // SlurmdTimeout. The node returns by itself when its slurmd registers again
  // (ReturnToService=2) or by `scontrol update nodename=N state=resume`.
  virtual Status MarkNodeDown(const std::string& node, const std::string& reason) = 0;
  // The controller's ProctrackType and KillWait (slurm_load_ctl_conf), which decide how long an
  // aborted srun of a requeued run can outlive it (NodeLossDelayForCluster). Error: the
  // controller did not answer.
  virtual Result<std::pair<std::string, double>> ProcessTracking() {
    return Status::Error("not known");
  }
};

// libslurm. `slurm_conf`: the slurm.conf to use (empty: SLURM_CONF or the default). libslurm ends
// the process when it finds no configuration: a process that must live on uses OpenLibSlurmActions.
std::unique_ptr<SlurmActions> MakeLibSlurmActions(const std::string& slurm_conf);

// The slurm.conf libslurm reads: `slurm_conf` when not empty, else $SLURM_CONF when set and not
// empty, else /etc/slurm/slurm.conf.
std::string SlurmConfPath(const std::string& slurm_conf);

// MakeLibSlurmActions once SlurmConfPath(slurm_conf) is found readable. Error, naming the file:
// "slurm.conf /etc/slurm/slurm.conf: not readable (No such file or directory)".
Result<std::unique_ptr<SlurmActions>> OpenLibSlurmActions(const std::string& slurm_conf);

enum class RequeueOutcome {
  kRequeued,        // this caller requeued the job
  kAlreadyDone,     // someone else did (the restart count moved or the job left RUNNING)
};

struct GuardedRequeueResult {
  RequeueOutcome outcome = RequeueOutcome::kRequeued;
  int64_t restart_count_now = 0;  // the job's restart count after the call
  std::string message;            // one line: what happened
  std::vector<std::string> warnings;  // the requeue happened but a follow-up update failed
};

// Requeues job `job_id` for `decision` (action kRequeue) only if the job is still in the run with
// restart count decision.restart_count and not requeued yet (not PENDING, no REQUEUE flag; a run
// that already ended FAILED is requeued too, as Slurm allows for batch jobs); then sets its excluded nodes (decision.exclude_nodes, merged with the
// ones Slurm has), its AdminComment (decision.reason + EncodeFailureNote(decision.note)) and,
// when decision.delay_s is longer than Slurm's own wait, its begin time to now + delay_s.
// `lock_path` (may be empty): a file locked (flock) around check-and-requeue, so callers on one
// machine never interleave; across machines Slurm's own state change is the guard (a second
// slurm_requeue of a job that is no longer RUNNING fails, and is then recognised as kAlreadyDone).
// `now`: seconds since the epoch. Errors: the job is gone or cannot be requeued, or Slurm refused
// the requeue ("requeue of job 42 refused by Slurm: <reason>").
Result<GuardedRequeueResult> GuardedRequeue(SlurmActions& slurm, const std::string& job_id,
                                            const RequeueDecision& decision, double now,
                                            const std::string& lock_path = "");

// Adds `nodes` to the job's excluded nodes (keeping those already there). The job must be
// PENDING (Slurm only changes the excluded list of pending jobs).
Status AddExcludedNodes(SlurmActions& slurm, const std::string& job_id,
                        const std::vector<std::string>& nodes);

// Records `reason` in the job's AdminComment ("autopar: <reason>") and cancels it.
Status CancelWithReason(SlurmActions& slurm, const std::string& job_id, const std::string& reason);

// CancelWithReason once per run: under `lock_path` (may be empty), only when the job is still in
// the run with `restart_count` and nobody stopped that run yet. The AdminComment gets the reason
// and StopMarker(restart_count), which also makes every later GuardedRequeue of that run a no-op
// (a node that has not seen the stop must not requeue the job behind it). Returns true
// when this caller stopped it, false when it was done already or the job has moved on. A job
// whose run already ended is not cancelled, but the reason is still recorded.
std::string StopMarker(int64_t restart_count);  // "autopar-stopped restart=N"
Result<bool> StopOnce(SlurmActions& slurm, const std::string& job_id, int64_t restart_count,
                      const std::string& reason, const std::string& lock_path = "");

}  // namespace autopar
