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
#include "log.h"
#include "service/storage/storage_backends.h"
#include "service/user_access/user_fs.h"

namespace autopar {
namespace {

// Uploads are background work: their threads run at nice +10, so that commits (and the training
// program) get the CPU first on a busy node. Linux: setpriority on a thread id affects that thread.
void RunInBackground() {
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Closes the descriptors of a commit's files.
struct FdSet {
  std::vector<int> fds;
  ~FdSet() {
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }
};


Status ReadAt(int fd, std::string* buf, uint64_t offset, size_t size, const std::string& name) {
  buf->resize(size);
  size_t got = 0;
  while (got < size) {
    ssize_t n = pread(fd, buf->data() + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Error(name + ": " + std::strerror(errno));
    if (n == 0) return Status::Error(name + ": shorter than committed (changed after the commit?)");
    got += static_cast<size_t>(n);
  }
  return Status::Ok();
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

// Counts outstanding tasks and keeps the first error.
class Latch {
 public:
  void Add(int n = 1) {
    std::lock_guard<std::mutex> l(mu_);
    pending_ += n;
  }
  void Done(Status st) {
    std::lock_guard<std::mutex> l(mu_);
    if (!st.ok() && first_.ok()) first_ = st;
    if (--pending_ == 0) cv_.notify_all();
  }
  Status Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return pending_ == 0; });
    return first_;
  }
  bool failed() {
    std::lock_guard<std::mutex> l(mu_);
    return !first_.ok();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int pending_ = 0;
  Status first_;
};

TaskPool::TaskPool(int threads) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      RunInBackground();
      for (;;) {
        std::function<void()> task;
        {
          std::unique_lock<std::mutex> l(mu_);
          cv_.wait(l, [&] { return stop_ || !tasks_.empty(); });
          if (tasks_.empty()) return;
          task = std::move(tasks_.front());
          tasks_.pop_front();
        }
        task();
      }
    });
  }
}

TaskPool::~TaskPool() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void TaskPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> l(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
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
                     std::to_string(c->bytes) + " bytes" +
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
    FdSet guard{{*fd}};
    auto sha = Sha256OfFd(*fd, dir + "/" + f.path);
    if (!sha) return sha.status();
    if (Status s = RecordFile(c.id, f, FileEvent::kHashed, *sha); !s) return s;
    active.done += f.size;
  }
  // Recorded before the count below, so that the node's last rank to get here sees every other.
  Transition(c, active, CommitEvent::kHashedLocal, "", false);
  Emit(c, "ckpt_committed", "local " + dir);
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

// One commit's upload while it runs (Uploader::Upload and its steps): the commit, its store, its
// files with their descriptors, which go out in one PUT, and their SHA-256s as the hasher
// finds them.
struct Uploader::Run {
  Run(const CommitRecord& commit, Active& act, std::shared_ptr<ObjectStore> s)
      : c(commit), active(act), shared(std::move(s)), store(*shared),
        dir(RankStepDir(c.ckpt_dir, c.step, c.rank)) {}
  const CommitRecord& c;
  Active& active;
  std::shared_ptr<ObjectStore> shared;
  ObjectStore& store;
  const std::string dir;
  std::vector<FileRecord> files;
  FdSet fds;
  uint64_t total = 0;
  std::vector<bool> single;       // by file: one PUT (else multipart)
  std::vector<std::string> sha;   // by file, filled by the hasher
  Status hash_status;

  std::string Key(size_t i) const { return RankFileKey(c.job_id, c.step, c.rank, files[i].path); }
  std::string Name(size_t i) const { return dir + "/" + files[i].path; }
};

// One pass over the multipart files (a second one only restarts files whose upload vanished).
struct Uploader::Pass {
  explicit Pass(size_t n) : restart(n), all_parts_recorded(n, false), parts(n) {}
  Latch latch;
  std::vector<std::string> restart;  // by file: why its multipart upload must start over
  // Files whose every part was sent before a restart: the previous daemon may have completed the
  // upload (or died inside CompleteMultipartUpload), after which some stores answer the upload
  // id with errors other than NoSuchUpload.
  std::vector<bool> all_parts_recorded;
  std::vector<std::vector<PartRecord>> parts;
  std::mutex parts_mu;
};

