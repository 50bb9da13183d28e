// The autopard protocol: how the launcher, the CLI, libautopar and the Python module talk to the
// node's daemon over its Unix stream socket (AUTOPAR_SOCKET).
//
// Wire format: newline-delimited JSON. The client sends one request object per line and reads one
// reply object per line; a connection may carry several requests in turn. Every request has
// "v" (protocol version, 1) and "op"; every reply has "ok" (true/false) and, when false, "error"
// (one line, ready to print after "autopar: "). Unknown fields are ignored (newer clients), a
// missing required field is an error naming it. Lines are at most kMaxLineBytes.
//
//   op         request fields                                 reply fields (ok)
//   commit     job_id step rank world_size [local_world_size]   commit_id files bytes duplicate
//              ckpt_dir [upload] [keep] [node] [save_s]
//   restore    job_id rank world_size ckpt_dir [upload]         step (-1: none) source_job dir
//              [max_step] [probe] [node]                        skipped[] (step/object + reason)
//                                                               bytes_local bytes_fetched
//   ls         [uri] | [job_id]                                 steps[] {job_id step state bytes
//                                                               ranks world_size uri}
//   status     [job_id]                                         uploads[] {job_id step rank state
//                                                               bytes_done bytes_total
//                                                               throughput_bps eta_s error}
//   heartbeat  job_id rank step [node] [short_lived] [finishing] [checkpoint_requested]
//              [samples] [tokens] [loss] [rank_compute_s[]] [rank_nodes[]] [leads]
//   event      job_id kind [rank] [step] [detail] [node]        -
//   events     job_id                                           events[] {time node job_id kind
//                                                               rank step detail} (every node's
//                                                               journal merged in time order)
//                                                               [notes[]] (what is missing or
//                                                               was cut to fit one line, for
//                                                               stderr)
//   recover    job_id rank detail [node]                        action reason [history] [resume_max_step]
//
// restore with "probe": true only decides: the step a restore would pick (the latest COMPLETE
// step of the upload URI whose manifest is readable and fits this rank, or the latest
// COMPLETE-LOCAL step this rank committed on the node), without fetching or verifying any file;
// "dir" is empty. Authorized exactly like a restore. The launcher's rank 0 probes before the
// rendezvous so that every rank, rank 0 included, then restores the decided step in parallel.
//
// heartbeat with "short_lived": true comes from a process that exits right after it (the
// `autopar heartbeat` command): the rank stays alive as long as its Slurm task does (the sender's
// ancestor directly below slurmstepd or autopar-launch), not the sender. Without it the sender is
// the rank's process (the Python module, libautopar): the rank has ended when it is gone.
//
// heartbeat with "finishing": true says the rank's program is ending (its training loop is done;
// autopar's Python module sends it at exit): not progress; the node's hang watch gives the exit
// the first-step allowance (core/failure/hang_detector.h), as a last save or the interpreter's
// teardown may take longer than a step.
//
// heartbeat's "samples" and "tokens" (integers >= 0) are the step's over the whole job (its global
// batch, as any rank knows it) and "loss" its loss (a number, or "nan", "inf", "-inf"); all
// optional. Rank 0's, on its node's autopard, become the job's measured step time,
// throughput and MFU against the plan ("progress" events, docs/health.md). Rank 0's may also carry
// every rank's compute time of the step ("rank_compute_s": seconds >= 0, index = rank; the time
// each rank worked before it waited for the others, autopar.health.watch_ddp) and, once per run,
// the node of each rank ("rank_nodes"): its node's autopard looks for stragglers in them.
// "leads": true comes from the rank that reports in rank 0's place: the lowest member of a
// fault-tolerant group that lost rank 0 (docs/ft.md); its heartbeats are then taken as rank 0's
// for the job's progress, loss and stragglers. Rank 0's own heartbeats always are.
//
// heartbeat's reply: "checkpoint_requested": true (absent or false otherwise) asks the program to
// checkpoint now because the job's time limit is near (only for jobs submitted with
// --requeue-on-failure). The ranks agree on one step (any rank's request counts), commit it as
// usual and then wait for the requeue instead of exiting (docs/checkpoints.md, "Time limits").
//
// recover comes from the launcher of rank 0 when a generation of the program failed
// and the job restarts in place (or from the failed rank's own launcher, with unreachable=RANKS,
// when it could not reach those launchers: no restart in place is possible then). "detail"
// holds the failure (event fields: class exit signal run_s node generation detected, and
// history=NOTE, the previous decision's; for class=node-loss, which rank 0 sends when launchers
// of nodes in use are gone, lost=NODES and spares=COUNT, the spare nodes alive). The daemon journals the failure and its decision and
// answers "action": "restart-in-place" (the launchers restart the program), "requeue" or "stop"
// (done by the daemon before it answers), or "none" (no failure handling for this job), with
// "reason" and "history". Only a task of the job may ask.
//
// Authorization is the daemon's: it identifies the peer with SO_PEERCRED, never trusting a uid in
// the request. Pure encoding/decoding here; thread-compatible values, reentrant functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autopar/status.h"

