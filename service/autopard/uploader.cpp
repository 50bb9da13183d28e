#include "uploader.h"

#include <dirent.h>
#include <json/json.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "core/ckpt/ckpt_layout.h"
#include "core/ckpt/ckpt_manifest.h"
#include "core/ckpt/ckpt_retention.h"
#include "core/ckpt/ckpt_store.h"
#include "core/ckpt/ckpt_uri.h"
#include "core/ckpt/commit_state.h"
#include "core/ckpt/sha256.h"
#include "core/failure/timeline.h"
#include "core/proto/proto_client.h"
#include "core/text.h"
#include "core/unique_fd.h"
#include "job_files_env.h"
#include "log.h"
#include "service/storage/storage_backends.h"
#include "service/user_access/user_fs.h"

namespace autopar {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string JobOwnerKey(const std::string& job_id) { return JobKeyPrefix(job_id) + "owner.json"; }

int64_t ReadJobOwner(ObjectStore& store, const std::string& job_id, const TransferOptions& options) {
  auto exists = ObjectExists(store, JobOwnerKey(job_id), options);
  if (!exists || !*exists) return -1;
  // Trusted only as autopard wrote it: a record another user could have written or replaced
  // (file:// targets: wrong owner, group/other-writable, a symlink) names nobody.
  if (Status st = store.CheckWrittenOnlyByUs(JobOwnerKey(job_id)); !st) {
    Log(LogLevel::kWarning, "%s/%s: ownership record ignored: %s", store.Describe().c_str(),
        JobOwnerKey(job_id).c_str(), st.message().c_str());
    return -1;
  }
  auto text = GetSmallObject(store, JobOwnerKey(job_id), options);
  if (!text) return -1;
  Json::Value v;
  Json::CharReaderBuilder b;
  std::string errs;
  std::unique_ptr<Json::CharReader> reader(b.newCharReader());
  if (!reader->parse(text->data(), text->data() + text->size(), &v, &errs) || !v.isObject() ||
      !v["uid"].isUInt() || !v["job_id"].isString() || v["job_id"].asString() != job_id) {
    return -1;
  }
  return v["uid"].asUInt();
}

Result<std::shared_ptr<ObjectStore>> StoreCache::Get(const std::string& uri, const UserIdentity& as) {
  auto parsed = ParseCheckpointUri(uri);
  if (!parsed) return parsed.status();
  const std::string canonical = parsed->ToString();
  const bool file = parsed->kind == CheckpointUri::Kind::kFile;
  // (a user's groups can change: a store made with the old ones goes when it is evicted)
  const std::string key = file ? canonical + "#" + std::to_string(as.uid) + ":" + std::to_string(as.gid) : canonical;
  std::lock_guard<std::mutex> l(mu_);
  if (auto f = fixed_.find(canonical); f != fixed_.end()) return f->second;
  auto it = stores_.find(key);
  if (it != stores_.end()) {
    it->second.used = ++clock_;
    return it->second.store;
  }
  if (parsed->kind == CheckpointUri::Kind::kS3 && s3_.endpoint.empty()) {
    return Status::Error(uri + ": this node's autopard has no S3 endpoint (s3_endpoint in autopard.conf)");
  }
  PosixConfig posix = posix_;
  posix.identity = WithGroups(as);  // looked up once, not at every call of the store
  auto store = OpenObjectStore(*parsed, s3_, posix);
  if (!store) return store.status();
  if (stores_.size() >= kMaxStores) {
    auto oldest = stores_.begin();
    for (auto e = stores_.begin(); e != stores_.end(); ++e) {
      if (e->second.used < oldest->second.used) oldest = e;
    }
    stores_.erase(oldest);
  }
  std::shared_ptr<ObjectStore> shared(std::move(*store));
  stores_[key] = Entry{shared, ++clock_};
  return shared;
}

void StoreCache::Reconfigure(const S3Config& s3, const PosixConfig& posix) {
  std::lock_guard<std::mutex> l(mu_);
  s3_ = s3;
  posix_ = posix;
  stores_.clear();
}

bool StoreCache::HasS3Endpoint() {
  std::lock_guard<std::mutex> l(mu_);
  return !s3_.endpoint.empty();
}

Status StoreCache::Set(const std::string& uri, std::shared_ptr<ObjectStore> store) {
  auto parsed = ParseCheckpointUri(uri);
  if (!parsed) return parsed.status();
  std::lock_guard<std::mutex> l(mu_);
  fixed_[parsed->ToString()] = std::move(store);
  return Status::Ok();
}

size_t StoreCache::size() {
  std::lock_guard<std::mutex> l(mu_);
  return stores_.size();
}

std::chrono::milliseconds FailedUploadRetryDelay(std::chrono::seconds initial, std::chrono::seconds max,
                                                 int retry, double u) {
  Backoff b(BackoffPolicy{initial, max, 2.0, 0, std::chrono::milliseconds(0)}, [] { return 0.0; });
  const auto ceiling = b.Ceiling(std::max(retry, 1));
  u = std::min(std::max(u, 0.0), 1.0);
  return std::chrono::milliseconds(
      static_cast<int64_t>(static_cast<double>(ceiling.count()) * (1.0 - 0.25 * u)));
}

Uploader::Uploader(StateDb* db, const DaemonConfig& config, StoreCache* stores, Journal journal,
                   Clock clock, Backoff::Uniform uniform)
    : db_(db), config_(config), stores_(stores), journal_(std::move(journal)),
      pool_(config.concurrency),
      clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })),
      uniform_(uniform ? std::move(uniform) : DefaultUniform()) {
  dispatcher_ = std::thread([this] { Dispatch(); });
  retry_timer_ = std::thread([this] { RetryTimer(); });
}

