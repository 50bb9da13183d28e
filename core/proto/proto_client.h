// The client side of the autopard protocol (protocol.h): one call over the node's Unix socket,
// and the job-level helpers that the launcher, the CLI and libautopar use (they read the job's
// AUTOPAR_* / Slurm variables through an injected getenv).
//
// Every call has a deadline: connecting, sending and reading the reply together take at most
// `timeout_ms`; a daemon that does not answer in time is an error "autopard (<socket>): no reply
// within N ms", never a hang. Errors name the socket and the reason.
//
// Thread safety: every function is reentrant (one connection per call).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <functional>
#include <string>
#include <vector>

#include "core/proto/protocol.h"
#include "autopar/status.h"

namespace autopar {

inline constexpr int kDefaultDaemonTimeoutMs = 10000;

using GetEnv = std::function<const char*(const char*)>;

// How long a call keeps trying while the node's autopard restarts (an upgrade, a crash that
// systemd restarts within RestartSec): AUTOPAR_DAEMON_RETRY_S seconds, default 30, 0 for a single
// attempt. A malformed value keeps the default.
inline constexpr int kDefaultDaemonRetryMs = 30000;
int DaemonRetryMs(const GetEnv& getenv = [](const char* name) { return std::getenv(name); });

// Connects to `socket_path`, sends `request`, reads one reply line. The Result is an error when
// the daemon cannot be reached or answers malformed JSON; a daemon's refusal is a Reply whose
// status is the error. While the daemon is not there (its socket missing or refusing) the call
// is tried again, after 0.1 s doubling up to 1 s, for up to `retry_ms`; so is one whose
// connection closed before the reply, for requests safe to repeat (commit, restore, queries,
// heartbeats). A slow daemon is not tried again: `timeout_ms` bounds each attempt.
Result<Reply> CallDaemon(const std::string& socket_path, const Request& request,
                         int timeout_ms = kDefaultDaemonTimeoutMs, int retry_ms = DaemonRetryMs());

// Like CallDaemon, but a refusal is also an error (the daemon's message).
Result<Reply> CallDaemonOk(const std::string& socket_path, const Request& request,
                           int timeout_ms = kDefaultDaemonTimeoutMs, int retry_ms = DaemonRetryMs());

// The checkpoint settings of the job the calling task belongs to, from its environment.
struct JobCkptEnv {
  std::string socket;      // AUTOPAR_SOCKET
  std::string job_id;      // SLURM_JOB_ID
  std::string ckpt_dir;    // AUTOPAR_CKPT_DIR
  std::string upload;      // AUTOPAR_CKPT_UPLOAD (may be empty: local-only checkpoints)
  int64_t keep = 0;        // AUTOPAR_CKPT_KEEP
  int rank = 0;            // RANK, else SLURM_PROCID
  int world_size = 1;      // WORLD_SIZE, else SLURM_NTASKS
  int local_world_size = 1;  // LOCAL_WORLD_SIZE, else SLURM_NTASKS_PER_NODE-ish, else 1
  std::string node;        // SLURMD_NODENAME
  bool elastic = false;    // AUTOPAR_MIN_NODES set: restores accept another world size (reshard)
};
// Errors name the missing variable: "AUTOPAR_CKPT_DIR is not set: submit the job with
// --ckpt-dir or --ckpt-upload".
Result<JobCkptEnv> JobCkptEnvFrom(const GetEnv& getenv);
// The same without requiring a checkpoint directory (heartbeats need only the task's identity:
// SLURM_JOB_ID, AUTOPAR_SOCKET, the rank).
Result<JobCkptEnv> JobTaskEnvFrom(const GetEnv& getenv);

// Tells the node's autopard that the calling rank reached `step` (hang detection). Returns the
// reply's checkpoint_requested: true when the program is asked to checkpoint now because the
// job's time limit is near. `short_lived`: the calling process exits right after (the
// `autopar heartbeat` command); the rank is then alive as long as its Slurm task (protocol.h).
// `progress` (optional): the step's samples and tokens over the job and its loss.
struct StepProgress {
  int64_t samples = -1;  // -1: not given
  int64_t tokens = -1;
  std::optional<double> loss;
};
Result<bool> SendHeartbeat(const JobCkptEnv& job, int64_t step, bool short_lived = false,
                           int timeout_ms = 5000, const StepProgress& progress = {});

// Commits `step` for the calling rank (the files under <ckpt_dir>/step-<step>/rank-<rank>/).
Result<CommitReply> CommitStep(const JobCkptEnv& job, int64_t step,
                               int timeout_ms = kDefaultDaemonTimeoutMs);

// The directory where `rank` writes (and finds, after a restore) its files of `step`.
std::string RankStepDir(const std::string& ckpt_dir, int64_t step, int rank);

// Asks the node's autopard to restore the latest complete step (<= max_step when >= 0) for the
// calling rank before the program starts. Restores can take long (large checkpoints): the
// timeout is generous by default.
Result<RestoreReply> RequestRestore(const JobCkptEnv& job, int64_t max_step = -1,
                                    int timeout_ms = 3600 * 1000);
// The same request with "probe": the step a restore would pick (<= max_step when >= 0), nothing
// fetched; the reply's dir is empty. It reads the storage's listing and manifests only.
Result<RestoreReply> ProbeRestore(const JobCkptEnv& job, int64_t max_step = -1,
                                  int timeout_ms = 600 * 1000);

// What the launcher does before the program starts when the job checkpoints (AUTOPAR_CKPT_DIR
// and AUTOPAR_SOCKET set), in two halves around its PMIx rendezvous, so that every rank resumes
// the same step even when a step turns COMPLETE while the ranks start, and so that the ranks
// download their files in parallel:
//  1. DecideResume, on rank 0 only, before it publishes the rendezvous: asks its node's autopard
//     to probe for the latest complete step (no file fetched); that step (-1: a fresh start) is
//     the job's decision, published together with MASTER_ADDR/PORT (one Put/Commit, no
//     collective of its own). An unreachable autopard is a warning and a fresh start for the
//     whole job.
//  2. RestoreDecided, on every rank (rank 0 included) after the rendezvous: a fresh start needs
//     nothing more. Else every rank asks its node's autopard to restore exactly that step
//     (max_step = decided) — all at once — and the ranks confirm it with `agree_min` (a
//     collective: every rank calls it the same number of times and gets the minimum of the
//     values passed; the launcher implements it with a PMIx fence) — one round when every rank
//     holds the decided step. A rank whose files of that step are unusable (e.g. a corrupt
//     object: the reply's `skipped` names it; the probe reads manifests only, so this includes
//     rank 0's own objects) restores an older one, and all ranks fall back to the newest step
//     every rank holds. The Result is an error (the launch fails with that one line) when a
//     rank's autopard cannot restore at all, or when the ranks do not agree within a bounded
//     number of rounds.
// With --mpi=none (no rendezvous) each rank calls DecideResume with its RestoreForRank instead
// and resumes what its own restore found.
// A RestoreFn is RequestRestore (RestoreForRank) or ProbeRestore (ProbeForRank) for the calling
// rank (injected for tests).
struct ResumeDecision {
  bool enabled = false;   // the job checkpoints
  int64_t step = -1;      // -1: a fresh start
  std::string dir;        // this rank's restored directory (AUTOPAR_RESUME_DIR); empty after a probe
  std::string step_dir;   // the step's directory (AUTOPAR_RESUME_STEP_DIR)
  int world_size = 0;     // the world size that wrote the step (AUTOPAR_RESUME_WORLD_SIZE)
  std::string source_job;
  std::vector<std::string> notes;  // lines for the log (skipped steps, warnings), this rank's
  uint64_t bytes_local = 0;    // of this rank's restore: taken from the node's intact copy
  uint64_t bytes_fetched = 0;  // ... and fetched from the upload
};
using RestoreFn = std::function<Result<RestoreReply>(int64_t max_step)>;
// Whether the job checkpoints: AUTOPAR_CKPT_DIR and AUTOPAR_SOCKET are both set.
bool CheckpointsEnabled(const GetEnv& getenv);
// The restore / probe request of the calling rank (with its JobCkptEnvFrom).
RestoreFn RestoreForRank(const GetEnv& getenv);
RestoreFn ProbeForRank(const GetEnv& getenv);
// Asks `ask(max_step)` and takes its reply: the step, and its skipped steps as notes. max_step
// >= 0 (a rollback, --on-bad-loss) leaves out every later step.
ResumeDecision DecideResume(const RestoreFn& ask, int64_t max_step = -1);
// `own` is rank 0's DecideResume (its probe: only its notes are kept); nullptr on every other
// rank. `restore` is the calling rank's RestoreForRank.
Result<ResumeDecision> RestoreDecided(int64_t decided, const ResumeDecision* own,
                                      const RestoreFn& restore,
                                      const std::function<int64_t(int64_t mine)>& agree_min);

}  // namespace autopar
