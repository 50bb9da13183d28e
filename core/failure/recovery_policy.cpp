#include "core/failure/recovery_policy.h"

namespace autopar {

const char* RecoveryActionName(RecoveryAction a) {
  return a == RecoveryAction::kRestartInPlace ? "restart-in-place" : "requeue-path";
}

RecoveryDecision DecideRecovery(const RequeueSettings& settings, const Failure& failure,
                                int64_t restart_count, int64_t generation, int64_t budget,
                                const std::optional<PastFailure>& previous,
                                const SpareNodes& spares) {
  RecoveryDecision d;
  d.generation = generation;
  d.budget = budget;
  const std::string what = failure.Describe();
  const bool node_loss = failure.kind == FailureClass::kNodeLoss;
  if (node_loss && (spares.lost <= 0 || spares.available < spares.lost)) {
    d.reason = what + (spares.available > 0
                           ? "; " + std::to_string(spares.available) + " spare node(s) left for " +
                                 std::to_string(spares.lost) + " lost"
                           : std::string("; no spare node in the allocation")) +
               ": the requeue path takes over";
    return d;
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
  d.reason = what + "; in-place restart " + std::to_string(d.attempt) + " of " +
             std::to_string(budget) +
             (node_loss ? " on " + std::to_string(spares.lost) + " of " +
                              std::to_string(spares.available) + " spare node(s)"
                        : std::string());
  return d;
}

}  // namespace autopar