Status Uploader::WithRetry(const std::function<StoreStatus()>& op, StoreStatus* last) {
  Backoff backoff(config_.retry, DefaultUniform());
  return RetryWithBackoff(
      [&](int) {
        *last = op();
        return last->ToAttempt();
      },
      backoff, RealRetryClock(), &stopping_);
}

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
  Run run(c, active, *store);
  auto files = db_->Files(c.id);
  if (!files) return files.status();
  run.files = *files;
  if (c.state == "failed") {
    if (Status s = CheckRetry(run, permanent); !s) return s;
  }
  Transition(c, active, CommitEvent::kStartUpload, "", false);
  if (Status s = OpenFiles(run, permanent); !s) return s;
  ChooseSinglePuts(run);
  std::thread hasher([this, &run] { HashFiles(run); });
  Status result = SendFiles(run);
  hasher.join();
  if (result.ok() && !run.hash_status.ok()) {
    *permanent = true;
    result = run.hash_status;
  }
  if (!result.ok()) {
    // Permanent: abort the multipart uploads so no partial object lingers. Otherwise (storage
    // unreachable past the retry budget) keep them and their recorded parts for the retry.
    if (*permanent && !stopping_) AbortMultipart(run);
    return result;
  }
  return PublishRank(run, permanent);
}

void Uploader::AbortMultipart(Run& run) {
  for (size_t i = 0; i < run.files.size(); ++i) {
    const FileRecord& f = run.files[i];
    if (!f.uploaded && !f.upload_id.empty()) {
      (void)run.store.AbortUpload(run.Key(i), f.upload_id);
      (void)RecordFile(run.c.id, run.files[i], FileEvent::kMultipartDropped);
    }
  }
}

Status Uploader::CheckRetry(Run& run, bool* permanent) {
  const CommitRecord& c = run.c;
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
      AbortMultipart(run);
      return Status::Error("not retried: " + std::to_string(newer) + " newer steps are complete (keep " +
                           std::to_string(c.keep) + ")");
    }
  }
  Emit(c, event_kind::kCkptUploadRetry, "attempt " + std::to_string(std::max(run.active.attempt, 1)) +
                                   ": resuming the upload to " + c.upload +
                                   " where it stopped (last error: " +
                                   c.error.substr(0, c.error.find(" (kept: ")) + ")");
  return Status::Ok();
}

Status Uploader::OpenFiles(Run& run, bool* permanent) {
  UserIdentity id{run.c.uid, run.c.gid};
  for (size_t i = 0; i < run.files.size(); ++i) {
    auto fd = OpenUserFile(id, run.Name(i), static_cast<int64_t>(run.files[i].size));
    if (!fd) {
      // Committed but gone or short now (a crash before the program's writes reached the disk,
      // or files changed or deleted after the commit): this rank's step can never complete.
      *permanent = true;
      AbortMultipart(run);
      return Status::Error("committed file missing or changed, step " + std::to_string(run.c.step) +
                           " of this rank cannot complete: " + fd.message());
    }
    run.fds.fds.push_back(*fd);
    run.total += run.files[i].size;
  }
  std::lock_guard<std::mutex> l(mu_);  // Progress and ChooseSinglePuts read it under mu_
  run.active.total = run.total;
  return Status::Ok();
}

void Uploader::ChooseSinglePuts(Run& run) {
  // Whole-file PUT or multipart, per file. A file with a recorded multipart upload resumes it.
  const uint64_t part_size = config_.part_size;
  uint64_t threshold = part_size;
  {
    int mine = 0;
    for (const auto& f : run.files) mine += !f.uploaded && f.size > part_size ? 1 : 0;
    std::lock_guard<std::mutex> l(mu_);
    run.active.large_files = mine;
    size_t in_flight = 0;
    for (const auto& [aid, a] : active_) {
      in_flight += a->large_files >= 0 ? static_cast<size_t>(a->large_files) : (a->total > part_size ? 1 : 0);
    }
    if (run.store.ReadsFiles() && config_.multipart_threshold > 0) {
      threshold = std::max(config_.multipart_threshold, part_size);
    } else if (run.store.ReadsFiles()) {
      threshold = AutoMultipartThreshold(in_flight, config_.concurrency, part_size);
    }
  }
  run.single.resize(run.files.size());
  for (size_t i = 0; i < run.files.size(); ++i) {
    run.single[i] = run.files[i].upload_id.empty() && run.files[i].size <= threshold;
  }
}

