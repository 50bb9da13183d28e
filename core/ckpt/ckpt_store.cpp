#include "core/ckpt/ckpt_store.h"

#include <map>

#include <algorithm>

namespace autopar {

Result<RankUploadResult> UploadRank(ObjectStore& store, const RankUpload& upload,
                                    const TransferOptions& options, UploadFailure* failure) {
  UploadFailure ignored;
  if (!failure) failure = &ignored;
  failure->local = true;  // until the files are valid
  if (Status s = ValidateJobId(upload.job_id); !s.ok()) return s;
  if (upload.world_size < 1 || upload.rank < 0 || upload.rank >= upload.world_size) {
    return Status::Error("rank " + std::to_string(upload.rank) + " is outside world size " +
                         std::to_string(upload.world_size));
  }
  std::vector<UploadItem> items;
  for (const auto& f : upload.files) {
    if (Status s = ValidateRelativePath(f.path); !s.ok()) return s;
    UploadItem item;
    item.local_path = upload.local_dir + "/" + f.path;
    item.key = RankFileKey(upload.job_id, upload.step, upload.rank, f.path);
    item.size = f.size;
    item.resume = f.resume;
    items.push_back(std::move(item));
  }
  failure->local = false;
  TransferOptions opts = options;
  opts.compute_sha256 = true;
  auto uploaded = UploadFiles(store, items, opts, failure);
  if (!uploaded.ok()) return uploaded.status();

  RankUploadResult result;
  CheckpointManifest& m = result.rank_manifest;
  m.job_id = upload.job_id;
  m.step = upload.step;
  m.world_size = upload.world_size;
  RankEntry entry;
  entry.verified = true;  // UploadFiles checked every part/object and the final sizes
  for (size_t i = 0; i < items.size(); ++i) {
    const UploadResult& r = (*uploaded)[i];
    entry.files.push_back({upload.files[i].path, r.size, r.sha256, r.mode & 0777});
    result.bytes += r.size;
  }
  std::sort(entry.files.begin(), entry.files.end(),
            [](const CheckpointFile& a, const CheckpointFile& b) { return a.path < b.path; });
  m.ranks[upload.rank] = entry;
  std::string key = RankManifestKey(upload.job_id, upload.step, upload.rank);
  if (Status s = ValidateManifest(m, key); !s.ok()) {
    failure->local = true;
    return s;
  }
  if (Status s = PutSmallObject(store, key, ManifestToJson(m), options); !s.ok()) return s;
  RetryClock real = RealRetryClock();
  const auto& sleep = options.clock.sleep ? options.clock.sleep : real.sleep;
  auto step = TryCompleteStep(store, upload.job_id, upload.step, options);
  for (int attempt = 1; !step.ok() && attempt < 6 && !(options.cancel && options.cancel->load()); ++attempt) {
    sleep(std::chrono::milliseconds(100 * attempt));
    step = TryCompleteStep(store, upload.job_id, upload.step, options);
  }
  if (!step.ok()) return step.status();
  result.step = *step;
  return result;
}

Result<Completeness> TryCompleteStep(ObjectStore& store, const std::string& job_id, int64_t step,
                                     const TransferOptions& options) {
  auto listed = ListObjects(store, StepKeyPrefix(job_id, step), options);
  if (!listed.ok()) return listed.status();
  CheckpointManifest merged;
  bool have_step_manifest = false;
  for (const auto& obj : *listed) {
    auto key = ParseCheckpointKey(obj.key);
    if (!key) continue;
    if (key->kind == CheckpointKey::Kind::kStepManifest) have_step_manifest = true;
    if (key->kind != CheckpointKey::Kind::kRankManifest) continue;
    auto text = GetSmallObject(store, obj.key, options);
    if (!text.ok()) return text.status();
    auto part = ParseManifest(*text, store.Describe() + "/" + obj.key);
    if (!part.ok()) return part.status();
    if (part->job_id != job_id || part->step != step || part->ranks.size() != 1 ||
        part->ranks.begin()->first != key->rank) {
      return Status::Error(store.Describe() + "/" + obj.key + ": does not describe rank " +
                           std::to_string(key->rank) + " of job " + job_id + " step " +
                           std::to_string(step));
    }
    if (Status s = MergeManifest(&merged, *part); !s.ok()) return s;
  }
  Completeness c = CheckCompleteness(merged);
  if (c.complete && !have_step_manifest) {
    // Every rank's files must still be in storage (as listed above, with their sizes): retention
    // may have deleted an older step while a late rank completed it, and a COMPLETE manifest
    // over missing files would be restored and fail.
    std::map<std::string, uint64_t> present;
    for (const auto& obj : *listed) present.emplace(obj.key, obj.size);
    for (const auto& [rank, files] : merged.ranks) {
      for (const auto& f : files.files) {
        auto it = present.find(RankFileKey(job_id, step, rank, f.path));
        if (it == present.end() || it->second != f.size) {
          c.complete = false;
          c.missing_files.push_back("rank " + std::to_string(rank) + ": " + f.path);
        }
      }
    }
  }
  if (c.complete && !have_step_manifest) {
    std::string key = StepManifestKey(job_id, step);
    if (Status s = PutSmallObject(store, key, ManifestToJson(merged), options); !s.ok()) return s;
  }
  return c;
}

Result<std::vector<StepRef>> ListSteps(ObjectStore& store, const std::string& job_id,
                                       const TransferOptions& options) {
  // Every job: only the "job-" directories, never whatever else the store's root holds (a
  // store of file:/// must not make this a walk of the filesystem).
  auto listed = ListObjects(store, job_id.empty() ? "job-" : JobKeyPrefix(job_id), options);
  if (!listed.ok()) return listed.status();
  std::vector<ListedObject> objects;
  objects.reserve(listed->size());
  for (const auto& o : *listed) objects.push_back({o.key, o.size});
  return StepsInListing(objects, job_id);
}

Result<CheckpointManifest> ReadStepManifest(ObjectStore& store, const std::string& job_id,
                                            int64_t step, const TransferOptions& options) {
  std::string key = StepManifestKey(job_id, step);
  auto text = GetSmallObject(store, key, options);
  if (!text.ok()) return text.status();
  std::string origin = store.Describe() + "/" + key;
  auto m = ParseManifest(*text, origin);
  if (!m.ok()) return m.status();
  if (m->job_id != job_id || m->step != step) {
    return Status::Error(origin + ": describes job " + m->job_id + " step " +
                         std::to_string(m->step));
  }
  Completeness c = CheckCompleteness(*m);
  if (!c.complete) return Status::Error(origin + ": " + c.Describe());
  return m;
}

Result<RestoreResult> RestoreLatest(ObjectStore& store, const RestoreRequest& request,
                                    const TransferOptions& options) {
  auto steps = ListSteps(store, request.job_id, options);
  if (!steps.ok()) return steps.status();
  RestoreResult result;
  for (const StepRef& ref : *steps) {
    if (!ref.has_manifest) continue;
    std::string label = (request.job_id.empty() ? "job " + ref.job_id + " " : "") + "step " +
                        std::to_string(ref.step);
    auto m = ReadStepManifest(store, ref.job_id, ref.step, options);
    if (!m.ok()) {
      result.skipped.push_back(label + ": " + m.message());
      continue;
    }
    std::vector<DownloadItem> items;
    std::string problem;
    for (int rank : request.ranks) {
      auto it = m->ranks.find(rank);
      if (it == m->ranks.end()) {
        problem = "rank " + std::to_string(rank) + " is not in this checkpoint (world size " +
                  std::to_string(m->world_size) + ")";
        break;
      }
      std::string dir = request.local_dir(ref.job_id, ref.step, rank);
      for (const auto& f : it->second.files) {
        items.push_back({RankFileKey(ref.job_id, ref.step, rank, f.path), dir + "/" + f.path,
                         f.size, f.sha256, f.mode});
      }
    }
    if (problem.empty()) {
      Status s = DownloadFiles(store, items, options);
      if (s.ok()) {
        result.job_id = ref.job_id;
        result.step = ref.step;
        result.manifest = std::move(*m);
        return result;
      }
      problem = s.message();
    }
    result.skipped.push_back(label + ": " + problem);
  }
  return result;
}

Result<RetentionPlan> ApplyRetention(ObjectStore& store, const std::string& job_id, int keep_last,
                                     const TransferOptions& options) {
  if (Status s = ValidateJobId(job_id); !s.ok()) return s;
  auto steps = ListSteps(store, job_id, options);
  if (!steps.ok()) return steps.status();
  std::vector<StepStatus> status;
  for (const auto& s : *steps) status.push_back({s.step, s.has_manifest});
  RetentionPlan plan = PlanRetention(status, keep_last);
  for (int64_t step : plan.remove) {
    // The manifest goes first: from then on the step no longer claims to be complete, so a
    // concurrent restore never picks a half-deleted step.
    auto gone = DeletePrefix(store, StepManifestKey(job_id, step), options);
    if (!gone.ok()) return gone.status();
    auto n = DeletePrefix(store, StepKeyPrefix(job_id, step), options);
    if (!n.ok()) return n.status();
  }
  return plan;
}

}  // namespace autopar
