// One timeline per job: the event record every part of autopar writes to autopard's
// journal, its JSON form, the merge of several nodes' journals in time order, and the table that
// `autopar events JOBID` prints.
//
// The record is autopar::JournalEvent (protocol.h: time, node, job_id, kind, rank, step, detail):
// the same type travels in the protocol's `event`/`events` ops. Structured fields go in `detail`
// as space-separated key=value pairs (FormatEventFields; values with spaces or quotes are
// double-quoted with \" and \\ escapes), so the table shows them as they are and --json also gives
// them as an object.
//
// `autopar events JOBID` output:
//   table:  TIME (UTC, ms)           +SECONDS  NODE   RANK STEP KIND             DETAIL
//           2026-11-30 09:01:02.345     0.000  node1     -    - submitted        plan="tp=1,pp=1,dp=4"
//           ... one line per event, "-" for an unknown rank/step, then one summary line.
//   --json: {"job_id": "42", "events": [{"time": 1796029262.345, "time_utc":
//           "2026-11-30T09:01:02.345Z", "node": ..., "job_id": ..., "kind": ..., "rank": -1,
//           "step": -1, "detail": "...", "fields": {"key": "value", ...}}, ...]}
//
// Pure functions; reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/proto/protocol.h"
#include "autopar/status.h"