void Uploader::RetryTimer() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping_) {
    // Until the earliest due retry, checked at least every second (an injected clock moves
    // independently of real time; a retry scheduled meanwhile notifies timer_cv_).
    auto wait = std::chrono::milliseconds(1000);
    const auto now = clock_();
    for (const auto& [id, s] : retrying_) {
      wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(s.due - now));
    }
    if (wait > std::chrono::milliseconds(0)) timer_cv_.wait_for(l, wait);
    if (stopping_) return;
    l.unlock();
    RetryDue();
    l.lock();
  }
}

void Uploader::RetryDue() {
  std::vector<int64_t> due;
  {
    std::lock_guard<std::mutex> l(mu_);
    const auto now = clock_();
    for (const auto& [id, s] : retrying_) {
      if (s.due <= now) due.push_back(id);
    }
  }
  for (int64_t id : due) Enqueue(id);
}

Uploader::~Uploader() { Stop(); }

TransferOptions Uploader::Transfer() const {
  TransferOptions t;
  t.part_size = config_.part_size;
  t.concurrency = config_.concurrency;
  t.backoff = config_.retry;
  t.cancel = &stopping_;
  return t;
}

Status Uploader::ResumePending() {
  auto pending = db_->PendingCommits();
  if (!pending) return pending.status();
  for (const auto& c : *pending) Enqueue(c.id);
  if (!pending->empty()) Log(LogLevel::kNotice, "resumed %zu pending uploads", pending->size());
  RetryFailed("", 0);
  return Status::Ok();
}

void Uploader::RetryFailed(const std::string& upload, int64_t except) {
  auto failed = db_->RetryableCommits(upload);
  if (!failed) {
    Log(LogLevel::kError, "%s", failed.message().c_str());
    return;
  }
  for (const auto& c : *failed) {
    if (c.id != except) Enqueue(c.id);
  }
}

void Uploader::Enqueue(int64_t commit_id, const CommitRecord* known) {
  bool wake = false;
  auto a = std::make_shared<Active>();
  std::optional<CommitRecord> read;
  if (!known) {
    if (auto c = db_->GetCommit(commit_id)) read = std::move(*c);
    if (read) known = &*read;
  }
  if (known) {
    a->job_id = known->job_id;
    a->step = known->step;
    a->rank = known->rank;
    a->save_s = known->save_s;
    a->total = known->bytes;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    if (active_.count(commit_id)) return;
    // A retry (timer, restart or a later success) replaces the commit's scheduled timer retry and
    // its earlier (failed) entry in the status; it counts the attempts.
    if (auto r = retrying_.find(commit_id); r != retrying_.end()) {
      a->attempt = r->second.active->attempt + 1;
      retrying_.erase(r);
    }
    finished_.erase(std::remove_if(finished_.begin(), finished_.end(),
                                   [&](const auto& f) { return f.first == commit_id; }),
                    finished_.end());
    a->start = std::chrono::steady_clock::now();
    active_[commit_id] = a;
    queue_.push_back(commit_id);
    // Dispatch can start it now; else a running upload's end wakes Dispatch. (A wake-up that
    // changes nothing costs the commit path a context switch.)
    wake = running_ < config_.max_active_uploads;
  }
  if (wake) cv_.notify_all();
}