void Uploader::HashFiles(Run& run) {
  // Sequentially, while the files' parts go out.
  RunInBackground();
  run.sha.assign(run.files.size(), "");
  for (size_t i = 0; i < run.files.size(); ++i) {
    if (!run.files[i].sha256.empty()) {
      run.sha[i] = run.files[i].sha256;
      continue;
    }
    auto h = Sha256OfFd(run.fds.fds[i], run.Name(i));
    if (!h) {
      run.hash_status = h.status();
      return;
    }
    run.sha[i] = *h;
    (void)RecordFile(run.c.id, run.files[i], FileEvent::kHashed, *h);
  }
}

Status Uploader::SendFiles(Run& run) {
  Status result;
  for (int pass_no = 0; pass_no < 2 && result.ok(); ++pass_no) {
    Pass pass(run.files.size());
    for (size_t i = 0; i < run.files.size() && result.ok(); ++i) {
      if (run.files[i].uploaded) {
        if (pass_no == 0) run.active.done += run.files[i].size;
      } else if (run.single[i]) {
        SendSingle(run, i, pass.latch);
      } else {
        result = SendParts(run, i, pass);
      }
    }
    Status parts_status = pass.latch.Wait();
    if (result.ok()) result = parts_status;
    if (!result.ok()) break;
    bool again = false;
    for (size_t i = 0; i < run.files.size() && result.ok(); ++i) {
      if (run.files[i].uploaded || run.single[i]) continue;
      result = CompleteParts(run, i, pass, pass_no, &again);
    }
    if (!again) break;
  }
  return result;
}

void Uploader::SendSingle(Run& run, size_t i, Latch& latch) {
  latch.Add();
  pool_.Submit([this, &run, i, &latch] {
    ObjectStore& store = run.store;
    const FileRecord& f = run.files[i];
    const std::string key = run.Key(i);
    const int fd = run.fds.fds[i];
    std::string buf;
    Md5Digest md5{};
    Status s;
    StoreStatus last;
    const bool direct = store.ReadsFiles();  // streamed from the file, MD5 checked inside
    if (direct) {
      s = WithRetry([&] { return store.PutObjectFromFile(key, fd, f.size); }, &last);
    } else {
      s = ReadAt(fd, &buf, 0, static_cast<size_t>(f.size), run.Name(i));
      if (store.UsesMd5()) md5 = Md5Of(buf);
      if (s.ok()) s = WithRetry([&] { return store.PutObject(key, buf, md5); }, &last);
    }
    ObjectInfo info;
    if (s.ok()) s = WithRetry([&] { return store.Head(key, &info); }, &last);
    if (s.ok() && info.size != f.size) {
      s = Status::Error(store.Describe() + "/" + key + ": size " + std::to_string(info.size) +
                        " after upload, expected " + std::to_string(f.size));
    }
    if (s.ok() && !direct && store.UsesMd5() && IsLowerHex(info.etag, 32) &&
        info.etag != HexEncode(md5)) {
      s = Status::Error(store.Describe() + "/" + key + ": ETag " + info.etag +
                        " does not match the MD5 of " + run.Name(i));
    }
    if (s.ok()) s = RecordFile(run.c.id, run.files[i], FileEvent::kPut, info.etag);
    if (s.ok()) {
      run.active.done += f.size;
      bytes_sent_ += f.size;
    }
    latch.Done(s);
  });
}