namespace autopar {

inline constexpr int kProtocolVersion = 1;
inline constexpr size_t kMaxLineBytes = 1 << 20;
// The most ranks a heartbeat's rank_compute_s or rank_nodes may list (a line stays under 1 MiB).
inline constexpr unsigned kMaxRanksPerHeartbeat = 32768;

enum class Op { kCommit, kRestore, kLs, kStatus, kHeartbeat, kEvent, kEvents, kRecover };
const char* OpName(Op op);

// One request; which fields matter depends on `op` (see the table above).
struct Request {
  Op op = Op::kStatus;
  std::string job_id;
  int64_t step = -1;       // commit, heartbeat, event; restore: unused
  int64_t max_step = -1;   // restore: only steps <= max_step (-1: any)
  bool probe = false;      // restore: only decide the step; fetch nothing (see above)
  // restore, elastic jobs (--min-nodes): a step written by another world size may be restored;
  // every saved rank's files are then placed on the node (docs/elastic.md).
  bool reshard = false;
  bool short_lived = false;  // heartbeat: the sender exits right after (see above)
  bool finishing = false;    // heartbeat: the rank's program is ending (see above)
  int64_t samples = -1;      // heartbeat: the step's samples over the job; -1: not given
  int64_t tokens = -1;       // heartbeat: the step's tokens over the job; -1: not given
  std::optional<double> loss;  // heartbeat: the step's loss (may be NaN or infinite)
  std::vector<double> rank_compute_s;   // heartbeat (rank 0): every rank's compute time
  std::vector<std::string> rank_nodes;  // heartbeat (rank 0): every rank's node
  bool leads = false;                   // heartbeat: reports in rank 0's place (see above)
  int rank = -1;
  int world_size = 0;
  int local_world_size = 0;  // commit: ranks of the job on this node (local-only completeness)
  // commit: seconds the program spent writing the step's files before it committed them (its
  // training stalled; ckpt_committed's save_s=, docs/goodput.md); -1: not measured.
  double save_s = -1;
  std::string ckpt_dir;      // the job's node-local checkpoint directory (expanded)
  std::string upload;        // commit/restore: --ckpt-upload URI; ls: the URI to list
  int64_t keep = 0;          // commit: --ckpt-keep (0: keep everything)
  std::string node;          // the sender's node name, for the journal
  std::string kind;          // event
  std::string detail;        // event
};

struct CommitReply {
  int64_t commit_id = 0;
  int files = 0;
  uint64_t bytes = 0;
  bool duplicate = false;  // the same (job, step, rank) was committed before; nothing new queued
};

struct RestoreReply {
  int64_t step = -1;       // -1: no complete checkpoint (a fresh start)
  std::string source_job;  // the job whose checkpoint was restored (may be an earlier job)
  std::string dir;         // the rank's restored directory: <ckpt_dir>/step-<N>/rank-<R>
  std::vector<std::string> skipped;  // newer complete steps that could not be used, and why
  // What the restore took from an intact copy already on the node, and what it fetched from the
  // upload.
  uint64_t bytes_local = 0;
  uint64_t bytes_fetched = 0;
  // The step's directory (<ckpt_dir>/step-<N>, every restored rank-* below it) and the world size
  // that wrote it: another than the job's only with `reshard`, and then every rank-* is there.
  std::string step_dir;
  int world_size = 0;
};

struct StepInfo {
  std::string job_id;
  int64_t step = 0;
  std::string state;  // "COMPLETE", "INCOMPLETE" (storage) or "COMPLETE-LOCAL", "PARTIAL-LOCAL"
  uint64_t bytes = 0;
  int ranks = 0;      // ranks present
  int world_size = 0;
  std::string uri;    // where it lives ("file:///..." or "s3://...", or the local directory)
};

struct UploadInfo {
  std::string job_id;
  int64_t step = 0;
  int rank = 0;
  std::string state;  // "queued", "uploading", "uploaded", "failed", "local"
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  double throughput_bps = 0;  // bytes per second since this upload started
  double eta_s = -1;          // -1: unknown
  std::string error;
  // A failed upload that autopard tries again on its own: seconds until the next attempt (0: due
  // now); -1: none scheduled. In JSON only when >= 0 (older clients ignore it).
  double next_retry_s = -1;
};

struct JournalEvent {
  double time = 0;  // seconds since the epoch
  std::string node;
  std::string job_id;
  std::string kind;
  int rank = -1;
  int64_t step = -1;
  std::string detail;
};

struct RecoverReply {
  std::string action;  // "restart-in-place", "requeue", "stop", "none"
  std::string reason;  // the decision's line in the journal
  // restart-in-place: the decision's memory of this failure (an opaque note), sent back with the
  // next generation's failure ("history" in detail) so that a repeated failure at start is seen.
  std::string history;
  // restart-in-place of a bad loss (--on-bad-loss=rollback): the next generation resumes the
  // latest COMPLETE step at or before this one (-1: the latest COMPLETE step).
  int64_t resume_max_step = -1;
  // restart-in-place of an out-of-memory failure of a planned job: the next generation's plan
  // must fit in this many GiB per GPU (0: keep the plan).
  double max_mem_gib = 0;
  // restart-in-place of a job with --exclude-stragglers: nodes flagged as stragglers, to be left
  // out if spare nodes can take their places.
  std::vector<std::string> exclude_nodes;
};

// A reply: `status` says ok/error; the member for the request's op is filled.
struct Reply {
  Status status;
  CommitReply commit;
  RestoreReply restore;
  std::vector<StepInfo> steps;
  std::vector<UploadInfo> uploads;
  std::vector<JournalEvent> events;
  std::vector<std::string> notes;  // events: e.g. "other nodes' events need journal_uri ..."
  bool checkpoint_requested = false;  // heartbeat: checkpoint now (time limit near)
  RecoverReply recover;
};

// Checks the fields `op` needs (job id syntax, step >= 0, 0 <= rank < world_size, absolute
// ckpt_dir...). Errors name the field: "commit: rank: must be in [0, world_size), got 4".
Status ValidateRequest(const Request& request);

// One JSON object without the newline.
std::string EncodeRequest(const Request& request);
// Parses one line (without its newline) and validates it.
Result<Request> DecodeRequest(std::string_view line);

std::string EncodeReply(Op op, const Reply& reply);
// The JSON form of one step / upload / journal event, as in a reply (for `--json` output too).
std::string StepInfoJson(const StepInfo& step);
std::string UploadInfoJson(const UploadInfo& upload);
std::string JournalEventJson(const JournalEvent& event);
// An error reply that needs no op.
std::string EncodeErrorReply(const std::string& error);
// Parses a reply to a request of `op`; a reply with ok=false comes back as a Reply whose status
// holds the error (the Result is an error only for malformed JSON).
Result<Reply> DecodeReply(Op op, std::string_view line);

}  // namespace autopar