void Uploader::Dispatch() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] {
      return stopping_ || (!queue_.empty() && running_ < config_.max_active_uploads);
    });
    if (stopping_) return;
    int64_t id = queue_.front();
    queue_.pop_front();
    auto active = active_[id];
    ++running_;
    // Threads are started and the finished ones joined without the lock, which Enqueue (the
    // commit path) takes.
    std::list<std::thread> finished;
    for (auto it = workers_.begin(); it != workers_.end();) {
      auto next = std::next(it);
      if (std::find(done_.begin(), done_.end(), it->get_id()) != done_.end()) {
        finished.splice(finished.end(), workers_, it);
      }
      it = next;
    }
    done_.clear();
    l.unlock();
    for (auto& t : finished) t.join();
    std::thread t([this, id, active] { Process(id, active); });
    l.lock();
    workers_.push_back(std::move(t));
  }
}

void Uploader::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_.exchange(true)) {
      // Already stopping: fall through to join whatever is left.
    }
  }
  cv_.notify_all();
  timer_cv_.notify_all();
  if (dispatcher_.joinable()) dispatcher_.join();
  if (retry_timer_.joinable()) retry_timer_.join();
  std::list<std::thread> workers;
  {
    std::lock_guard<std::mutex> l(mu_);
    workers.swap(workers_);
  }
  for (auto& t : workers) {
    if (t.joinable()) t.join();
  }
}

void Uploader::WaitIdle() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return (queue_.empty() && running_ == 0) || stopping_; });
}

Uploader::Counts Uploader::CurrentCounts() {
  Counts c;
  c.bytes_sent = bytes_sent_.load();
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [id, a] : active_) ++(a->state == "queued" ? c.queued : c.running);
  c.waiting_retry = static_cast<int64_t>(retrying_.size());
  c.steps_watched = watching_.load();
  return c;
}

std::vector<UploadInfo> Uploader::Progress(const std::string& job_id) {
  std::vector<UploadInfo> out;
  std::lock_guard<std::mutex> l(mu_);
  auto add = [&](const Active& a) {
    if (!job_id.empty() && a.job_id != job_id) return;
    UploadInfo u;
    u.job_id = a.job_id;
    u.step = a.step;
    u.rank = a.rank;
    u.state = a.state;
    u.bytes_done = a.done.load();
    u.bytes_total = a.total;
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - a.start).count();
    if (a.state == "uploading" && secs > 0) {
      u.throughput_bps = static_cast<double>(u.bytes_done) / secs;
      if (u.throughput_bps > 0) {
        u.eta_s = static_cast<double>(u.bytes_total - std::min(u.bytes_done, u.bytes_total)) /
                  u.throughput_bps;
      }
    }
    u.error = a.error;
    out.push_back(std::move(u));
  };
  for (const auto& [id, a] : active_) add(*a);
  const auto now = clock_();
  for (const auto& [id, s] : retrying_) {
    add(*s.active);
    if (!out.empty() && (job_id.empty() || s.active->job_id == job_id)) {
      out.back().next_retry_s =
          std::max(0.0, std::chrono::duration<double>(s.due - now).count());
    }
  }
  for (const auto& [id, a] : finished_) {
    if (!retrying_.count(id)) add(*a);
  }
  return out;
}

// "save_s=1.234 " before a ckpt_committed event's text, when the program measured it.
static std::string SaveField(double save_s) {
  return save_s >= 0 ? "save_s=" + FormatFixed(save_s, 3) + " " : "";
}

void Uploader::Emit(const CommitRecord& c, const std::string& kind, const std::string& detail) {
  JournalEvent e;
  e.time = Now();
  e.node = config_.node;
  e.job_id = c.job_id;
  e.kind = kind;
  e.rank = c.rank;
  e.step = c.step;
  e.detail = detail;
  if (journal_) journal_(e);
}

