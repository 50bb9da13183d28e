// Plan against reality (docs/health.md): rank 0's heartbeats, with the step's samples,
// tokens and loss when the program sends them, become the job's measured step time, throughput
// and MFU, compared with what the plan predicted, at a bounded rate ("progress" events).
//
// Measured MFU needs no FLOP count of its own: the plan predicted `mfu` for `step_s` seconds per
// step of `global_batch` sequences of `seq_len` tokens, so a step of the same work that takes
// step_time has MFU = mfu * step_s / step_time (scaled by the work actually reported, when the
// heartbeats carry tokens or samples). Pure and thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/failure/timeline.h"

namespace autopar {

// What the job's plan predicted (AUTOPAR_PLAN_JSON).
struct PlanTarget {
  double step_s = 0;  // predicted seconds per step
  double mfu = 0;     // predicted model FLOPs utilization
  int64_t global_batch = 0;
  int64_t seq_len = 0;
  double mem_gib = 0;  // predicted memory per GPU
};
// The plan's prediction, or nullopt when the JSON is not a readable plan.
std::optional<PlanTarget> PlanTargetFromJson(const std::string& plan_json);

struct ProgressSample {
  double time = 0;  // seconds since the epoch
  int64_t step = 0;
  int64_t samples = -1;  // the step's over the job; -1: not given
  int64_t tokens = -1;
  std::optional<double> loss;
};

// One job's rank-0 progress. Add() returns the fields of a "progress" event when one is due: at
// most one per `interval_s`, over the steps since the last one (steps, step_s, samples_per_s,
// tokens_per_s, loss (mean) and loss_last when given, planned_step_s, planned_mfu, mfu,
// vs_plan = step_s / planned_step_s when there is a plan; instead of an MFU above 100%, which
// means the program does not train the planned model, a note says so). A step that goes back (a restart
// resumed an earlier checkpoint) starts a new window; nothing is measured across it.
class ProgressTracker {
 public:
  explicit ProgressTracker(double interval_s) : interval_s_(interval_s) {}
  std::optional<EventFields> Add(const ProgressSample& sample, const std::optional<PlanTarget>& plan);

 private:
  void Restart(const ProgressSample& s);
  double interval_s_;
  bool started_ = false;
  ProgressSample first_;  // the window's first heartbeat (its step is done when it starts)
  ProgressSample last_;
  int64_t samples_ = 0, tokens_ = 0;  // over the window's later heartbeats
  bool have_samples_ = false, have_tokens_ = false;
  double loss_sum_ = 0;
  int64_t loss_n_ = 0;
  std::optional<double> loss_last_;
};

}  // namespace autopar
