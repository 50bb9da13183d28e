// Checkpoints as a job's ranks and its user see them: `commit` (a rank's step directory
// recorded and queued for upload, listed with the job owner's rights) and `ls` (the steps of a
// job or of a store, with what a user may see of them).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "core/ckpt/ckpt_layout.h"
#include "core/ckpt/ckpt_store.h"
#include "core/ckpt/ckpt_uri.h"
#include "daemon.h"
#include "daemon_internal.h"
#include "request_server.h"
#include "service/user_access/user_fs.h"

namespace autopar {

using daemon_detail::Error;
using daemon_detail::Now;

Reply Daemon::Commit(const Request& r, const Peer& peer) {
  if (Status st = auth_->Check(peer, "commit", r.job_id); !st) return Error(st.message());
  TraceRequestPhase("auth");
  auto owner = auth_->FileOwner(peer, r.job_id);
  if (!owner) return Error("commit: " + owner.message());
  TraceRequestPhase("owner");
  UserIdentity id = IdentityOf(*owner);
  TraceRequestPhase("identity");
  std::string upload;
  if (!r.upload.empty()) {
    auto uri = ParseCheckpointUri(r.upload);
    if (!uri) return Error("commit: " + uri.message());
    upload = uri->ToString();
    if (uri->kind == CheckpointUri::Kind::kS3 && !stores_->HasS3Endpoint()) {
      return Error("commit: " + upload + ": this node's autopard has no S3 endpoint (s3_endpoint in " +
                   "autopard.conf)");
    }
    if (uri->kind == CheckpointUri::Kind::kFile && id.uid != 0) {
      // autopard writes file:// targets as root: only into a directory the job's owner may write.
      AsUser as(id);
      if (faccessat(AT_FDCWD, uri->path.c_str(), W_OK | X_OK, AT_EACCESS) != 0) {
        return Error("commit: " + upload + ": " + std::strerror(errno) +
                     " (the job's owner must be able to write the upload directory)");
      }
    }
  }
  const std::string dir = RankStepDir(r.ckpt_dir, r.step, r.rank);
  TraceRequestPhase("uri");
  auto listed = ListRankFiles(id, dir);
  if (!listed) return Error("commit: " + listed.message());
  TraceRequestPhase("list");
  CommitRecord c;
  c.job_id = r.job_id;
  c.step = r.step;
  c.rank = r.rank;
  c.world_size = r.world_size;
  c.local_world_size = std::max(1, r.local_world_size);
  c.uid = id.uid;
  c.gid = id.gid;
  c.ckpt_dir = r.ckpt_dir;
  while (c.ckpt_dir.size() > 1 && c.ckpt_dir.back() == '/') c.ckpt_dir.pop_back();
  c.upload = upload;
  c.keep = r.keep;
  c.node = r.node.empty() ? config_.node : r.node;
  c.created = Now();
  c.save_s = r.save_s;
  std::vector<FileRecord> files;
  for (const auto& f : *listed) {
    if (Status st = ValidateRelativePath(f.path); !st) return Error("commit: " + dir + ": " + st.message());
    FileRecord fr;
    fr.path = f.path;
    fr.size = f.size;
    c.bytes += f.size;
    files.push_back(std::move(fr));
  }
  bool duplicate = false;
  auto idr = db_->AddCommit(c, files, &duplicate);
  if (!idr) return Error("commit: " + idr.message());
  TraceRequestPhase("db");
  if (!duplicate) uploader_->Enqueue(*idr, &c);
  TraceRequestPhase("enqueue");
  Reply reply;
  reply.commit.commit_id = *idr;
  reply.commit.files = static_cast<int>(files.size());
  reply.commit.bytes = c.bytes;
  reply.commit.duplicate = duplicate;
  return reply;
}

int64_t Daemon::StoredJobOwner(ObjectStore& store, const std::string& job_id) {
  TransferOptions t = uploader_->Transfer();
  t.backoff.max_attempts = 3;
  return ReadJobOwner(store, job_id, t);
}

Reply Daemon::List(const Request& r, const Peer& peer) {
  return r.upload.empty() ? ListJob(r, peer) : ListStoreOf(r, peer);
}

Status Daemon::ListStore(const std::string& uri, const std::string& job_id, const UserIdentity& as,
                         const std::function<bool(const std::string&)>& allowed,
                         std::vector<StepInfo>* out) {
  TransferOptions topt = uploader_->Transfer();
  auto store_r = stores_->Get(uri, as);
  if (!store_r) return store_r.status();
  ObjectStore& store = **store_r;
  auto steps = ListSteps(store, job_id, topt);
  if (!steps) return steps.status();
  for (const auto& s : *steps) {
    if (!allowed(s.job_id)) continue;
    StepInfo info;
    info.job_id = s.job_id;
    info.step = s.step;
    info.bytes = s.bytes;
    info.ranks = static_cast<int>(s.rank_manifests.size());
    info.uri = store.Describe();
    info.state = "INCOMPLETE";
    if (s.has_manifest) {
      auto m = ReadStepManifest(store, s.job_id, s.step, topt);
      if (m) {
        info.state = "COMPLETE";
        info.world_size = m->world_size;
      } else {
        info.state = "CORRUPT";
      }
    }
    out->push_back(std::move(info));
  }
  return Status::Ok();
}

Reply Daemon::ListStoreOf(const Request& r, const Peer& peer) {
  auto uri = ParseCheckpointUri(r.upload);
  if (!uri) return Error("ls: " + uri.message());
  std::map<std::string, bool> cache;
  bool privileged = auth_->IsPrivileged(peer.uid);
  // With the peer's own rights (a file:// store): nothing they could not list themselves.
  const UserIdentity as = privileged ? UserIdentity{0, 0} : IdentityOf(peer.uid);
  auto store_r = stores_->Get(uri->ToString(), as);
  if (!store_r) return Error("ls: " + store_r.message());
  std::shared_ptr<ObjectStore> store = *store_r;
  Reply reply;
  Status st = ListStore(uri->ToString(), "", as, [&](const std::string& job) {
    if (privileged) return true;
    auto it = cache.find(job);
    if (it != cache.end()) return it->second;
    bool ok = StoredJobOwner(*store, job) == static_cast<int64_t>(peer.uid);
    cache[job] = ok;
    return ok;
  }, &reply.steps);
  if (!st) return Error("ls: " + st.message());
  return reply;
}

Reply Daemon::ListJob(const Request& r, const Peer& peer) {
  if (Status st = auth_->Check(peer, "ls", r.job_id); !st) return Error(st.message());
  auto owner = auth_->FileOwner(peer, r.job_id);
  if (!owner) return Error("ls: " + owner.message());
  const UserIdentity owner_id = IdentityOf(*owner);
  auto commits = db_->Commits(r.job_id, 100000);
  if (!commits) return Error("ls: " + commits.message());
  std::set<std::string> uris;
  std::map<std::pair<std::string, int64_t>, StepInfo> local;
  for (const auto& c : *commits) {
    if (!c.upload.empty()) {
      uris.insert(c.upload);
      continue;
    }
    auto& info = local[{c.ckpt_dir, c.step}];
    info.job_id = c.job_id;
    info.step = c.step;
    info.uri = c.ckpt_dir;
    info.world_size = c.world_size;
    info.bytes += c.bytes;
    info.ranks += 1;
    info.state = "PARTIAL-LOCAL";
  }
  Reply reply;
  for (const auto& uri : uris) {
    Status st = ListStore(uri, r.job_id, owner_id, [](const std::string&) { return true; }, &reply.steps);
    if (!st) return Error("ls: " + st.message());
  }
  auto steps = db_->StepsOfJob(r.job_id);
  for (auto& [key, info] : local) {
    if (steps) {
      for (const auto& s : *steps) {
        if (s.where == key.first && s.step == key.second) info.state = s.state;
      }
    }
    reply.steps.push_back(info);
  }
  if (reply.steps.empty()) {
    return Error("ls: no checkpoints of job " + r.job_id + " are known to autopard on " + config_.node +
                 " (try 'autopar ckpt ls URI' with the job's --ckpt-upload)");
  }
  std::sort(reply.steps.begin(), reply.steps.end(),
            [](const StepInfo& a, const StepInfo& b) { return a.step > b.step; });
  return reply;
}

}  // namespace autopar
