#include "core/failure/recovery_policy.h"

namespace autopar {

const char* RecoveryActionName(RecoveryAction a) {
  return a == RecoveryAction::kRestartInPlace ? "restart-in-place" : "requeue-path";
}

RecoveryDecision DecideRecovery(const RequeueSettings& settings, const Failure& failure,
                                int64_t restart_count, int64_t generation, int64_t budget,
                                const std::optional<PastFailure>& previous,
                                const NodeLoss& loss) {
  RecoveryDecision d;
  d.generation = generation;
  d.budget = budget;
  const std::string what = failure.Describe();
  const bool node_loss = failure.kind == FailureClass::kNodeLoss;
  const bool replaced = node_loss && loss.lost > 0 && loss.spares >= loss.lost;
  if (node_loss && !replaced) {
    std::string spares = loss.spares > 0 ? "; " + std::to_string(loss.spares) +
                                               " spare node(s) left for " +
                                               std::to_string(loss.lost) + " lost"
                                         : std::string("; no spare node in the allocation");
    const std::string floor = "--min-nodes=" + std::to_string(loss.min_nodes);
    if (loss.lost <= 0 || loss.min_nodes <= 0) {
      d.reason = what + spares + ": the requeue path takes over";
      return d;
    }
    if (loss.remaining < loss.min_nodes) {
      d.reason = what + spares + "; " + std::to_string(loss.remaining) + " node(s) left, " +
                 floor + ": the requeue path takes over";
      return d;
    }
    if (!loss.plan_refusal.empty()) {
      d.reason = what + spares + "; no plan on the " + std::to_string(loss.remaining) +
                 " node(s) left (" + loss.plan_refusal + "): the requeue path takes over";
      return d;
    }
    d.shrink = true;
  }
  if (failure.kind == FailureClass::kTimeLimit) {
    d.reason = what + "; the requeue path takes over";
    return d;
  }
  if (budget <= 0) {
    d.reason = what + "; in-place restarts are off (--restarts-in-place=0)";
    return d;
  }
  if (generation >= budget) {
    d.reason = what + "; all " + std::to_string(budget) + " in-place restarts of " +
               "--restarts-in-place=" + std::to_string(budget) +
               " are used: the requeue path takes over";
    return d;
  }
  // A lost node says nothing about the program: never an early repeat.
  const bool early = !node_loss && !failure.made_progress && failure.run_seconds >= 0 &&
                     failure.run_seconds < settings.early_failure_s;
  int repeats = 0;
  if (early) {
    repeats = 1;
    if (previous && previous->early_repeats > 0 && previous->signature == failure.Signature() &&
        previous->restart_count == generation - 1) {
      repeats = previous->early_repeats + 1;
    }
    if (repeats >= settings.early_repeats_to_stop) {
      // RequeuePolicy sees the repeats as if the previous run had been requeued.
      d.history = PastFailure{restart_count - 1, failure.Signature(), repeats - 1};
      d.reason = what + "; the program failed at its start the same way " +
                 std::to_string(repeats) + " times in a row: the requeue path decides";
      return d;
    }
  }
  d.action = RecoveryAction::kRestartInPlace;
  d.attempt = generation + 1;
  d.history = PastFailure{generation, failure.Signature(), repeats};
  std::string where;
  if (replaced) {
    where = " on " + std::to_string(loss.lost) + " of " + std::to_string(loss.spares) +
            " spare node(s)";
  } else if (d.shrink) {
    where = " on the " + std::to_string(loss.remaining) + " node(s) left (--min-nodes=" +
            std::to_string(loss.min_nodes) + ")";
  }
  d.reason = what + "; in-place restart " + std::to_string(d.attempt) + " of " +
             std::to_string(budget) + where;
  return d;
}

}  // namespace autopar