Status Uploader::SendParts(Run& run, size_t i, Pass& pass) {
  // Multipart: resume the recorded upload or start one.
  FileRecord& f = run.files[i];
  const std::string key = run.Key(i);
  const uint64_t part_size = config_.part_size;
  if (f.upload_id.empty()) {
    std::string upload_id;
    StoreStatus last;
    Status s = WithRetry([&] { return run.store.CreateUpload(key, &upload_id); }, &last);
    if (s.ok()) s = RecordFile(run.c.id, f, FileEvent::kMultipartStarted, upload_id);
    if (!s.ok()) return s;
  }
  auto recorded = db_->Parts(run.c.id, f.path);
  if (!recorded) return recorded.status();
  const int nparts = static_cast<int>((f.size + part_size - 1) / part_size);
  pass.parts[i].assign(static_cast<size_t>(nparts), PartRecord{});
  for (const auto& p : *recorded) {
    if (p.part >= 1 && p.part <= nparts) {
      pass.parts[i][static_cast<size_t>(p.part - 1)] = p;
      run.active.done += std::min<uint64_t>(part_size, f.size - static_cast<uint64_t>(p.part - 1) * part_size);
    }
  }
  pass.all_parts_recorded[i] = static_cast<int>(recorded->size()) == nparts;
  if (!recorded->empty()) {
    Log(LogLevel::kInfo,
        "job %s step %lld rank %d: resuming multipart upload of %s with "
        "%zu of %d parts already sent",
        run.c.job_id.c_str(), static_cast<long long>(run.c.step), run.c.rank, key.c_str(),
        recorded->size(), nparts);
  }
  for (int pn = 1; pn <= nparts; ++pn) {
    if (pass.parts[i][static_cast<size_t>(pn - 1)].etag.empty()) SendPart(run, i, pn, pass);
  }
  return Status::Ok();
}

void Uploader::SendPart(Run& run, size_t i, int pn, Pass& pass) {
  pass.latch.Add();
  const std::string upload_id = run.files[i].upload_id;
  pool_.Submit([this, &run, i, pn, &pass, upload_id] {
    if (pass.latch.failed() || stopping_) {
      pass.latch.Done(stopping_ ? Status::Error("autopard is stopping") : Status::Ok());
      return;
    }
    ObjectStore& store = run.store;
    const std::string key = run.Key(i);
    const int fd = run.fds.fds[i];
    const uint64_t off = static_cast<uint64_t>(pn - 1) * config_.part_size;
    const uint64_t len = std::min<uint64_t>(config_.part_size, run.files[i].size - off);
    std::string etag, md5_hex;
    StoreStatus last;
    Status s;
    if (store.ReadsFiles()) {
      // Streamed from the file; the store checks the part's MD5 against its ETag, which for S3
      // is that MD5 (kept for the multipart ETag check).
      s = WithRetry([&] { return store.UploadPartFromFile(key, upload_id, pn, off, fd, len, &etag); }, &last);
      if (IsLowerHex(etag, 32)) md5_hex = etag;
    } else {
      std::string buf;
      s = ReadAt(fd, &buf, off, static_cast<size_t>(len), run.Name(i));
      Md5Digest md5{};
      if (store.UsesMd5()) {
        md5 = Md5Of(buf);
        md5_hex = HexEncode(md5);
      }
      if (s.ok()) s = WithRetry([&] { return store.UploadPart(key, upload_id, pn, off, buf, md5, &etag); }, &last);
    }
    if (!s.ok() && last.code == StoreStatus::Code::kNotFound) {
      std::lock_guard<std::mutex> l(pass.parts_mu);
      pass.restart[i] = s.message();
      pass.latch.Done(Status::Ok());
      return;
    }
    PartRecord rec{pn, etag, md5_hex};
    if (s.ok()) s = RecordFile(run.c.id, run.files[i], FileEvent::kPartSent, "", &rec);
    if (s.ok()) {
      std::lock_guard<std::mutex> l(pass.parts_mu);
      pass.parts[i][static_cast<size_t>(pn - 1)] = rec;
      run.active.done += len;
    }
    if (s.ok()) bytes_sent_ += len;
    pass.latch.Done(s);
  });
}

