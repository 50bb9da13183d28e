// Where a checkpoint's objects live inside a checkpoint URI (s3://bucket/prefix or file:///dir).
// Keys below are relative to that root; a backend prepends its prefix/directory.
//
//   job-<JOB>/step-<N>/rank-<R>/<relative file path>   a rank's files (uploaded first)
//   job-<JOB>/step-<N>/rank-<R>.json                  that rank's manifest: written after all of
//                                                     the rank's files are uploaded and verified
//   job-<JOB>/step-<N>/manifest.json                  the step manifest, written LAST, only when
//                                                     every rank 0..world-1 has its rank manifest
//
// A step is "complete" exactly when its manifest.json exists and lists every rank as verified
// (ckpt_manifest.h); readers never trust anything else. Several nodes upload their ranks of the
// same step; whichever node sees the last rank manifest arrive writes manifest.json (any of them
// writes the same content, so a race between two writers is harmless). Steps are decimal without
// padding; listing code sorts them numerically.
//
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autopar/status.h"

namespace autopar {

// Job ids: 1-64 of [A-Za-z0-9_.-] (Slurm's "1234" and array "1234_7"). Error names `what`.
Status ValidateJobId(std::string_view job_id);
// A file path inside a rank's checkpoint directory: relative, '/'-separated, no empty, '.' or
// '..' segments, no control characters, at most 1024 bytes. Error names the path.
Status ValidateRelativePath(std::string_view path);

std::string JobKeyPrefix(std::string_view job_id);                           // "job-J/"
std::string StepKeyPrefix(std::string_view job_id, int64_t step);            // "job-J/step-N/"
std::string RankKeyPrefix(std::string_view job_id, int64_t step, int rank);  // ".../rank-R/"
std::string RankFileKey(std::string_view job_id, int64_t step, int rank, std::string_view path);
std::string RankManifestKey(std::string_view job_id, int64_t step, int rank);
std::string StepManifestKey(std::string_view job_id, int64_t step);

struct CheckpointKey {
  enum class Kind { kRankFile, kRankManifest, kStepManifest };
  Kind kind = Kind::kRankFile;
  std::string job_id;
  int64_t step = 0;
  int rank = -1;     // kRankFile, kRankManifest
  std::string path;  // kRankFile: the relative file path
};
// Parses a key made by the functions above; nullopt for anything else (foreign objects are
// ignored, never deleted by retention).
std::optional<CheckpointKey> ParseCheckpointKey(std::string_view key);

// A step seen in a listing.
struct StepRef {
  std::string job_id;
  int64_t step = 0;
  bool has_manifest = false;        // manifest.json exists (claims complete; read it to be sure)
  std::vector<int> rank_manifests;  // ranks whose rank-R.json exists, ascending
  uint64_t bytes = 0;               // sum of the sizes of the step's objects in the listing
};
struct ListedObject {
  std::string key;
  uint64_t size = 0;
};
// Groups a listing by (job, step); when `job_id` is non-empty only that job's steps. Sorted by
// step descending, then job id descending (the newest first).
std::vector<StepRef> StepsInListing(const std::vector<ListedObject>& objects,
                                    std::string_view job_id);

}  // namespace autopar
