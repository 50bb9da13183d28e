// When to ask a job's program to checkpoint before its time limit, so that the checkpoint is
// COMPLETE before Slurm ends the job and the requeued run loses no work. No `--signal`
// is needed: autopard reads the job's end time from Slurm and computes the moment itself.
//
// The formula (all in seconds):
//   ckpt_estimate = max(observed commit -> COMPLETE durations of the job's last
//                       `window` checkpoints), or `default_ckpt_s` before any was observed
//   margin        = step_s + safety_factor * ckpt_estimate + requeue_s
//   request_at    = end_time - margin
// where step_s is the observed training step time (the program finishes the step it is in before
// it can write), safety_factor (1.5) covers a slower checkpoint than the slowest seen, and
// requeue_s (15) covers the request's delivery, the requeue RPC and Slurm's KillWait ordering. The
// margin is at least `min_margin_s`, and never more than `max_fraction` of the job's whole run time
// (a tiny time limit with a huge checkpoint would otherwise ask for a checkpoint at the start).
//
// Times: the caller passes `now` (seconds since the epoch, or any clock the end time is on);
// nothing here reads a clock, so tests inject time. Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace autopar {

struct TimeLimitSettings {
  double default_ckpt_s = 60;   // estimate before any checkpoint duration was observed
  double safety_factor = 1.5;
  double requeue_s = 15;
  double min_margin_s = 20;
  double max_fraction = 0.5;    // of (end_time - start_time)
  size_t window = 5;            // how many recent checkpoint durations count
};

struct TimeLimitInputs {
  double start_time = 0;   // when this run started
  double end_time = 0;     // Slurm's end time of the job (0: no time limit)
  double step_s = 0;       // observed seconds per training step (0: unknown)
  std::vector<double> ckpt_durations_s;  // commit -> COMPLETE, oldest first
};

struct TimeLimitPlan {
  bool limited = false;    // false: the job has no end time; nothing to do
  double ckpt_estimate_s = 0;
  double margin_s = 0;
  double request_at = 0;   // when to ask for the checkpoint (same clock as end_time)
  // "checkpoint estimate 40.0 s, margin 77.0 s: checkpoint requested at 2026-11-30 12:00:03.000"
  // (UTC; request_at taken as seconds since the epoch)
  std::string Describe() const;
};

TimeLimitPlan PlanTimeLimit(const TimeLimitSettings& settings, const TimeLimitInputs& in);

// True when the checkpoint should be requested now (now >= request_at) and the job is limited.
bool CheckpointDue(const TimeLimitPlan& plan, double now);

}  // namespace autopar