namespace {

// The parts' MD5s when every part's is known (the multipart ETag can be checked then).
std::optional<std::vector<Md5Digest>> PartMd5s(const std::vector<PartRecord>& parts) {
  std::vector<Md5Digest> md5s;
  for (const auto& p : parts) {
    if (p.md5_hex.size() != 32) return std::nullopt;
    Md5Digest d{};
    for (size_t b = 0; b < 16; ++b) {
      d[b] = static_cast<uint8_t>(std::stoi(p.md5_hex.substr(2 * b, 2), nullptr, 16));
    }
    md5s.push_back(d);
  }
  return md5s;
}

Backoff FewAttempts(int ms, int max_ms, int attempts) {
  return Backoff(BackoffPolicy{std::chrono::milliseconds(ms), std::chrono::milliseconds(max_ms), 2.0,
                               attempts, std::chrono::milliseconds(10 * max_ms)},
                 DefaultUniform());
}

}  // namespace

bool Uploader::CompletedBefore(Run& run, size_t i, const std::vector<Md5Digest>* md5s,
                               std::string* etag) {
  ObjectInfo info;
  StoreStatus last;
  Backoff few = FewAttempts(100, 1000, 3);
  Status h = RetryWithBackoff([&](int) { last = run.store.Head(run.Key(i), &info); return last.ToAttempt(); },
                              few, RealRetryClock(), &stopping_);
  if (!h.ok() || info.size != run.files[i].size || (md5s && info.etag != MultipartEtag(*md5s))) {
    return false;
  }
  *etag = info.etag;
  Log(LogLevel::kInfo, "%s: completed before the restart", run.Key(i).c_str());
  return true;
}

Status Uploader::CompleteParts(Run& run, size_t i, Pass& pass, int pass_no, bool* again) {
  FileRecord& f = run.files[i];
  ObjectStore& store = run.store;
  const std::string key = run.Key(i);
  std::vector<std::string> etags;
  for (const auto& p : pass.parts[i]) etags.push_back(p.etag);
  const std::optional<std::vector<Md5Digest>> md5s = PartMd5s(pass.parts[i]);
  bool vanished = !pass.restart[i].empty();
  std::string etag;
  StoreStatus last;
  Status s;
  const bool done_before = !vanished && pass.all_parts_recorded[i] &&
                           CompletedBefore(run, i, md5s ? &*md5s : nullptr, &etag);
  if (!vanished && !done_before && pass.all_parts_recorded[i]) {
    // A few attempts only: if the upload id is unusable, start the file over.
    Backoff few = FewAttempts(200, 2000, 4);
    s = RetryWithBackoff(
        [&](int) {
          last = store.CompleteUpload(key, f.upload_id, etags, &etag);
          return last.ToAttempt();
        },
        few, RealRetryClock(), &stopping_);
    if (!s.ok() && !stopping_) {
      vanished = true;
      pass.restart[i] = s.message();
    }
  } else if (!vanished && !done_before) {
    s = WithRetry([&] { return store.CompleteUpload(key, f.upload_id, etags, &etag); }, &last);
  }
  if (!vanished && !done_before && !s.ok() && last.code == StoreStatus::Code::kNotFound) {
    // Completed by a daemon that died before recording it? Accept only the same object.
    ObjectInfo info;
    StoreStatus head_last;
    Status h = WithRetry([&] { return store.Head(key, &info); }, &head_last);
    if (h.ok() && info.size == f.size && md5s && info.etag == MultipartEtag(*md5s)) {
      s = Status::Ok();
      etag = info.etag;
    } else {
      vanished = true;
      pass.restart[i] = s.message();
    }
  }
  if (vanished) {
    if (pass_no == 1) {
      return Status::Error(store.Describe() + "/" + key + ": multipart upload lost twice: " + pass.restart[i]);
    }
    // Start this file over in the next pass.
    (void)RecordFile(run.c.id, f, FileEvent::kMultipartDropped);
    *again = true;
    return Status::Ok();
  }
  if (!s.ok()) return s;
  if (md5s && etag.find('-') != std::string::npos && etag != MultipartEtag(*md5s)) {
    return Status::Error(store.Describe() + "/" + key + ": ETag " + etag +
                         " does not match the parts sent (" + MultipartEtag(*md5s) + ")");
  }
  ObjectInfo info;
  s = WithRetry([&] { return store.Head(key, &info); }, &last);
  if (s.ok() && info.size != f.size) {
    s = Status::Error(store.Describe() + "/" + key + ": size " + std::to_string(info.size) +
                      " after upload, expected " + std::to_string(f.size));
  }
  if (s.ok()) s = RecordFile(run.c.id, f, FileEvent::kMultipartCompleted, etag);
  return s;
}

