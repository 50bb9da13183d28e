// What autopar-launch tells its node's autopard for the job's timeline:
// `event` requests with the kinds and fields of timeline.h.
//
//   rank_exit     exit=N [signal=S] run_s=SECONDS [generation=G] [oom=HOW] (RankExit)
//                 any rank whose program ends with a non-zero status on its own (a crashed
//                 rank); autopard's FailureHandler turns it into a requeue decision, except with
//                 generation=G (the job restarts in place): then it is journalled only
//                 and rank 0's `recover` request decides. The exit status follows the shell's
//                 convention: 128+S for a program killed by signal S, which is then also given as
//                 signal=S.
//   restarted     generation= culprit_rank= since_failure_s= stop_s= decide_s= rendezvous_s= port=
//                 rank 0, when the launchers restart the program in place (generation G >= 1):
//                 since the failure was detected; the stop fence (every program ended), autopard's
//                 decision, and the rendezvous fence (new MASTER_PORT and resume step)
//   restored      step= bytes_local= bytes_fetched= restore_s= generation=
//                 every rank that restored a checkpoint for an in-place restart
//   submitted     the plan (model= gpus= tp= pp= dp= micro_batch= grad_accum= recompute=
//                 optimizer_sharding= grad_sharding= grad_reduce= mem_gib= step_s=) or plan=none;
//                 rank 0 of the job's first step (SLURM_STEP_ID 0 of run 0). autopard stamps
//                 it with the job's submit time.
//   step_started  step= nodes= ranks= restart=        rank 0, before the rendezvous
//   rendezvous    duration_s= ranks=                  rank 0, launcher start to rendezvous done
//   resumed       (step N) from_job=                  rank 0, when a checkpoint was restored
//   finished      exit=0 run_s=SECONDS                rank 0, when its program ended successfully
//
// Builders are pure (the task's variables through GetEnv); Send* talk to the socket. Reentrant.
#pragma once

#include <optional>
#include <string>

#include "core/proto/proto_client.h"
#include "core/proto/protocol.h"
#include "autopar/status.h"
#include "core/failure/timeline.h"

namespace autopar {

// An event of the task's job, or nullopt when the task has no AUTOPAR_SOCKET or SLURM_JOB_ID
// (autopar is not in use, so there is nobody to tell). `step` -1: none.
std::optional<Request> JobEventRequest(const GetEnv& getenv, const std::string& kind, int rank,
                                       int64_t step, const std::string& node,
                                       const EventFields& fields);
// Sends it (at most `timeout_ms`); OK when `request` is nullopt. Errors name the socket.
Status SendJobEvent(const GetEnv& getenv, const std::optional<Request>& request, int timeout_ms);

// A rank's end as its launcher reports it: formatted once (Fields) by the launcher and parsed
// once (Parse) by autopard, the same type at both ends of the socket.
struct RankExit {
  int exit_status = 0;      // the shell's convention: 128+S for a program killed by signal S
  double run_s = -1;        // how long the program ran (-1: unknown)
  int64_t generation = -1;  // >= 0: the job restarts in place (see rank_exit above)
  std::string oom;          // the program ran out of memory, this says how (core/failure/oom.h)

  int Signal() const;  // S of 128+S, 0 for an exit of the program's own
  bool Clean() const { return exit_status == 0; }
  EventFields Fields() const;  // exit [signal] run_s [generation] [oom]
  // Refuses a missing or out-of-range exit status, a signal= that is not the status's, and
  // malformed numbers, naming the field.
  static Result<RankExit> Parse(const EventFields& fields);
};

std::optional<Request> RankExitRequest(const GetEnv& getenv, int rank, const std::string& node,
                                       const RankExit& exit);
Status ReportRankExit(const GetEnv& getenv, int rank, const std::string& node,
                      const RankExit& exit, int timeout_ms = 3000);

// The signal autopard sends to a rank's autopar-launch (sigqueue, value = the generation) when
// that rank's program hung in a job that restarts in place: the launcher then stops its program
// and starts the in-place restart as for a crash. SIGRTMIN + 3; autopar-launch blocks it.
int HungProgramSignal();
// The signal autopard sends to rank 0's autopar-launch (sigqueue, value = the generation) when the
// program's loss went bad and the job rolls back (--on-bad-loss=rollback, docs/health.md): the
// launcher stops its program and starts an in-place restart as for a crash, class bad-loss.
// SIGRTMIN + 4; autopar-launch blocks it.
int BadLossSignal();

// What a launcher asks its node's autopard about a failed generation of a job that restarts in
// place (the `recover` request's detail): built once by the launcher (Fields), parsed once by
// autopard (Parse). Everything in it is the launcher's claim, which autopard checks (a lost node
// against Slurm, the sender against the job) before it acts.
struct RecoverDetail {
  std::string kind = "rank-crash";  // FailureClassName of the generation's first failure
  int64_t generation = 0;
  int exit_status = -1;             // the shell's convention (128+S: signal S); -1: none
  double run_s = -1;                // how long the failed program ran
  std::string node;                 // where it failed ("": the asking node)
  double detected = 0;              // when the launcher saw it (seconds since the epoch; 0: unknown)
  std::string error;                // oom: what ran out
  std::string lost;                 // node-loss: the hosts whose launchers are gone, comma-separated
  int64_t spares = 0;               // node-loss: the spare nodes alive
  int64_t remaining = 0;            // elastic (--min-nodes): the nodes left, and the floor
  int64_t min_nodes = 0;
  std::string plan_refusal;         // elastic: why the nodes left have no plan
  std::string history;              // autopard's note about the previous failure (EncodeFailureNote)
  std::string unreachable;          // the ranks the launcher's stop notice could not reach

  int Signal() const;  // S of 128+S, else 0
  EventFields Fields() const;
  // Refuses an unknown class, a missing or negative generation, malformed numbers, and a
  // node-loss without lost=, naming the field.
  static Result<RecoverDetail> Parse(const EventFields& fields);
};

// rank 0's `recover` request (protocol.h) for a failed generation; nullopt without AUTOPAR_SOCKET
// or SLURM_JOB_ID.
std::optional<Request> RecoverRequest(const GetEnv& getenv, int rank, const RecoverDetail& detail);
// Sends it and waits for the decision (autopard carries out a requeue before it answers).
Result<RecoverReply> AskRecovery(const GetEnv& getenv, int rank, const RecoverDetail& detail,
                                 int timeout_ms);

// True for the first step of the job's first run: SLURM_STEP_ID 0 (or unset: not in a step) and
// SLURM_RESTART_COUNT 0 or unset.
bool FirstStepOfJob(const GetEnv& getenv);
// submitted's fields from AUTOPAR_PLAN_JSON (plan=none without one; plan_error=... when it does
// not parse).
EventFields SubmittedFields(const GetEnv& getenv);
// step_started's fields from SLURM_STEP_ID, SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST),
// SLURM_STEP_NUM_TASKS (else SLURM_NTASKS) and SLURM_RESTART_COUNT (0 when unset).
EventFields StepStartedFields(const GetEnv& getenv);

}  // namespace autopar
