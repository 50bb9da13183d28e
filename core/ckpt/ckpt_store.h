// Checkpoint operations over an ObjectStore (storage.h), following the layout of ckpt_layout.h:
// upload one rank's files of a step and complete the step when all ranks are in, find the latest
// complete step, restore it (falling back to the previous complete step when an object is missing
// or corrupt), and apply retention. This is the storage half of autopard's checkpoint service;
// the daemon adds the durable queue, the socket and the scheduling.
//
// Every function here is reentrant and may run concurrently for different ranks/steps; several
// nodes may run them against the same store at once (see ckpt_layout.h for why that is safe).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/ckpt/ckpt_layout.h"
#include "core/ckpt/ckpt_manifest.h"
#include "core/ckpt/ckpt_retention.h"
#include "autopar/status.h"
#include "core/ckpt/storage.h"

namespace autopar {

// One file of a rank's step.
struct RankFile {
  RankFile(std::string p) : path(std::move(p)) {}  // NOLINT: a path is a file of unknown size
  RankFile(const char* p) : path(p) {}             // NOLINT
  std::string path;       // relative to RankUpload::local_dir (ValidateRelativePath)
  int64_t size = -1;      // the size committed (-1: any), UploadItem::size
  UploadProgress resume;  // what earlier runs recorded (TransferOptions::log)
};

struct RankUpload {
  std::string job_id;
  int64_t step = 0;
  int world_size = 0;
  int rank = 0;
  std::string local_dir;        // the directory holding the rank's files of this step
  std::vector<RankFile> files;  // TransferOptions::log's file indexes are indexes here
};

struct RankUploadResult {
  CheckpointManifest rank_manifest;  // what was written to rank-R.json
  Completeness step;                 // the step's state after this rank
  uint64_t bytes = 0;
};

// Uploads the rank's files (UploadFiles: parallel, retried, checked, resumed from and recorded in
// options.log), writes rank-R.json (verified: every object's size was checked after upload, parts
// and whole objects by MD5 where the store reports one; each file's size, SHA-256 and mode), then
// TryCompleteStep, a few times over 1.5 s when it fails (another node may be writing its rank
// manifest at that moment, and some stores show a half-written object to a concurrent read).
// Errors name the file and the object; `failure->local`: not cured by retrying (a file missing or
// changed, an invalid path).
Result<RankUploadResult> UploadRank(ObjectStore& store, const RankUpload& upload,
                                    const TransferOptions& options, UploadFailure* failure = nullptr);

// Reads the step's rank manifests; when every rank 0..world-1 is present and verified, writes
// manifest.json (idempotent: equal content from any node) and returns complete. Inconsistent rank
// manifests (different world sizes) are an error naming the step.
Result<Completeness> TryCompleteStep(ObjectStore& store, const std::string& job_id, int64_t step,
                                     const TransferOptions& options);

// Steps under the store's root (of `job_id`, or of every job when empty), newest first, each with
// has_manifest telling whether manifest.json exists.
Result<std::vector<StepRef>> ListSteps(ObjectStore& store, const std::string& job_id,
                                       const TransferOptions& options);

// Reads, parses and checks manifest.json of a step; an incomplete manifest is an error.
Result<CheckpointManifest> ReadStepManifest(ObjectStore& store, const std::string& job_id,
                                            int64_t step, const TransferOptions& options);

struct RestoreRequest {
  std::string job_id;      // restore this job's steps; "" = the newest complete step of any job
  std::vector<int> ranks;  // the ranks whose files this node needs
  // Where rank `rank`'s files of (job, step) go; created as needed. Use a per-step directory so
  // a fallback never mixes files of two steps.
  std::function<std::string(const std::string& job_id, int64_t step, int rank)> local_dir;
};
struct RestoreResult {
  std::string job_id;
  int64_t step = -1;  // -1: no complete step could be restored (a fresh start)
  CheckpointManifest manifest;
  // One line per newer complete step that could not be used, e.g. "step 30: s3://b/p/job-1/
  // step-30/rank-1/model.pt: SHA-256 mismatch: ...", to report to the user.
  std::vector<std::string> skipped;
};
// Restores the newest complete step whose objects for `ranks` all download and verify; falls back
// step by step. Errors only when the store cannot be listed.
Result<RestoreResult> RestoreLatest(ObjectStore& store, const RestoreRequest& request,
                                    const TransferOptions& options);

// Lists the job's steps, plans retention (ckpt_retention.h; complete = manifest.json exists) and
// deletes every object of the steps to remove. Returns the plan that was applied.
Result<RetentionPlan> ApplyRetention(ObjectStore& store, const std::string& job_id, int keep_last,
                                     const TransferOptions& options);

}  // namespace autopar