void Uploader::Process(int64_t commit_id, std::shared_ptr<Active> active) {
  RunInBackground();
  Status st;
  bool permanent = true;
  auto c = db_->GetCommit(commit_id);
  if (!c) {
    st = c.status();
  } else {
    {
      std::lock_guard<std::mutex> l(mu_);
      active->state = c->upload.empty() ? "hashing" : "uploading";
      active->start = std::chrono::steady_clock::now();
      // A failed upload queued by a restart (or a later success) before any timer retry.
      if (c->state == "failed" && active->attempt == 0) active->attempt = 1;
    }
    auto recorded = ParseCommitState(c->state);
    active->recorded = recorded ? *recorded : CommitState::kQueued;
    if (c->state == "queued") {
      JournalEvent e{c->created, config_.node, c->job_id, "ckpt_committed", c->rank, c->step,
                     SaveField(active->save_s) + std::to_string(c->bytes) + " bytes" +
                         (c->upload.empty() ? std::string(" (local only)") : " -> " + c->upload)};
      if (journal_) journal_(e);
    }
    // Local-only commits have nothing to retry: their files are the checkpoint.
    permanent = c->upload.empty();
    st = c->upload.empty() ? FinishLocal(*c, *active) : Upload(*c, *active, &permanent);
  }
  bool keep_pending = !st.ok() && stopping_;
  bool retry = false;
  std::chrono::milliseconds retry_in{0};
  if (c && !keep_pending) {
    retry = !st.ok() && !permanent;
    if (retry) {
      retry_in = FailedUploadRetryDelay(config_.upload_retry_initial, config_.upload_retry_max,
                                        active->attempt + 1, uniform_());
      st = Status::Error(st.message() + " (kept: retried where it stopped on a timer with backoff, "
                         "when autopard restarts or when a later upload to " + c->upload + " succeeds)");
    }
    // A local-only commit recorded its own transition (FinishLocal: before it counts the ranks).
    if (!st.ok()) {
      Transition(*c, *active, CommitEvent::kFailed, st.message(), retry);
    } else if (!c->upload.empty()) {
      Transition(*c, *active, CommitEvent::kUploaded, "", false);
      if (on_uploaded_) {
        on_uploaded_(c->bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - active->start).count());
      }
    }
    if (!st.ok()) {
      // A timer retry that fails again on storage is not a new failure: its error is in the next
      // ckpt_upload_retry event and in `autopar ckpt status`.
      if (!retry || c->state != "failed") Emit(*c, "ckpt_failed", st.message());
      Log(LogLevel::kWarning, "job %s step %lld rank %d: upload failed%s: %s", c->job_id.c_str(),
          static_cast<long long>(c->step), c->rank,
          retry ? (" (next attempt in " + std::to_string(retry_in.count() / 1000) + " s)").c_str()
                : "",
          st.message().c_str());
    }
  }
  // Storage answers again: uploads to it that failed earlier resume where they stopped (queued
  // before this one counts as finished, so WaitIdle sees them).
  if (st.ok() && c && !c->upload.empty() && !stopping_) RetryFailed(c->upload, commit_id);
  std::lock_guard<std::mutex> l(mu_);
  active->state = keep_pending ? "queued" : (st.ok() ? (c && c->upload.empty() ? "local" : "uploaded") : "failed");
  active->error = st.ok() ? "" : st.message();
  active_.erase(commit_id);
  finished_.emplace_back(commit_id, active);
  while (finished_.size() > 64) finished_.pop_front();
  if (retry && !stopping_) {
    retrying_[commit_id] = Scheduled{active, clock_() + retry_in};
    timer_cv_.notify_all();
  }
  --running_;
  done_.push_back(std::this_thread::get_id());
  cv_.notify_all();
}

