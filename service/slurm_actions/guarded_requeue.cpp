// GuardedRequeue, AddExcludedNodes, CancelWithReason: logic over the SlurmActions interface (no
// libslurm here, so unit tests run it against a fake Slurm).
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/failure/preemption.h"
#include "core/hostlist.h"
#include "service/slurm_actions/slurm_actions.h"
#include "core/text.h"

namespace autopar {
namespace {

// An flock(2) held for the lifetime of the object (none for an empty path).
class FileLock {
 public:
  static Result<std::unique_ptr<FileLock>> Acquire(const std::string& path) {
    auto lock = std::unique_ptr<FileLock>(new FileLock);
    if (path.empty()) return lock;
    lock->fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock->fd_ < 0) return Status::Error(path + ": " + std::strerror(errno));
    while (flock(lock->fd_, LOCK_EX) != 0) {
      if (errno != EINTR) return Status::Error(path + ": flock: " + std::strerror(errno));
    }
    return lock;
  }
  ~FileLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }

 private:
  FileLock() = default;
  int fd_ = -1;
};

// The job's excluded nodes plus `add`, each once, in first-seen order.
Result<std::string> MergedExcluded(const SlurmJob& job, const std::vector<std::string>& add) {
  std::vector<std::string> all;
  if (!job.excluded_nodes.empty()) {
    auto have = ExpandHostlist(job.excluded_nodes);
    if (!have.ok()) return have.status();
    all = *have;
  }
  for (const auto& n : add) {
    if (std::find(all.begin(), all.end(), n) == all.end()) all.push_back(n);
  }
  return Join(all, ",");
}

// Still the run the decision is about, and not yet requeued by anyone. The run may have ended
// already after its step failed (the batch script exited non-zero: FAILED, or the node died:
// NODE_FAIL, or the time limit: TIMEOUT): Slurm requeues a finished batch job too ("Requeue a
// running, suspended or finished Slurm batch job", man scontrol) while it still knows it
// (MinJobAge). A job that COMPLETED or was CANCELLED is never brought back.
bool SameRun(const SlurmJob& job, int64_t restart_count) {
  if (job.restart_count != restart_count || job.requeue_flag || job.pending()) return false;
  return job.running() || job.state == "SUSPENDED" || job.state == "FAILED" ||
         job.state == "NODE_FAIL" || job.state == "TIMEOUT";
}

// Why the run `decision` was made for no longer needs a requeue (stopped, or requeued by another
// caller); "" when it does.
std::string AlreadyDone(const SlurmJob& job, const std::string& job_id, const RequeueDecision& decision) {
  if (job.admin_comment.find(StopMarker(decision.restart_count)) != std::string::npos) {
    return "job " + job_id + " was stopped in this run (" + job.admin_comment + ")";
  }
  if (!SameRun(job, decision.restart_count)) {
    return "job " + job_id + " was requeued already or has left that run (state " + job.state +
           (job.completing ? "+COMPLETING" : "") + ", restart count " + std::to_string(job.restart_count) +
           ", decision for restart count " + std::to_string(decision.restart_count) + ")";
  }
  return "";
}

// What to set on the requeued (now pending) job: the failure note, the excluded nodes, the
// begin time of a delayed retry. Problems are warnings in `r`: the job is requeued.
SlurmJobUpdate FollowUp(SlurmActions& slurm, const std::string& job_id, const RequeueDecision& decision,
                        double now, GuardedRequeueResult* r) {
  auto after = slurm.LoadJob(job_id);
  SlurmJobUpdate u;
  u.job_id = job_id;
  u.admin_comment = "autopar: " + decision.reason + "; " + EncodeFailureNote(decision.note);
  if (after.ok()) {
    // The job's preemptions are kept across every requeue (core/failure/preemption.h).
    auto preempted = ParsePreemptionNote(after->admin_comment);
    if (decision.preemption) preempted = RecordPreemption(preempted, decision.restart_count);
    if (preempted) u.admin_comment = WithPreemptionNote(*u.admin_comment, *preempted);
  }
  if (!after.ok()) {
    r->warnings.push_back("job not re-read after the requeue: " + after.message());
    r->restart_count_now = decision.restart_count + 1;
    return u;
  }
  r->restart_count_now = after->restart_count;
  if (decision.min_tasks > 0 && after->tasks > decision.min_tasks) u.num_tasks = decision.min_tasks;
  if (!decision.exclude_nodes.empty()) {
    auto merged = MergedExcluded(*after, decision.exclude_nodes);
    if (merged.ok()) {
      u.excluded_nodes = *merged;
    } else {
      r->warnings.push_back("excluded nodes not updated: " + merged.message());
    }
  }
  double begin = std::floor(now + decision.delay_s);
  if (decision.delay_s > 0 && begin > after->eligible_time) u.begin_time = begin;
  return u;
}

// Applies `u`; when Slurm refuses it, each field on its own, so one refusal does not lose the
// others.
void ApplyFollowUp(SlurmActions& slurm, const SlurmJobUpdate& u, GuardedRequeueResult* r) {
  Status s = slurm.Update(u);
  if (s.ok()) return;
  r->warnings.push_back("update after requeue: " + s.message());
  for (int field = 0; field < 4; ++field) {
    SlurmJobUpdate one;
    one.job_id = u.job_id;
    if (field == 0) one.admin_comment = u.admin_comment;
    if (field == 1) one.excluded_nodes = u.excluded_nodes;
    if (field == 2) one.begin_time = u.begin_time;
    if (field == 3) one.num_tasks = u.num_tasks;
    if (!one.admin_comment && !one.excluded_nodes && !one.begin_time && !one.num_tasks) continue;
    if (Status s1 = slurm.Update(one); !s1.ok()) r->warnings.push_back(s1.message());
  }
}

}  // namespace

