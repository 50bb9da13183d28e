/* libautopar's checkpoint C API: the program's side of the contract with autopard (the C++ API
 * is autopar/proto_client.h: JobCkptEnvFrom + CommitStep + RankStepDir).
 *
 * Rank R writes its files of step N under autopar_ckpt_step_dir(N) =
 * $AUTOPAR_CKPT_DIR/step-<N>/rank-<R>/ and then calls autopar_ckpt_commit(N), which returns once
 * the node's autopard has recorded the commit durably (milliseconds); the upload runs in the
 * background. Every function returns 0 on success and -1 on failure with a NUL-terminated message
 * in `err` (truncated to errlen; `err` may be NULL). Thread-safe (no shared state). */
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
/* Tells autopard this rank reached `step` (progress for hang detection). */
int autopar_ckpt_heartbeat(long long step, char* err, size_t errlen);
/* The same; *checkpoint_requested (may be NULL) becomes 1 when autopard asks the program to
 * checkpoint now because the job's time limit is near (jobs with --requeue-on-failure), else 0.
 * The ranks must agree on one step (e.g. MPI_Allreduce(MAX) of the flag), commit it, and then wait
 * to be ended by the requeue instead of exiting (docs/checkpoints.md, "Time limits"). */
int autopar_ckpt_heartbeat_check(long long step, int* checkpoint_requested, char* err,
                                 size_t errlen);
/* The same with the step's progress (issue 13; docs/health.md): `samples` and `tokens` over the
 * whole job (the global batch; -1: not given) and its `loss` (pass NAN when not given and
 * `has_loss` = 0). Rank 0's become the job's measured step time, throughput and MFU. */
int autopar_ckpt_heartbeat_progress(long long step, long long samples, long long tokens,
                                    int has_loss, double loss, int* checkpoint_requested,
                                    char* err, size_t errlen);
/* The step restored before the program started (AUTOPAR_RESUME_STEP), or -1 for a fresh start. */
long long autopar_ckpt_resume_step(void);

#ifdef __cplusplus
}
#endif
#endif /* AUTOPAR_CKPT_C_H_ */