Status Uploader::FinishLocal(const CommitRecord& c, Active& active) {
  auto files = db_->Files(c.id);
  if (!files) return files.status();
  UserIdentity id{c.uid, c.gid};
  std::string dir = RankStepDir(c.ckpt_dir, c.step, c.rank);
  for (auto& f : *files) {
    if (!f.sha256.empty()) continue;
    auto fd = OpenUserFile(id, dir + "/" + f.path, static_cast<int64_t>(f.size));
    if (!fd) {
      return Status::Error("committed file missing or changed, step " + std::to_string(c.step) +
                           " of this rank cannot complete: " + fd.message());
    }
    UniqueFd guard(*fd);
    auto sha = Sha256OfFd(*fd, dir + "/" + f.path);
    if (!sha) return sha.status();
    if (Status s = RecordFile(c.id, f, FileEvent::kHashed, *sha); !s) return s;
    active.done += f.size;
  }
  // Recorded before the count below, so that the node's last rank to get here sees every other.
  Transition(c, active, CommitEvent::kHashedLocal, "", false);
  Emit(c, "ckpt_committed", SaveField(active.save_s) + "local " + dir);
  // COMPLETE-LOCAL when every rank of the job on this node has committed this step.
  auto commits = db_->LocalCommits(c.ckpt_dir, c.step);
  if (!commits) return commits.status();
  int done = 0;
  for (const auto& o : *commits) {
    if (o.job_id == c.job_id && (o.state == "local" || o.id == c.id)) ++done;
  }
  if (done >= std::max(1, c.local_world_size)) {
    if (Status s = db_->SetStepState(c.job_id, c.step, c.ckpt_dir, "COMPLETE-LOCAL"); !s) return s;
    Emit(c, "ckpt_complete", "local " + c.ckpt_dir + " (" + std::to_string(done) + " ranks on " +
                                 config_.node + ")");
    Retention(c, nullptr);
  }
  return Status::Ok();
}

// Records an upload's progress in the state database (core's UploadLog), each through the file
// table's transitions (RecordFile): a restarted autopard resumes from it.
class Uploader::CommitLog : public UploadLog {
 public:
  CommitLog(Uploader* uploader, int64_t commit_id, std::vector<FileRecord>* files)
      : uploader_(uploader), commit_id_(commit_id), files_(files) {}
  Status Hashed(size_t i, const std::string& sha256) override {
    return Record(i, FileEvent::kHashed, sha256);
  }
  Status MultipartStarted(size_t i, const std::string& upload_id) override {
    return Record(i, FileEvent::kMultipartStarted, upload_id);
  }
  Status PartSent(size_t i, const SentPart& part) override {
    return uploader_->RecordFile(commit_id_, (*files_)[i], FileEvent::kPartSent, "", &part);
  }
  Status MultipartDropped(size_t i) override { return Record(i, FileEvent::kMultipartDropped, ""); }
  Status Uploaded(size_t i, const std::string& etag) override {
    const bool multipart = !(*files_)[i].upload_id.empty();
    return Record(i, multipart ? FileEvent::kMultipartCompleted : FileEvent::kPut, etag);
  }

 private:
  Status Record(size_t i, FileEvent event, const std::string& value) {
    return uploader_->RecordFile(commit_id_, (*files_)[i], event, value);
  }
  Uploader* const uploader_;
  const int64_t commit_id_;
  std::vector<FileRecord>* const files_;
};

void Uploader::Transition(const CommitRecord& c, Active& active, CommitEvent event,
                          const std::string& error, bool retry) {
  auto next = NextCommitState(active.recorded, event);
  if (!next) {
    // A bug in the uploader, never the user's: say so, record nothing.
    Log(LogLevel::kWarning, "job %s step %lld rank %d: %s", c.job_id.c_str(),
        static_cast<long long>(c.step), c.rank, next.message().c_str());
    return;
  }
  (void)db_->SetCommitState(c.id, CommitStateName(*next), error, active.total, retry);
  active.recorded = *next;
}

