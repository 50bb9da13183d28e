// What autopar-launch tells its node's autopard for the job's timeline:
// `event` requests with the kinds and fields of timeline.h.
//
//   rank_exit     exit=N [signal=S] run_s=SECONDS [generation=G]
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
//                 optimizer_sharding= mem_gib= step_s=) or plan=none; rank 0 of the job's first
//                 step (SLURM_STEP_ID 0 of run 0). autopard stamps it with the job's submit time.
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

// `generation` >= 0: the job restarts in place (see rank_exit above); -1: it does not. `oom`:
// the program ran out of memory, this says how (core/failure/oom.h; field oom=).
std::optional<Request> RankExitRequest(const GetEnv& getenv, int rank, const std::string& node,
                                       int exit_status, double run_s, int64_t generation = -1,
                                       const std::string& oom = "");
Status ReportRankExit(const GetEnv& getenv, int rank, const std::string& node, int exit_status,
                      double run_s, int timeout_ms = 3000, int64_t generation = -1,
                      const std::string& oom = "");

// The signal autopard sends to a rank's autopar-launch (sigqueue, value = the generation) when
// that rank's program hung in a job that restarts in place: the launcher then stops its program
// and starts the in-place restart as for a crash. SIGRTMIN + 3; autopar-launch blocks it.
int HungProgramSignal();
// The signal autopard sends to rank 0's autopar-launch (sigqueue, value = the generation) when the
// program's loss went bad and the job rolls back (--on-bad-loss=rollback, docs/health.md): the
// launcher stops its program and starts an in-place restart as for a crash, class bad-loss.
// SIGRTMIN + 4; autopar-launch blocks it.
int BadLossSignal();

// rank 0's `recover` request (protocol.h) for a failed generation; nullopt without AUTOPAR_SOCKET
// or SLURM_JOB_ID. `failure`: class exit signal run_s progress generation node history (the
// previous decision's, when there is one).
std::optional<Request> RecoverRequest(const GetEnv& getenv, int rank, const EventFields& failure);
// Sends it and waits for the decision (autopard carries out a requeue before it answers).
Result<RecoverReply> AskRecovery(const GetEnv& getenv, int rank, const EventFields& failure,
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
