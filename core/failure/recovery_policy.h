// RecoveryPolicy: where a failure of a job goes first: restarted in place, inside the
// running allocation (every rank's program stopped and started again with a new rendezvous and
// the latest COMPLETE checkpoint), or handed to the requeue path (RequeuePolicy). Pure, no Slurm
// calls: autopard feeds it one Failure, the job's in-place generation and budget, and the previous
// in-place failure of this run of the job; the launchers carry a restart out.
//
// The rules, in order:
//  1. A crashed rank or a hang restarts in place; so does a lost node when spare nodes in the
//     allocation can take the place of every node lost (--spare-nodes), or else when the run is
//     elastic (--min-nodes=M) and at least M nodes in use remain, with a plan for them: it then
//     goes on without the lost nodes (`shrink`). Any other lost node and a time limit go to the
//     requeue path.
//  2. Budget. Generation g (0 for the program's first start in this run of the job) may restart
//     in place while g < N, N = --restarts-in-place (0: never; the site caps N at
//     max_restarts_in_place). In-place restarts do not count against --requeue-on-failure.
//  3. No loops. An early failure (within early_failure_s of the generation's start, before any
//     training progress) with the same signature as the previous generation's early failure goes to
//     the requeue path with that history (`history`), so that RequeuePolicy's rule 3 stops the job
//     instead of requeueing it: a program that exits 1 at start is restarted in place once, then
//     stopped ("exit within the first seconds, twice"), as fast as that can be told.
//
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/failure/requeue_policy.h"

namespace autopar {

enum class RecoveryAction {
  kRestartInPlace,  // stop every rank's program, rendezvous again, restore, start
  kRequeuePath,     // RequeuePolicy decides (requeue or stop)
};
const char* RecoveryActionName(RecoveryAction a);  // "restart-in-place", "requeue-path"

struct RecoveryDecision {
  RecoveryAction action = RecoveryAction::kRequeuePath;
  int64_t generation = 0;  // the generation that failed
  int64_t attempt = 0;     // kRestartInPlace: n of "in-place restart n of N" (generation + 1)
  int64_t budget = 0;      // N
  // kRestartInPlace: what the next generation's decision needs to know of this failure.
  // kRequeuePath after an early repeat: the history RequeuePolicy must see (rule 3); else unset.
  std::optional<PastFailure> history;
  bool shrink = false;     // kRestartInPlace of a lost node: on the nodes left, no spare
  std::string reason;      // one line for the journal
};

// A node loss as rank 0's launcher sees it: how many nodes in use were lost, how many spares are
// held in reserve and alive, how many nodes in use are left, the elastic floor (--min-nodes; 0
// when the run is not elastic), and why the nodes left cannot be planned for (empty: they can).
struct NodeLoss {
  int64_t lost = 0;
  int64_t spares = 0;
  int64_t remaining = 0;
  int64_t min_nodes = 0;
  std::string plan_refusal;
};

// `previous`: the previous generation's failure as recorded in its decision's `history`
// (restart_count there holds the generation). `restart_count`: the job's (Slurm's) restart count,
// for the history handed to the requeue path. `settings`: early_failure_s and
// early_repeats_to_stop are used.
RecoveryDecision DecideRecovery(const RequeueSettings& settings, const Failure& failure,
                                int64_t restart_count, int64_t generation, int64_t budget,
                                const std::optional<PastFailure>& previous,
                                const NodeLoss& loss = {});

}  // namespace autopar