Status Uploader::RecordFile(int64_t commit_id, FileRecord& f, FileEvent event,
                            const std::string& value, const PartRecord* part) {
  std::lock_guard<std::mutex> lock(file_state_mu_);
  FileState from{f.uploaded ? FileTransfer::kUploaded
                            : f.upload_id.empty() ? FileTransfer::kUnsent : FileTransfer::kMultipart,
                 !f.sha256.empty()};
  auto next = NextFileState(from, event);
  if (!next) {
    // A bug in the uploader, never the user's: say so, record nothing.
    Log(LogLevel::kWarning, "commit %lld: %s: %s", static_cast<long long>(commit_id),
        f.path.c_str(), next.message().c_str());
    return Status::Error(f.path + ": " + next.message());
  }
  Status s;
  switch (event) {
    case FileEvent::kHashed:
      s = db_->SetFileSha256(commit_id, f.path, value);
      if (s) f.sha256 = value;
      break;
    case FileEvent::kMultipartStarted:
      s = db_->SetUploadId(commit_id, f.path, value);
      if (s) f.upload_id = value;
      break;
    case FileEvent::kPartSent:
      s = db_->AddPart(commit_id, f.path, *part);
      break;
    case FileEvent::kMultipartDropped:
      s = db_->SetUploadId(commit_id, f.path, "");
      if (s) f.upload_id.clear();
      break;
    case FileEvent::kPut:
    case FileEvent::kMultipartCompleted:
      s = db_->SetFileUploaded(commit_id, f.path, value);
      if (s) {
        f.uploaded = true;
        f.etag = value;
      }
      break;
  }
  return s;
}

Status Uploader::Upload(const CommitRecord& c, Active& active, bool* permanent) {
  *permanent = false;
  auto store = stores_->Get(c.upload, UserIdentity{c.uid, c.gid});
  if (!store) return store.status();
  auto files = db_->Files(c.id);
  if (!files) return files.status();
  if (c.state == "failed") {
    if (Status s = CheckRetry(c, active, **store, *files, permanent); !s) return s;
  }
  Transition(c, active, CommitEvent::kStartUpload, "", false);
  RankUpload upload{c.job_id, c.step, c.world_size, c.rank, RankStepDir(c.ckpt_dir, c.step, c.rank), {}};
  for (const auto& f : *files) {
    RankFile file(f.path);
    file.size = static_cast<int64_t>(f.size);
    file.resume = {f.sha256, f.upload_id, {}, f.uploaded, f.etag};
    if (!f.uploaded && !f.upload_id.empty()) {
      auto parts = db_->Parts(c.id, f.path);
      if (!parts) return parts.status();
      file.resume.parts = *parts;
      if (!parts->empty()) {
        Log(LogLevel::kInfo, "job %s step %lld rank %d: resuming multipart upload of %s with %zu of %llu parts already sent",
            c.job_id.c_str(), static_cast<long long>(c.step), c.rank,
            RankFileKey(c.job_id, c.step, c.rank, f.path).c_str(), parts->size(),
            static_cast<unsigned long long>((f.size + config_.part_size - 1) / std::max<uint64_t>(config_.part_size, 1)));
      }
    }
    upload.files.push_back(std::move(file));
  }
  {
    std::lock_guard<std::mutex> l(mu_);  // Progress reads it under mu_
    active.total = c.bytes;
  }
  // Written once per job, before its first object (the first owner stays); again when the record
  // is missing, invalid or untrusted (see ReadJobOwner).
  TransferOptions options = Transfer();
  if (ReadJobOwner(**store, c.job_id, options) < 0) {
    Json::Value owner_json;
    owner_json["uid"] = c.uid;
    owner_json["job_id"] = c.job_id;
    std::string owner = Json::writeString(Json::StreamWriterBuilder(), owner_json) + "\n";
    (void)PutSmallObject(**store, JobOwnerKey(c.job_id), owner, options);
  }
  JobFilesEnv env(UserIdentity{c.uid, c.gid}, &pool_);
  CommitLog log(this, c.id, &*files);
  options.env = &env;
  options.log = &log;
  options.multipart_threshold = MultipartThreshold(active, *files, **store);
  bool told = false;  // the engine's first call: what earlier runs sent
  options.progress = [&](uint64_t done, uint64_t) {
    if (told) bytes_sent_ += done - active.done;
    told = true;
    active.done = done;
  };
  UploadFailure failure;
  auto uploaded = UploadRank(**store, upload, options, &failure);
  if (!uploaded) {
    *permanent = failure.local;
    if (!failure.local) return uploaded.status();
    // Committed but gone, short or changed now (a crash before the program's writes reached the
    // disk, or files changed or deleted after the commit): this rank's step can never complete.
    return Status::Error("committed file missing or changed, step " + std::to_string(c.step) +
                         " of this rank cannot complete: " + uploaded.message());
  }
  return Published(c, *uploaded, *store);
}