namespace autopar {

// The kinds of event autopar records, snake_case like the daemon's own ckpt_* events (other kinds
// are allowed and shown as they are).
namespace event_kind {
inline constexpr const char* kSubmitted = "submitted";          // plan=...
inline constexpr const char* kStepStarted = "step_started";     // nodes= ranks= restart=
inline constexpr const char* kRendezvous = "rendezvous";        // duration_s=
inline constexpr const char* kCkptCommitted = "ckpt_committed"; // step, rank (autopard)
inline constexpr const char* kCkptComplete = "ckpt_complete";   // step (autopard)
inline constexpr const char* kCkptUploaded = "ckpt_uploaded";   // step, rank (autopard)
inline constexpr const char* kCkptFailed = "ckpt_failed";       // step, error (autopard)
// Uploads and retention (autopard): an upload retried after a storage failure (attempt N: the
// error), retention that could not delete, a node-local step removed once it was uploaded.
inline constexpr const char* kCkptUploadRetry = "ckpt_upload_retry";
inline constexpr const char* kCkptRetentionFailed = "ckpt_retention_failed";
inline constexpr const char* kCkptLocalRemoved = "ckpt_local_removed";
// Restores (autopard, one per rank): the step restored (bytes_local= bytes_fetched=, or "local
// DIR"), a step passed over because it could not be restored (the reason; an older one is
// tried), and a start from scratch (no complete step to resume).
inline constexpr const char* kCkptRestored = "ckpt_restored";
inline constexpr const char* kCkptRestoreSkipped = "ckpt_restore_skipped";
inline constexpr const char* kFreshStart = "fresh_start";
// Rank 0's restore decision waited for a step every rank had committed whose upload was still on
// its way (core/failure/upload_wait.h): waited_s=, and whether it came (complete=yes|no).
inline constexpr const char* kRestoreWaited = "restore_waited";
// autopard started again and watches a running job's ranks as before (ranks=, last step).
inline constexpr const char* kWatchResumed = "watch_resumed";
inline constexpr const char* kRankExit = "rank_exit";  // exit= [signal=] run_s= (autopar-launch)
inline constexpr const char* kHeartbeatMissed = "heartbeat_missed";  // the HangVerdict
inline constexpr const char* kFailure = "failure";  // class= [exit=] [signal=] reason=
inline constexpr const char* kStack = "stack";      // rank; StackCapture::ToDetail()
inline constexpr const char* kRequeue = "requeue";  // attempt= of= delay_s= exclude= reason=
inline constexpr const char* kRequeueFailed = "requeue_failed";  // error=
inline constexpr const char* kStopped = "stopped";  // reason=
inline constexpr const char* kNodeDown = "node_down";  // node= result= (autopard marked it DOWN)
// A claim in a request that autopard checked and found untrue (claim=lost node= reason=): it is
// not acted on, and the job recovers from what is true.
inline constexpr const char* kClaimRefused = "claim_refused";
// A hung rank's kernel stack (/proc/PID/stack: kernel addresses and symbols, root-only): shown
// only to root and SlurmUser (autopard's events reply leaves it out for everyone else).
inline constexpr const char* kStackKernel = "stack_kernel";
inline constexpr const char* kResumed = "resumed";  // step (the checkpoint resumed from)
// Time limits (autopard; failure_handler.h): the checkpoint request with its plan (end= margin_s=
// ckpt_estimate_s= step_s= plan=), the step the program checkpoints for it (python/autopar),
// a time limit reached without a COMPLETE checkpoint after the request, and a time-limit
// checkpoint that was not requeued (reason=).
inline constexpr const char* kTimeLimitRequest = "time_limit_request";
// Preemption (failure_handler.h): the step a program checkpoints because its task got SIGTERM
// (python/autopar); a program that ended at its task's SIGTERM without such a checkpoint
// (autopar-launch: exit=); Slurm's preemption of the run as autopard found it (preempt_time=
// grace_s= partition= then=).
inline constexpr const char* kTerminationCheckpoint = "termination_checkpoint";
inline constexpr const char* kTerminated = "terminated";
// The run ended at the SIGTERM of a requeue Slurm made itself at the notice (a preemption without
// grace time, or scontrol requeue): restart= reason=.
inline constexpr const char* kRequeuedBySlurm = "requeued_by_slurm";
inline constexpr const char* kPreempted = "preempted";
inline constexpr const char* kTimeLimitCheckpoint = "time_limit_checkpoint";
inline constexpr const char* kTimeLimitMissed = "time_limit_missed";
inline constexpr const char* kTimeLimitNotRequeued = "time_limit_not_requeued";
inline constexpr const char* kFinished = "finished";  // exit=
// In-place restarts (docs/recovery.md): autopard's decision for a failed generation
// (action=restart-in-place|requeue-path|none generation= attempt= of= reason=), rank 0's launcher
// when every rank's program was stopped and started again (generation= culprit_rank= stop_s=
// decide_s= rendezvous_s= programs= failed=: the programs stopped, of which failed had failed), each rank's restore (bytes_local= bytes_fetched= restore_s=), and
// the first heartbeat of the new generation (generation= since_failure_s=, autopard), and a hang
// handed to a rank's launcher (launcher_pid= generation= result=, autopard).
inline constexpr const char* kRecovery = "recovery";
inline constexpr const char* kHangStop = "hang_stop";
inline constexpr const char* kRestarted = "restarted";
inline constexpr const char* kRestored = "restored";
inline constexpr const char* kFirstStep = "first_step";
// Elastic runs (docs/elastic.md): rank 0's launcher when the run goes on with fewer
// nodes (generation= from_nodes= to_nodes= from_ranks= to_ranks= nodes= plan_before= plan_after=
// reason=), and when a new run resumes a step written by another world size (generation=0, the
// same fields but nodes= and plan_before=; its step is the step resumed).
inline constexpr const char* kResized = "resized";
// Training health (docs/health.md): rank 0's measured progress against the plan (steps=
// step_s= [samples_per_s=] [tokens_per_s=] [loss=] [loss_last=] [planned_step_s= planned_mfu= mfu=
// vs_plan=]), at most once per autopard's progress_interval_s.
inline constexpr const char* kProgress = "progress";
// A NaN/Inf or spiking loss of rank 0 (kind= loss= [mean= factor=] action=warn|rollback|stop
// reason=); the step is the bad one. A rollback follows as failure class=bad-loss and recovery
// (rollback= of= resume_max_step=).
inline constexpr const char* kBadLoss = "bad_loss";
// The program ran out of memory and the next generation runs with another plan (rank 0's
// launcher: generation= max_mem_gib= plan_before= mem_before_gib= plan_after= mem_after_gib=
// reason=; plan_after "refused: ..." when no plan fits and the job ends instead).
inline constexpr const char* kReplanned = "replanned";
// Utilisation (docs/health.md): every rank's autopar-launch sends "usage_sample"
// (cpu_cores= rss_gib= processes= [gpu_util= gpu_mem_gib=] [generation=]) to its node's autopard,
// which does not journal it but summarises a node's share of the job as "usage" (core/health/
// usage.h) at most once per progress_interval_s, and "idle" when it shows neither progress nor
// use for the job's --idle-timeout.
inline constexpr const char* kUsageSample = "usage_sample";
inline constexpr const char* kUsage = "usage";
inline constexpr const char* kIdle = "idle";
// A straggler (docs/health.md), on rank 0's node: rank= node= compute_s= median_s= ratio=
// windows= margin= excluded_next=yes|no; once per rank per run.
inline constexpr const char* kStraggler = "straggler";
// Per-step fault tolerance (docs/ft.md): the launcher that leads forms a quorum of the group
// (epoch= step= members= heals= lost= formed_s=), and a member that received the state from a
// live peer says so (from= bytes= seconds=; its launcher journals it), and the group's first
// member says which step nobody committed (reason=group-changed epoch= | reason=loss-not-finite
// members= attempt=); the step is the discarded one, run again.
inline constexpr const char* kFtQuorum = "ft_quorum";
inline constexpr const char* kFtHealed = "ft_healed";
inline constexpr const char* kFtDiscarded = "ft_discarded";
}  // namespace event_kind

// Every kind above, in their order: what docs/events.md lists (a test holds them together).
const std::vector<std::string>& AllEventKinds();

using EventFields = std::vector<std::pair<std::string, std::string>>;

// key=value pairs, in the given order. Keys must be [A-Za-z0-9_.-]+ (others are replaced by '_').
std::string FormatEventFields(const EventFields& fields);
// The inverse; text that is not key=value (free text) comes back under the key "text".
EventFields ParseEventFields(std::string_view detail);

// Merges several journals (each in any order) into one in time order; events at the same time
// keep node, then journal order. Exact duplicates (the same event read twice) appear once.
std::vector<JournalEvent> MergeTimelines(const std::vector<std::vector<JournalEvent>>& journals);

// "2026-11-30 09:01:02.345" (sep ' ') or "2026-11-30T09:01:02.345Z" (iso = true); UTC.
std::string FormatEventTime(double epoch_s, bool iso);
// The inverse, in UTC: "YYYY-MM-DD", "YYYY-MM-DD HH:MM[:SS[.mmm]]" or with 'T' (and a 'Z');
// nullopt for anything else.
std::optional<double> ParseEventTime(std::string_view text);

// Per-rank checkpoint rows folded into one per step and run, for people: events of kinds
// ckpt_committed, ckpt_uploaded, ckpt_complete, ckpt_restored and fresh_start with the same kind
// and step, between two run boundaries (step_started, requeue), become one row at the first one's
// time: its node ("node1+3" for several), rank (-1 for several) and the detail
// "<N> events, ranks <list> on <M> nodes: <first detail>" (without ", ranks ..." for events of
// no rank); the node shown is the first by name. Other events are kept as they are.
// `folded` (may be null) gets how many rows were saved.
std::vector<JournalEvent> FoldPerRankEvents(const std::vector<JournalEvent>& events,
                                            size_t* folded = nullptr);

// The table above, ending with "N events from M nodes" (or "no events for job J"). With
// `fold_per_rank`, rows are FoldPerRankEvents' and the summary says how many were folded.
std::string RenderEventsTable(const std::string& job_id, const std::vector<JournalEvent>& events,
                              bool fold_per_rank = false);

// The --json form above (one line per event for readable diffs), ending with a newline.
std::string EncodeEventsJson(const std::string& job_id, const std::vector<JournalEvent>& events);
// Reads EncodeEventsJson's output back (the "fields"/"time_utc" members are ignored: `detail` and
// `time` are the truth). Errors name what is wrong: "events JSON: events[2]: time: not a number".
Result<std::vector<JournalEvent>> DecodeEventsJson(std::string_view text);

// ---- published journals (autopard's journal_uri) ---------------------------------------------
// Every autopard publishes each job's events from its own journal to the site's journal store as
// append-only segments: each publication round writes one new object holding only the events
// recorded since the last round (never rewriting earlier ones), named by the range of the node's
// local journal ids it holds:
//   <job_id>/<node>/<first_id>-<last_id>.json  (ids zero-padded to 12 digits) =
//       {"job_id": "42", "node": "node1", "uid": 1001, "updated": <epoch s>,
//        "events": [... as in EncodeEventsJson, without time_utc and fields ...]}
// A compaction replaces `fanout` segments of one level by one segment covering their range (the
// events read again from the node's journal), then deletes them, so that a node holds
// O(fanout * log(rounds)) segments and each event is rewritten O(log(rounds)) times. A reader
// lists <job_id>/, keeps per node the segments not contained in another one (left over by a
// compaction interrupted before its deletions: CoveringSegments) and merges their events.
// Earlier versions wrote one whole object per node, <job_id>/<node>.json (same content): it is
// still read, as a segment covering everything.
// `uid` is the job's owner as Slurm knew it when the node published (-1: unknown), so that
// `autopar events` can authorize a reader after Slurm has forgotten the job.
struct PublishedJournal {
  std::string job_id;
  std::string node;
  int64_t uid = -1;
  double updated = 0;
  std::vector<JournalEvent> events;
};

// "42/node1.json"; characters of `node` outside [A-Za-z0-9_.-] become '_'.
std::string PublishedJournalKey(const std::string& job_id, const std::string& node);
// "42/node1/000000000012-000000000345.json": the segment holding node1's events of job 42 with
// local ids 12..345 (`node` as in PublishedJournalKey).
std::string PublishedSegmentKey(const std::string& job_id, const std::string& node,
                                int64_t first_id, int64_t last_id);
// What a key under PublishedJournalPrefix(job_id) names: a segment (its node's name as in the
// key, and its id range) or an earlier version's whole journal (whole: the range is everything).
struct PublishedKey {
  std::string key;
  std::string node;  // as written in the key
  int64_t first_id = 0;
  int64_t last_id = 0;
  bool whole = false;
};
// False for keys that are neither (temporary files, other names, deeper paths).
bool ParsePublishedKey(const std::string& job_id, const std::string& key, PublishedKey* out);
// The keys a reader needs, sorted by node, then first_id: a segment contained in another
// segment of the same node (a compaction's input not yet deleted) is left out.
std::vector<PublishedKey> CoveringSegments(std::vector<PublishedKey> keys);
// "42/": the prefix under which every node's journal of the job lies.
std::string PublishedJournalPrefix(const std::string& job_id);
std::string EncodePublishedJournal(const PublishedJournal& journal);
// Errors name the field: "published journal: uid: not an integer"; events as DecodeEventsJson.
Result<PublishedJournal> DecodePublishedJournal(std::string_view text);

}  // namespace autopar
