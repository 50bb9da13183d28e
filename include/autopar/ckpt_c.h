/* libautopar's checkpoint C API: the program's side of the contract with autopard (the C++ API
 * is autopar/proto_client.h: JobCkptEnvFrom + CommitStep + RankStepDir).
 *
 * Rank R writes its files of step N under autopar_ckpt_step_dir(N) =
 * $AUTOPAR_CKPT_DIR/step-<N>/rank-<R>/ and then calls autopar_ckpt_commit(N), which returns once
 * the node's autopard has recorded the commit durably (milliseconds); the upload runs in the
 * background. Every function returns 0 on success and -1 on failure with a NUL-terminated message
 * in `err` (truncated to errlen; `err` may be NULL). Thread-safe.
 *
 * Heartbeats do not wait for autopard (they cost the program microseconds, not a round
 * trip): autopar_ckpt_heartbeat, _check and _progress hand the heartbeat to one background thread
 * per process (a std::thread started by the first heartbeat) and return at once. That thread sends
 * the latest heartbeat (while heartbeats keep coming it looks for one every 20 ms, so a call need
 * not even wake it): a program that calls faster than that skips the heartbeats in between (hang
 * detection and progress count the steps between those that arrive; a NaN or infinite loss of a
 * skipped one goes with the next). What a call reports comes from the replies received before it:
 * *checkpoint_requested one heartbeat late, and -1 with the message "heartbeat of step N: ..."
 * when a background send failed since the previous call (each failure once; the call's own
 * heartbeat is still sent). The task's variables (SLURM_JOB_ID, RANK, AUTOPAR_SOCKET, ...) are read
 * by a process's first heartbeat (-1 when they are missing). At exit (atexit) the pending
 * heartbeat is sent within 1 s and the thread stops; a forked child that sends heartbeats gets a
 * thread of its own (pthread_atfork). autopar_ckpt_heartbeat_sync is the synchronous heartbeat. */
#ifndef AUTOPAR_CKPT_C_H_
#define AUTOPAR_CKPT_C_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes this rank's directory for `step` into buf (creating nothing). */
int autopar_ckpt_step_dir(long long step, char* buf, size_t len, char* err, size_t errlen);
/* Commits this rank's files of `step`. */
int autopar_ckpt_commit(long long step, char* err, size_t errlen);
/* Tells autopard this rank reached `step` (progress for hang detection), in the background. */
int autopar_ckpt_heartbeat(long long step, char* err, size_t errlen);
/* The same; *checkpoint_requested (may be NULL) becomes 1 when autopard asked the program to
 * checkpoint now because the job's time limit is near (jobs with --requeue-on-failure), else 0:
 * from the replies so far, so it may lag one heartbeat. The ranks must agree on one step (e.g.
 * MPI_Allreduce(MAX) of the flag), commit it, and then wait to be ended by the requeue instead of
 * exiting (docs/checkpoints.md, "Time limits"). */
int autopar_ckpt_heartbeat_check(long long step, int* checkpoint_requested, char* err,
                                 size_t errlen);
/* The same with the step's progress (docs/health.md): `samples` and `tokens` over the
 * whole job (the global batch; -1: not given) and its `loss` (pass NAN when not given and
 * `has_loss` = 0). Rank 0's become the job's measured step time, throughput and MFU. */
int autopar_ckpt_heartbeat_progress(long long step, long long samples, long long tokens,
                                    int has_loss, double loss, int* checkpoint_requested,
                                    char* err, size_t errlen);
/* autopar_ckpt_heartbeat_progress synchronously, for a caller that needs the fresh reply: reads
 * the task's variables, waits for the background send in flight, sends this heartbeat (in place
 * of a pending one) and returns its reply's flag; -1 when this send fails. */
int autopar_ckpt_heartbeat_sync(long long step, long long samples, long long tokens, int has_loss,
                                double loss, int* checkpoint_requested, char* err, size_t errlen);
/* Waits until the heartbeats handed to the background thread so far are sent (or failed); -1
 * when `timeout_ms` passed first. E.g. before _exit() or exec. */
int autopar_ckpt_heartbeat_flush(int timeout_ms, char* err, size_t errlen);
/* The step restored before the program started (AUTOPAR_RESUME_STEP), or -1 for a fresh start. */
long long autopar_ckpt_resume_step(void);

#ifdef __cplusplus
}
#endif
#endif /* AUTOPAR_CKPT_C_H_ */