// Whole-file PUT or multipart: with `multipart_threshold = auto`, by the files above part_size
// uploading on this node now, this commit's included (AutoMultipartThreshold).
uint64_t Uploader::MultipartThreshold(Active& active, const std::vector<FileRecord>& files,
                                      const ObjectStore& store) {
  const uint64_t part_size = config_.part_size;
  int mine = 0;
  for (const auto& f : files) mine += !f.uploaded && f.size > part_size ? 1 : 0;
  std::lock_guard<std::mutex> l(mu_);
  active.large_files = mine;
  if (config_.multipart_threshold > 0) return std::max(config_.multipart_threshold, part_size);
  size_t in_flight = 0;
  for (const auto& [aid, a] : active_) {
    in_flight += a->large_files >= 0 ? static_cast<size_t>(a->large_files) : (a->total > part_size ? 1 : 0);
  }
  return store.ReadsFiles() ? AutoMultipartThreshold(in_flight, config_.concurrency, part_size) : part_size;
}

void Uploader::AbortRecorded(const CommitRecord& c, ObjectStore& store, std::vector<FileRecord>& files) {
  for (auto& f : files) {
    if (f.uploaded || f.upload_id.empty()) continue;
    (void)store.AbortUpload(RankFileKey(c.job_id, c.step, c.rank, f.path), f.upload_id);
    (void)RecordFile(c.id, f, FileEvent::kMultipartDropped);
  }
}

Status Uploader::CheckRetry(const CommitRecord& c, Active& active, ObjectStore& store,
                            std::vector<FileRecord>& files, bool* permanent) {
  // A retry. Pointless once `keep` newer steps are complete: retention would delete it.
  if (c.keep > 0) {
    auto steps = db_->Steps(c.upload);
    if (!steps) return steps.status();
    int newer = 0;
    for (const auto& s : *steps) {
      if (s.job_id == c.job_id && s.step > c.step && s.state == "COMPLETE") ++newer;
    }
    if (newer >= c.keep) {
      *permanent = true;
      AbortRecorded(c, store, files);
      return Status::Error("not retried: " + std::to_string(newer) + " newer steps are complete (keep " +
                           std::to_string(c.keep) + ")");
    }
  }
  Emit(c, event_kind::kCkptUploadRetry, "attempt " + std::to_string(std::max(active.attempt, 1)) +
                                   ": resuming the upload to " + c.upload +
                                   " where it stopped (last error: " +
                                   c.error.substr(0, c.error.find(" (kept: ")) + ")");
  return Status::Ok();
}

Status Uploader::Published(const CommitRecord& c, const RankUploadResult& uploaded,
                           const std::shared_ptr<ObjectStore>& store) {
  Emit(c, "ckpt_uploaded", store->Describe() + "/" + RankKeyPrefix(c.job_id, c.step, c.rank) + " (" +
                               std::to_string(uploaded.bytes) + " bytes)");
  if (uploaded.step.complete) {
    (void)db_->SetStepState(c.job_id, c.step, c.upload, "COMPLETE");
    Emit(c, "ckpt_complete", store->Describe() + "/" + StepManifestKey(c.job_id, c.step));
  } else if (c.keep > 0) {
    // Another node will complete the step. Retention on this node's disk must still happen once
    // it does: a watcher thread looks for the step manifest for a while (the rank's own upload
    // is done, so the commit is finished).
    std::lock_guard<std::mutex> l(mu_);
    ++watching_;
    workers_.emplace_back([this, copy = c, store] {
      WatchForCompletion(copy, store);
      --watching_;
      // Joined by the dispatcher like an upload's thread: a finished thread left unjoined keeps
      // its stack (bench/soak/soak.py saw autopard's memory grow ~10 KiB per checkpoint step).
      std::lock_guard<std::mutex> done(mu_);
      done_.push_back(std::this_thread::get_id());
    });
    return Status::Ok();
  }
  Retention(c, store.get());
  return Status::Ok();
}

