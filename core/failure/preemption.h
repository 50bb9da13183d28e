// Preemption as Slurm records it, and what autopar remembers of it across a job's runs. Pure.
//
// A site preempts with PreemptType (partition_prio, qos) and PreemptMode=REQUEUE: slurmctld sends
// the job's steps SIGTERM, sets the job's preempt_time and moves its end time to
// preempt_time + GraceTime; a job still running at that end is requeued by Slurm. A SIGTERM alone
// says nothing (a scancel and a time limit send it too): a task's notice is taken as a
// preemption only when Slurm's record of the job has a preempt_time (PreemptionOf).
//
// A preemption never counts against --requeue-on-failure, whose budget is Slurm's restart count:
// the job's AdminComment keeps "autopar-preempted count=K last=R", the K runs preempted so far and
// the restart count R of the latest (RecordPreemption is idempotent per run, so every node and the
// requeue may record the same one). The failure budget is the restart count less the
// preemptions that restarted the job (FailureRestarts).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace autopar {

struct Preemption {
  bool preempted = false;
  double preempt_time = 0;  // seconds since the epoch
  double grace_s = 0;       // end_time - preempt_time, >= 0 (0: no grace)
};
// From a job's preempt_time and end_time as Slurm has them (0: unset).
Preemption PreemptionOf(double preempt_time, double end_time);

struct PreemptionNote {
  int64_t count = 0;          // runs of the job preempted so far
  int64_t last_restart = -1;  // the restart count of the latest (-1: none)
};
// "autopar-preempted count=2 last=5"
std::string EncodePreemptionNote(const PreemptionNote& note);
// Finds the note anywhere in `text` (an AdminComment); nullopt when absent or malformed.
std::optional<PreemptionNote> ParsePreemptionNote(std::string_view text);
// `comment` with `note` in place of the one it holds, or appended ("; " between).
std::string WithPreemptionNote(std::string_view comment, const PreemptionNote& note);
// `before` with run `restart_count`'s preemption counted once.
PreemptionNote RecordPreemption(const std::optional<PreemptionNote>& before, int64_t restart_count);
// The restarts of run `restart_count` that count against --requeue-on-failure: the restart count
// less the preemptions of earlier runs (the current run's own preemption restarted nothing yet).
int64_t FailureRestarts(int64_t restart_count, const std::optional<PreemptionNote>& note);

}  // namespace autopar
