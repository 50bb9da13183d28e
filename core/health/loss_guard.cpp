#include "core/health/loss_guard.h"

#include <cmath>
#include <cstdio>

#include "core/text.h"

namespace autopar {
namespace {

std::string Number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::string LossAnomaly::Describe() const {
  std::string s = "loss " + Number(loss) + " at step " + std::to_string(step);
  if (kind == "spike" && mean) {
    s += " is " + FormatFixed(loss / *mean, 1) + "x its recent mean " + Number(*mean) +
         " (--loss-spike=" + Number(factor) + ")";
  }
  return s;
}

EventFields LossAnomaly::Fields() const {
  EventFields f = {{"kind", kind}, {"loss", Number(loss)}};
  if (mean) f.emplace_back("mean", Number(*mean));
  if (kind == "spike") f.emplace_back("factor", Number(factor));
  return f;
}

const char* BadLossActionName(BadLossAction a) {
  switch (a) {
    case BadLossAction::kWarn: return "warn";
    case BadLossAction::kRollback: return "rollback";
    case BadLossAction::kStop: return "stop";
  }
  return "warn";
}

BadLossDecision DecideBadLoss(const BadLossPolicy& policy, const LossAnomaly& anomaly,
                              int64_t rollbacks_done, bool can_roll_back) {
  BadLossDecision d;
  d.action = policy.action;
  const std::string what = anomaly.Describe();
  switch (policy.action) {
    case BadLossAction::kWarn:
      d.reason = what + "; the run goes on (--on-bad-loss=warn)";
      return d;
    case BadLossAction::kStop:
      d.reason = what + "; the job is stopped (--on-bad-loss=stop)";
      return d;
    case BadLossAction::kRollback:
      break;
  }
  const std::string option = "--on-bad-loss=" + policy.ToString();
  d.action = BadLossAction::kStop;
  if (!can_roll_back) {
    d.reason = what + "; no rollback (" + option +
               " needs the program under autopar-launch, with in-place restarts and checkpoints): "
               "the job is stopped";
    return d;
  }
  if (rollbacks_done >= policy.rollbacks) {
    d.reason = what + "; all " + std::to_string(policy.rollbacks) + " rollbacks of " + option +
               " are used: the job is stopped";
    return d;
  }
  if (anomaly.last_good_step < 0) {
    d.reason = what + "; no loss of this run was good, so no checkpoint is known to be older than "
               "the bad one: the job is stopped";
    return d;
  }
  d.action = BadLossAction::kRollback;
  d.attempt = rollbacks_done + 1;
  d.resume_max_step = anomaly.last_good_step;
  d.reason = what + "; rollback " + std::to_string(d.attempt) + " of " +
             std::to_string(policy.rollbacks) + " to the last COMPLETE checkpoint at or before step " +
             std::to_string(anomaly.last_good_step) + " (the last good loss)";
  return d;
}

std::optional<LossAnomaly> LossGuard::Add(int64_t step, double loss) {
  LossAnomaly a;
  a.step = step;
  a.loss = loss;
  a.last_good_step = last_good_step_;
  if (std::isnan(loss)) {
    a.kind = "nan";
  } else if (std::isinf(loss)) {
    a.kind = "inf";
  } else if (settings_.spike_factor > 0 && good_ >= settings_.min_history && !recent_.empty()) {
    const double mean = sum_ / static_cast<double>(recent_.size());
    if (mean > 0 && loss > settings_.spike_factor * mean) {
      a.kind = "spike";
      a.mean = mean;
      a.factor = settings_.spike_factor;
    }
  }
  if (!a.kind.empty()) {
    const bool told = in_streak_;
    in_streak_ = true;
    if (told) return std::nullopt;
    return a;
  }
  in_streak_ = false;
  ++good_;
  last_good_step_ = step;
  recent_.push_back(loss);
  sum_ += loss;
  if (static_cast<int>(recent_.size()) > settings_.window) {
    sum_ -= recent_.front();
    recent_.pop_front();
  }
  return std::nullopt;
}

}  // namespace autopar