Status Uploader::PublishRank(Run& run, bool* permanent) {
  // The rank manifest, then completion.
  const CommitRecord& c = run.c;
  ObjectStore& store = run.store;
  TransferOptions topt = Transfer();
  CheckpointManifest m;
  m.job_id = c.job_id;
  m.step = c.step;
  m.world_size = c.world_size;
  RankEntry entry;
  entry.verified = true;
  for (size_t i = 0; i < run.files.size(); ++i) {
    struct stat st {};
    const bool known = i < run.fds.fds.size() && run.fds.fds[i] >= 0 && fstat(run.fds.fds[i], &st) == 0;
    entry.files.push_back({run.files[i].path, run.files[i].size, run.sha[i],
                           known ? static_cast<uint32_t>(st.st_mode & 0777) : 0u});
  }
  m.ranks[c.rank] = entry;
  const std::string mkey = RankManifestKey(c.job_id, c.step, c.rank);
  if (Status s = ValidateManifest(m, mkey); !s) {
    *permanent = true;
    return s;
  }
  if (Status s = PutSmallObject(store, mkey, ManifestToJson(m), topt); !s) return s;
  // Written once per job (the first owner stays); again when the record is missing, invalid or
  // untrusted (see ReadJobOwner).
  if (ReadJobOwner(store, c.job_id, topt) < 0) {
    Json::Value owner_json;
    owner_json["uid"] = c.uid;
    owner_json["job_id"] = c.job_id;
    std::string owner = Json::writeString(Json::StreamWriterBuilder(), owner_json) + "\n";
    (void)PutSmallObject(store, JobOwnerKey(c.job_id), owner, topt);
  }
  Emit(c, "ckpt_uploaded", store.Describe() + "/" + RankKeyPrefix(c.job_id, c.step, c.rank) + " (" +
                               std::to_string(run.total) + " bytes)");
  // Another node may be writing its rank manifest right now, and some stores (s3rver) show a
  // half-written object to a concurrent GET: retry the completion check a few times.
  auto complete = TryCompleteStep(store, c.job_id, c.step, topt);
  for (int attempt = 1; !complete && attempt < 6 && !stopping_; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100 * attempt));
    complete = TryCompleteStep(store, c.job_id, c.step, topt);
  }
  if (!complete) return complete.status();
  if (complete->complete) {
    (void)db_->SetStepState(c.job_id, c.step, c.upload, "COMPLETE");
    Emit(c, "ckpt_complete", store.Describe() + "/" + StepManifestKey(c.job_id, c.step));
  } else if (c.keep > 0) {
    // Another node will complete the step. Retention on this node's disk must still happen once
    // it does: a watcher thread looks for the step manifest for a while (the rank's own upload
    // is done, so the commit is finished).
    std::lock_guard<std::mutex> l(mu_);
    ++watching_;
    workers_.emplace_back([this, copy = c, shared = run.shared] {
      WatchForCompletion(copy, shared);
      --watching_;
      // Joined by the dispatcher like an upload's thread: a finished thread left unjoined keeps
      // its stack (bench/soak/soak.py saw autopard's memory grow ~10 KiB per checkpoint step).
      std::lock_guard<std::mutex> done(mu_);
      done_.push_back(std::this_thread::get_id());
    });
    return Status::Ok();
  }
  Retention(c, &store);
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