Result<GuardedRequeueResult> GuardedRequeue(SlurmActions& slurm, const std::string& job_id,
                                            const RequeueDecision& decision, double now,
                                            const std::string& lock_path) {
  if (decision.action != RequeueAction::kRequeue) {
    return Status::Error(std::string("requeue of job ") + job_id + ": the decision is '" +
                         RequeueActionName(decision.action) + "', not 'requeue'");
  }
  auto lock = FileLock::Acquire(lock_path);
  if (!lock.ok()) return Status::Error("requeue of job " + job_id + ": lock " + lock.message());

  GuardedRequeueResult r;
  auto job = slurm.LoadJob(job_id);
  if (!job.ok()) return Status::Error("requeue of job " + job_id + ": " + job.message());
  r.restart_count_now = job->restart_count;
  if (std::string done = AlreadyDone(*job, job_id, decision); !done.empty()) {
    r.outcome = RequeueOutcome::kAlreadyDone;
    r.message = done;
    return r;
  }
  if (!job->batch) {
    return Status::Error("requeue of job " + job_id + ": not a batch job (Slurm requeues only " +
                         "batch jobs; submit with sbatch)");
  }
  if (!job->requeue_allowed) {
    return Status::Error("requeue of job " + job_id + ": the job may not be requeued " +
                         "(submitted with --no-requeue, or JobRequeue=0)");
  }
  if (Status s = slurm.Requeue(job_id); !s.ok()) {
    // Lost a race with another node? Then the job has moved on.
    auto again = slurm.LoadJob(job_id);
    if (again.ok() && !SameRun(*again, decision.restart_count)) {
      r.outcome = RequeueOutcome::kAlreadyDone;
      r.restart_count_now = again->restart_count;
      r.message = "job " + job_id + " was requeued by another caller (" + s.message() + ")";
      return r;
    }
    return Status::Error("requeue of job " + job_id + " refused by Slurm: " + s.message());
  }
  r.outcome = RequeueOutcome::kRequeued;
  const SlurmJobUpdate u = FollowUp(slurm, job_id, decision, now, &r);
  ApplyFollowUp(slurm, u, &r);
  r.message = "job " + job_id + " requeued (attempt " + std::to_string(decision.attempt) + " of " +
              std::to_string(decision.max_restarts) + ", restart count now " +
              std::to_string(r.restart_count_now) + ")";
  if (u.excluded_nodes) r.message += ", excluded " + *u.excluded_nodes;
  return r;
}

Status AddExcludedNodes(SlurmActions& slurm, const std::string& job_id,
                        const std::vector<std::string>& nodes) {
  auto job = slurm.LoadJob(job_id);
  if (!job.ok()) return Status::Error("exclude nodes of job " + job_id + ": " + job.message());
  if (!job->pending()) {
    return Status::Error("exclude nodes of job " + job_id + ": the job is " + job->state +
                         "; Slurm changes the excluded nodes of pending jobs only");
  }
  auto merged = MergedExcluded(*job, nodes);
  if (!merged.ok()) return Status::Error("exclude nodes of job " + job_id + ": " + merged.message());
  SlurmJobUpdate u;
  u.job_id = job_id;
  u.excluded_nodes = *merged;
  if (Status s = slurm.Update(u); !s.ok()) {
    return Status::Error("exclude nodes of job " + job_id + ": " + s.message());
  }
  return Status::Ok();
}

Status CancelWithReason(SlurmActions& slurm, const std::string& job_id, const std::string& reason) {
  SlurmJobUpdate u;
  u.job_id = job_id;
  u.admin_comment = "autopar: " + reason;
  Status comment = slurm.Update(u);
  if (Status s = slurm.Cancel(job_id); !s.ok()) {
    return Status::Error("cancel of job " + job_id + ": " + s.message());
  }
  if (!comment.ok()) {
    return Status::Error("job " + job_id + " cancelled, but its reason was not recorded: " +
                         comment.message());
  }
  return Status::Ok();
}

std::string StopMarker(int64_t restart_count) {
  return "autopar-stopped restart=" + std::to_string(restart_count);
}

Result<bool> StopOnce(SlurmActions& slurm, const std::string& job_id, int64_t restart_count,
                      const std::string& reason, const std::string& lock_path) {
  auto lock = FileLock::Acquire(lock_path);
  if (!lock.ok()) return Status::Error("stop of job " + job_id + ": lock " + lock.message());
  auto job = slurm.LoadJob(job_id);
  if (!job.ok()) return Status::Error("stop of job " + job_id + ": " + job.message());
  const std::string marked = reason + "; " + StopMarker(restart_count);
  const std::string comment = "autopar: " + marked;
  if (job->restart_count != restart_count || job->pending() ||
      job->admin_comment.find(StopMarker(restart_count)) != std::string::npos) {
    return false;
  }
  if (job->running() || job->state == "SUSPENDED") {
    if (Status s = CancelWithReason(slurm, job_id, marked); !s.ok()) return s;
    return true;
  }
  // The run has ended (its batch script exited after the step failed): nothing to cancel.
  SlurmJobUpdate u;
  u.job_id = job_id;
  u.admin_comment = comment;
  if (Status s = slurm.Update(u); !s.ok()) {
    return Status::Error("job " + job_id + " ended " + job->state +
                         "; its reason was not recorded: " + s.message());
  }
  return true;
}

}  // namespace autopar