void Uploader::WatchForCompletion(const CommitRecord& c, std::shared_ptr<ObjectStore> store) {
  RunInBackground();
  TransferOptions quick = Transfer();
  quick.backoff.max_attempts = 2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  auto next = std::chrono::steady_clock::now();
  for (int i = 1; !stopping_ && std::chrono::steady_clock::now() < deadline;) {
    if (std::chrono::steady_clock::now() < next) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    auto exists = ObjectExists(*store, StepManifestKey(c.job_id, c.step), quick);
    if (exists && *exists) {
      (void)db_->SetStepState(c.job_id, c.step, c.upload, "COMPLETE");
      Retention(c, store.get());
      return;
    }
    // A newer step of the job is COMPLETE here: its retention ran (or runs) on this node and
    // covers this step's. Waiting on would keep a thread for ten minutes for every step that
    // never completes (a rank's upload failed): the soak saw ~20 such threads at a time.
    if (NewerStepComplete(c)) return;
    next = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::min(200 * i++, 5000));
  }
}

bool Uploader::NewerStepComplete(const CommitRecord& c) {
  auto steps = db_->Steps(c.upload);
  if (!steps) return false;
  for (const auto& s : *steps) {
    if (s.job_id == c.job_id && s.step > c.step && s.state == "COMPLETE") return true;
  }
  return false;
}

void Uploader::Retention(const CommitRecord& c, ObjectStore* store) {
  if (c.keep <= 0) return;
  RetentionPlan plan;
  if (store) {
    const std::string key = c.upload + "\n" + c.job_id;
    const auto now = clock_();
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = retention_paused_.find(key);
      if (it != retention_paused_.end() && now < it->second) return;
      if (it != retention_paused_.end()) retention_paused_.erase(it);
    }
    auto applied = ApplyRetention(*store, c.job_id, static_cast<int>(c.keep), Transfer());
    if (!applied) {
      {
        std::lock_guard<std::mutex> l(mu_);
        retention_paused_[key] = clock_() + kRetentionPause;
      }
      Emit(c, event_kind::kCkptRetentionFailed,
           applied.message() + " (tried again for a step committed " +
               std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kRetentionPause).count()) +
               " s from now)");
      return;
    }
    plan = *applied;
  } else {
    auto steps = db_->Steps(c.ckpt_dir);
    if (!steps) return;
    std::vector<StepStatus> st;
    for (const auto& s : *steps) {
      if (s.job_id == c.job_id) st.push_back({s.step, s.state == "COMPLETE-LOCAL"});
    }
    plan = PlanRetention(st, static_cast<int>(c.keep));
    for (int64_t step : plan.remove) (void)db_->DeleteStep(c.job_id, step, c.ckpt_dir);
  }
  if (!plan.latest_complete) return;
  // This node's disk: every step directory older than the newest complete step that the plan
  // does not keep (another node may already have deleted it from storage, so the storage plan
  // alone does not list it).
  UserIdentity id{c.uid, c.gid};
  std::vector<int64_t> local_steps;
  {
    AsUser as(id);
    if (DIR* d = opendir(c.ckpt_dir.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name.rfind("step-", 0) != 0 || name.size() < 6 ||
            name.find_first_not_of("0123456789", 5) != std::string::npos || name.size() > 20) {
          continue;
        }
        local_steps.push_back(std::stoll(name.substr(5)));
      }
      closedir(d);
    }
  }
  std::vector<int64_t> removed;
  for (int64_t step : local_steps) {
    if (step >= *plan.latest_complete) continue;
    if (std::find(plan.keep.begin(), plan.keep.end(), step) != plan.keep.end()) continue;
    Status s = RemoveTreeAsUser(id, c.ckpt_dir + "/step-" + std::to_string(step));
    if (s.ok()) {
      removed.push_back(step);
    } else {
      Emit(c, event_kind::kCkptRetentionFailed, s.message());
    }
  }
  for (int64_t step : plan.remove) {
    if (std::find(removed.begin(), removed.end(), step) == removed.end()) removed.push_back(step);
  }
  if (!removed.empty()) {
    std::sort(removed.begin(), removed.end());
    std::string list;
    for (int64_t s : removed) list += (list.empty() ? "" : ",") + std::to_string(s);
    Emit(c, "ckpt_retention", "removed steps " + list + " (keep " + std::to_string(c.keep) + ")");
  }
}

}  // namespace autopar
