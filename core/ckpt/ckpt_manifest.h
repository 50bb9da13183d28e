// The checkpoint manifest: what one step of a job consists of, and whether it is complete.
//
// JSON (written with jsoncpp, keys in this order, sizes as integers):
//   {
//     "format": "autopar-checkpoint/1",
//     "job_id": "1234",
//     "step": 100,
//     "world_size": 2,
//     "ranks": [
//       {"rank": 0, "verified": true,
//        "files": [{"path": "model.pt", "size": 1048576, "sha256": "<64 hex>"}]},
//       {"rank": 1, "verified": true, "files": []}
//     ]
//   }
// A rank manifest (rank-R.json, ckpt_layout.h) has the same form with one rank; the step manifest
// (manifest.json) merges all of them. "verified" means the uploader checked every object of that
// rank in storage (size, and checksum where the storage gives one) after the upload.
//
// Completeness: a step is COMPLETE only when every rank 0..world_size-1 is present and verified;
// only a complete step may become "latest" or be restored.
//
// Pure functions and values; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "autopar/status.h"

namespace autopar {

inline constexpr const char* kManifestFormat = "autopar-checkpoint/1";

struct CheckpointFile {
  std::string path;  // relative to the rank's checkpoint directory (ValidateRelativePath)
  uint64_t size = 0;
  std::string sha256;  // lowercase hex
  // Permission bits of the file that was saved (0..0777; 0: not recorded, by older versions).
  // Written as "mode" only when recorded; a restore gives the file back this mode.
  uint32_t mode = 0;
  bool operator==(const CheckpointFile& o) const {
    return path == o.path && size == o.size && sha256 == o.sha256;
  }
};

struct RankEntry {
  std::vector<CheckpointFile> files;  // sorted by path, unique
  bool verified = false;
  bool operator==(const RankEntry& o) const { return files == o.files && verified == o.verified; }
};

struct CheckpointManifest {
  std::string job_id;
  int64_t step = 0;
  int world_size = 0;
  std::map<int, RankEntry> ranks;  // the ranks present

  uint64_t TotalBytes() const;
  bool operator==(const CheckpointManifest& o) const {
    return job_id == o.job_id && step == o.step && world_size == o.world_size && ranks == o.ranks;
  }
};

// A step written by torch.distributed.checkpoint (DCP): rank 0's files hold DCP's metadata
// (".metadata") and DCP's data files ("__<rank>_<n>.distcp"). A rank of a DCP load may read any
// rank's files (a replicated tensor is stored once; a resharded load reads any shard), so such a
// step is restored whole on every node.
bool IsDcpStep(const CheckpointManifest& m);

// Structural checks: job id, step >= 0, 1 <= world_size <= 1000000, ranks in [0, world_size),
// valid unique file paths, sizes, 64-hex digests. Error names `origin` (a key or file) and the
// field, e.g. "job-1/step-2/manifest.json: ranks[0].files[1].sha256: not 64 lowercase hex digits".
Status ValidateManifest(const CheckpointManifest& m, std::string_view origin);

// Serialises (files sorted by path). Deterministic: equal manifests give equal bytes.
std::string ManifestToJson(const CheckpointManifest& m);

// Parses and validates. Errors name `origin` and the problem (JSON syntax with line/column,
// missing or mistyped key, wrong format tag, ValidateManifest's checks).
Result<CheckpointManifest> ParseManifest(std::string_view json, std::string_view origin);

// Adds the ranks of `part` (e.g. a rank manifest) to `step`. `step` may be empty (world_size 0):
// it then takes job/step/world from `part`. Errors: job id, step or world size differ; a rank
// already present with different content. Idempotent for identical ranks.
Status MergeManifest(CheckpointManifest* step, const CheckpointManifest& part);

struct Completeness {
  bool complete = false;
  std::vector<int> missing_ranks;     // not present, ascending
  std::vector<int> unverified_ranks;  // present but not verified, ascending
  // Files a rank's manifest names that storage no longer holds ("rank R: PATH"; TryCompleteStep).
  std::vector<std::string> missing_files;
  // "complete" or e.g. "incomplete: ranks 2,3 missing; rank 1 not verified".
  std::string Describe() const;
};
Completeness CheckCompleteness(const CheckpointManifest& m);

}  // namespace autopar
