// Bad losses (docs/health.md): rank 0's reported loss, heartbeat by heartbeat, checked
// for what a training run must not go on with: a NaN or infinite loss, or (with a spike factor) a
// loss above `spike_factor` times the mean of the recent ones. autopard acts on what it finds
// (--on-bad-loss: warn, rollback, stop). Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "core/failure/timeline.h"
#include "core/options.h"

namespace autopar {

struct LossGuardSettings {
  double spike_factor = 0;  // 0: spikes are not looked for (NaN/Inf always are)
  int window = 20;          // the recent losses a spike is measured against
  int min_history = 10;     // no spike is told before this many good losses of the run
};

struct LossAnomaly {
  std::string kind;  // "nan", "inf", "spike"
  int64_t step = -1;
  double loss = 0;
  std::optional<double> mean;  // spike: the recent mean it was measured against
  double factor = 0;           // spike: the threshold factor
  // The step of this run's last good loss (-1: none yet): the program may send its loss every
  // few steps only, and every step after this one may already be bad.
  int64_t last_good_step = -1;
  // "loss nan at step 35", "loss 9.1 at step 35 is 4.6x its recent mean 1.98 (--loss-spike=3)".
  std::string Describe() const;
  EventFields Fields() const;  // kind loss [mean factor]
};

// One run's losses (a restart starts a new guard). Add() returns an anomaly for the first bad
// loss of a streak only: a run whose loss stays NaN is told once, and again only after a good
// loss in between. Bad losses never enter the recent mean.
class LossGuard {
 public:
  explicit LossGuard(LossGuardSettings settings) : settings_(settings) {}
  std::optional<LossAnomaly> Add(int64_t step, double loss);

 private:
  LossGuardSettings settings_;
  std::deque<double> recent_;
  double sum_ = 0;
  int64_t good_ = 0;  // good losses seen in this run
  int64_t last_good_step_ = -1;
  bool in_streak_ = false;
};

// What autopard does about a bad loss (--on-bad-loss). `rollbacks_done`: the job's rollbacks so
// far; `can_roll_back`: the program runs under autopar-launch with in-place restarts and the job
// checkpoints. A rollback resumes no later than the step of the run's last good loss; one whose
// budget is spent, that cannot be carried out, or whose run never had a good loss (its restored
// checkpoint is bad itself) stops the job: the user asked not to train on with a bad loss.
struct BadLossDecision {
  BadLossAction action = BadLossAction::kWarn;
  int64_t resume_max_step = -1;  // kRollback: the latest step the next generation may resume
  int64_t attempt = 0;           // kRollback: n of "rollback n of N"
  std::string reason;            // one line for the journal (and the job's AdminComment on a stop)
};
BadLossDecision DecideBadLoss(const BadLossPolicy& policy, const LossAnomaly& anomaly,
                              int64_t rollbacks_done, bool can_roll_back);
const char* BadLossActionName(BadLossAction a);  // "warn", "rollback", "stop"

}  // namespace autopar
