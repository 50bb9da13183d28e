// `restore`: the newest complete checkpoint a rank may read (its job's, or an earlier job's of
// the same owner), its files checked against the manifest and fetched into the job's directory
// with the owner's rights; or, for a job without --ckpt-upload, a node-local step verified
// against what its commit recorded.
#include <unistd.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/ckpt/ckpt_layout.h"
#include "core/ckpt/ckpt_store.h"
#include "core/failure/timeline.h"
#include "core/failure/upload_wait.h"
#include "core/text.h"
#include "daemon.h"
#include "daemon_internal.h"
#include "journal_publisher.h"
#include "service/user_access/user_fs.h"

namespace autopar {

using daemon_detail::Error;
using daemon_detail::Now;

namespace {

// "" when every file of the rank's step directory `dir` has the size and SHA-256 recorded at its
// commit (read with the owner's rights, no link followed); otherwise the first problem.
std::string VerifyLocalFiles(const UserIdentity& id, const std::string& dir,
                             const std::vector<FileRecord>& files) {
  for (const auto& f : files) {
    auto fd = OpenUserFile(id, dir + "/" + f.path, static_cast<int64_t>(f.size));
    if (!fd) return fd.message();
    auto sha = Sha256OfFd(*fd, dir + "/" + f.path);
    close(*fd);
    if (!sha) return sha.message();
    if (*sha != f.sha256) {
      return dir + "/" + f.path + ": SHA-256 mismatch: expected " + f.sha256 + ", got " + *sha;
    }
  }
  return "";
}

// A file of the rank's step directory that already has the manifest's size and SHA-256.
bool LocalCopyIntact(const UserIdentity& id, const std::string& path, uint64_t size,
                     const std::string& sha256) {
  auto fd = OpenUserFile(id, path, static_cast<int64_t>(size));
  if (!fd) return false;
  auto sha = Sha256OfFd(*fd, path);
  close(*fd);
  return sha && *sha == sha256;
}

// The saved ranks whose files rank `rank` restores: its own, or every saved rank's for another
// world size (an elastic job). Empty when the step has none of its files.
std::vector<int> RanksToRestore(const CheckpointManifest& m, int rank, bool every) {
  std::vector<int> ranks;
  if (every) {
    for (const auto& [saved_rank, files] : m.ranks) ranks.push_back(saved_rank);
  } else if (m.ranks.count(rank)) {
    ranks.push_back(rank);
  }
  return ranks;
}

}  // namespace

Reply Daemon::Restore(const Request& r, const Peer& peer) {
  if (Status st = auth_->Check(peer, "restore", r.job_id); !st) return Error(st.message());
  auto owner = auth_->FileOwner(peer, r.job_id);
  if (!owner) return Error("restore: " + owner.message());
  UserIdentity id = IdentityOf(*owner);
  if (r.upload.empty()) return RestoreLocal(r, id);
  // A file:// store is read with the owner's rights (PosixConfig::identity).
  auto store_r = stores_->Get(r.upload, id);
  if (!store_r) return Error("restore: " + store_r.message());
  ObjectStore& store = **store_r;
  TransferOptions topt = uploader_->Transfer();
  // Only the jobs' directories ("job-*"): never a walk of whatever else the store's root holds.
  auto steps = ListSteps(store, "", topt);
  // Rank 0's decision waits for a step on its way, through a store that does not answer yet too.
  if (r.probe) steps = AwaitCommittedStep(store, r, std::move(steps));
  if (!steps) return Error("restore: " + steps.message());
  Reply reply;
  std::map<std::string, bool> job_allowed;
  for (const auto& s : *steps) {
    if (!s.has_manifest) continue;
    if (r.max_step >= 0 && s.step > r.max_step) continue;
    auto it = job_allowed.find(s.job_id);
    if (it == job_allowed.end()) {
      bool allowed = s.job_id == r.job_id || StoredJobOwner(store, s.job_id) == static_cast<int64_t>(id.uid);
      it = job_allowed.emplace(s.job_id, allowed).first;
    }
    if (!it->second) continue;
    if (RestoreStep(store, s, r, id, &reply)) return reply;
  }
  (void)Journal({Now(), config_.node, r.job_id, event_kind::kFreshStart, r.rank, -1,
                 "no complete checkpoint in " + store.Describe()});
  return reply;
}

Result<std::vector<StepRef>> Daemon::AwaitCommittedStep(ObjectStore& store, const Request& r,
                                                        Result<std::vector<StepRef>> steps) {
  if (config_.restore_wait_s <= 0) return steps;
  const auto has = [&](const Result<std::vector<StepRef>>& listing, int64_t step) {
    return listing.ok() && std::any_of(listing->begin(), listing->end(), [&](const StepRef& s) {
             return s.job_id == r.job_id && s.step == step && s.has_manifest;
           });
  };
  int64_t newest = -1;  // the job's own newest step in storage that claims to be complete
  for (const auto& s : steps.ok() ? *steps : std::vector<StepRef>{}) {
    if (s.job_id == r.job_id && s.has_manifest) newest = std::max(newest, s.step);
  }
  std::vector<PublishedJournal> published;  // other nodes' commits; none without journal_uri
  if (publisher_) {
    std::vector<std::string> notes;
    auto got = ReadPublishedJournals(publisher_->store(), r.job_id, "", publisher_->Transfer(), &notes);
    if (got.ok()) published = std::move(*got);
  }
  auto timeline = JobTimeline(r.job_id, std::move(published));
  if (!timeline) return steps;
  const auto awaited = StepAwaitingUpload(*timeline, r.world_size, newest);
  if (!awaited || (r.max_step >= 0 && *awaited > r.max_step)) return steps;
  const double start = Now();
  bool complete = false;
  while (!(complete = has(steps, *awaited)) && !stop_ && Now() - start < config_.restore_wait_s) {
    usleep(1000 * 1000);
    // A store that does not answer meanwhile is asked again at the next second; its last
    // answer stands.
    if (auto again = ListSteps(store, "", uploader_->Transfer()); again.ok() || !steps.ok()) {
      steps = std::move(again);
    }
  }
  (void)Journal({Now(), config_.node, r.job_id, event_kind::kRestoreWaited, r.rank, *awaited,
                 "waited_s=" + FormatFixed(Now() - start, 1) + " complete=" + (complete ? "yes" : "no") +
                     (complete ? "" : " (restore_wait_s=" + std::to_string(config_.restore_wait_s) +
                                          "): an older step is resumed")});
  return steps;
}

bool Daemon::RestoreStep(ObjectStore& store, const StepRef& s, const Request& r, const UserIdentity& id,
                         Reply* reply) {
  const std::string label = "step " + std::to_string(s.step) + " of job " + s.job_id;
  auto m = ReadStepManifest(store, s.job_id, s.step, uploader_->Transfer());
  if (!m) {
    reply->restore.skipped.push_back(label + ": " + m.message());
    return false;
  }
  // Another world size: only for an elastic job, which then gets every saved rank's files.
  const bool reshard = m->world_size != r.world_size;
  if (reshard && !r.reshard) {
    reply->restore.skipped.push_back(label + ": written by " + std::to_string(m->world_size) +
                                     " ranks, this job has " + std::to_string(r.world_size));
    return false;
  }
  // Every saved rank's files: for another world size, or for a DCP checkpoint (whose ranks read
  // each other's files: IsDcpStep).
  const bool every = reshard || IsDcpStep(*m);
  const std::vector<int> ranks = RanksToRestore(*m, r.rank, every);
  if (ranks.empty()) {
    reply->restore.skipped.push_back(label + ": no files of rank " + std::to_string(r.rank));
    return false;
  }
  if (r.probe) {  // decide only: the ranks restore this step next, each on its node
    reply->restore.step = s.step;
    reply->restore.source_job = s.job_id;
    reply->restore.world_size = m->world_size;
    return true;
  }
  // The node's ranks of an elastic job all want every saved rank's files: one at a time, so
  // that the later ones find the earlier one's copies intact instead of fetching them again.
  std::unique_lock<std::mutex> reshard_lock(reshard_mu_, std::defer_lock);
  if (every) reshard_lock.lock();
  uint64_t local_bytes = 0, fetched_bytes = 0;
  Status dl = FetchStep(store, s, *m, ranks, r, id, &local_bytes, &fetched_bytes);
  if (!dl.ok()) {
    reply->restore.skipped.push_back(label + ": " + dl.message());
    (void)Journal({Now(), config_.node, r.job_id, event_kind::kCkptRestoreSkipped, r.rank, s.step, dl.message()});
    return false;
  }
  // With another world size a rank beyond the saved ones reads rank 0's copy (replicated
  // state is the same in every rank's; sharded state is read through the step directory).
  const int own = m->ranks.count(r.rank) ? r.rank : 0;
  const std::string dest = RankStepDir(r.ckpt_dir, s.step, own);
  reply->restore.step = s.step;
  reply->restore.source_job = s.job_id;
  reply->restore.dir = dest;
  reply->restore.step_dir = dest.substr(0, dest.rfind('/'));
  reply->restore.world_size = m->world_size;
  reply->restore.bytes_local = local_bytes;
  reply->restore.bytes_fetched = fetched_bytes;
  std::string what = every ? StepKeyPrefix(s.job_id, s.step) + " (" + std::to_string(ranks.size()) +
                                   " ranks, written by " + std::to_string(m->world_size) + ")"
                             : RankKeyPrefix(s.job_id, s.step, r.rank);
  (void)Journal({Now(), config_.node, r.job_id, event_kind::kCkptRestored, r.rank, s.step,
                 store.Describe() + "/" + what + " -> " + (every ? reply->restore.step_dir : dest) +
                     " bytes_local=" + std::to_string(local_bytes) +
                     " bytes_fetched=" + std::to_string(fetched_bytes)});
  return true;
}

Status Daemon::FetchStep(ObjectStore& store, const StepRef& s, const CheckpointManifest& m,
                         const std::vector<int>& ranks, const Request& r, const UserIdentity& id,
                         uint64_t* local_bytes, uint64_t* fetched_bytes) {
  for (int saved_rank : ranks) {
    const std::string dest = RankStepDir(r.ckpt_dir, s.step, saved_rank);
    // What the node already holds (an in-place restart, or a requeued run back on this node) is
    // used as it is when it matches the manifest; only missing or damaged files are fetched.
    std::vector<DownloadItem> items;
    for (const auto& f : m.ranks.at(saved_rank).files) {
      if (LocalCopyIntact(id, dest + "/" + f.path, f.size, f.sha256)) {
        *local_bytes += f.size;
        continue;
      }
      items.push_back({RankFileKey(s.job_id, s.step, saved_rank, f.path), dest + "/" + f.path, f.size,
                       f.sha256, f.mode});
      *fetched_bytes += f.size;
    }
    if (items.empty()) continue;
    // Straight into the job's directory, as its owner: their quota and permissions hold, and
    // nothing is staged in root's space (the transfer's worker threads only write into the
    // files this thread opened as the user).
    AsUser as(id);
    if (Status dl = DownloadFiles(store, items, uploader_->Transfer()); !dl.ok()) return dl;
  }
  return Status::Ok();
}

Reply Daemon::RestoreLocal(const Request& r, const UserIdentity& id) {
  std::string ckpt_dir = r.ckpt_dir;
  while (ckpt_dir.size() > 1 && ckpt_dir.back() == '/') ckpt_dir.pop_back();
  auto steps = db_->Steps(ckpt_dir);
  if (!steps) return Error("restore: " + steps.message());
  Reply reply;
  for (const auto& s : *steps) {
    if (s.state != "COMPLETE-LOCAL") continue;
    if (r.max_step >= 0 && s.step > r.max_step) continue;
    const std::string label = "step " + std::to_string(s.step) + " in " + ckpt_dir;
    auto commits = db_->LocalCommits(ckpt_dir, s.step);
    if (!commits) return Error("restore: " + commits.message());
    const CommitRecord* mine = nullptr;
    for (const auto& c : *commits) {
      if (c.rank == r.rank && c.state == "local") mine = &c;
    }
    if (!mine) {
      reply.restore.skipped.push_back(label + ": rank " + std::to_string(r.rank) + " did not commit it on this node");
      continue;
    }
    if (mine->uid != id.uid || mine->world_size != r.world_size) {
      reply.restore.skipped.push_back(label + ": written by another user or world size");
      continue;
    }
    if (r.probe) {  // decide only: the files are verified by the restore that follows
      reply.restore.step = s.step;
      reply.restore.source_job = s.job_id;
      return reply;
    }
    auto files = db_->Files(mine->id);
    if (!files) return Error("restore: " + files.message());
    const std::string dir = RankStepDir(ckpt_dir, s.step, r.rank);
    const std::string problem = VerifyLocalFiles(id, dir, *files);
    if (!problem.empty()) {
      reply.restore.skipped.push_back(label + ": " + problem);
      continue;
    }
    reply.restore.step = s.step;
    reply.restore.source_job = s.job_id;
    reply.restore.dir = dir;
    reply.restore.step_dir = dir.substr(0, dir.rfind('/'));
    reply.restore.world_size = mine->world_size;
    (void)Journal({Now(), config_.node, r.job_id, event_kind::kCkptRestored, r.rank, s.step, "local " + dir});
    return reply;
  }
  (void)Journal({Now(), config_.node, r.job_id, event_kind::kFreshStart, r.rank, -1,
           "no complete local checkpoint in " + ckpt_dir});
  return reply;
}

}  // namespace autopar
