#include "daemon.h"

#include <fcntl.h>
#include <json/json.h>
#include <poll.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <system_error>
#include <thread>

#include "core/ckpt/ckpt_layout.h"
#include "core/ckpt/ckpt_store.h"
#include "core/ckpt/ckpt_uri.h"
#include "core/failure/timeline.h"
#include "core/proto/proto_client.h"
#include "log.h"
#include "service/user_access/user_fs.h"

namespace autopar {
namespace {

JobQuotaLimits QuotaLimitsOf(const DaemonConfig& c) {
  return JobQuotaLimits{c.max_events_per_job, c.max_event_bytes_per_job, c.max_ranks_per_job};
}

// Whether a job has ended for good, in Slurm's words: a final state with no requeue under way, or
// a job it no longer knows (purged after MinJobAge). A controller that does not answer tells
// nothing.
JobEnd EndOf(SlurmActions& slurm, const std::string& job_id) {
  auto job = slurm.LoadJob(job_id);
  if (!job) {
    return job.message().find("Invalid job id") != std::string::npos ? JobEnd::kEnded : JobEnd::kCannotTell;
  }
  static const std::set<std::string> kFinal = {"COMPLETED", "FAILED",    "CANCELLED", "TIMEOUT",
                                               "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
                                               "OUT_OF_MEMORY"};
  if (!kFinal.count(job->state) || job->completing || job->requeue_flag) return JobEnd::kRunning;
  return JobEnd::kEnded;
}

// AUTOPARD_TRACE_REQUESTS=1 (diagnosis, off by default): one stderr line per request, "autopard:
// trace <op> at=<CLOCK_MONOTONIC us at the start>: <phase>=<us since the start> ...", the
// start being the accept (for a connection's later requests: the previous reply).
struct Trace {
  std::chrono::steady_clock::time_point t0;
  std::string marks;
  void Mark(const char* what) {
    marks += ' ';
    marks += what;
    marks += '=';
    marks += std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now() - t0).count());
  }
};
thread_local Trace* g_trace = nullptr;
const bool kTrace = [] {
  const char* e = std::getenv("AUTOPARD_TRACE_REQUESTS");
  return e && *e && std::string(e) != "0";
}();
void Mark(const char* what) {
  if (g_trace) g_trace->Mark(what);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Reply Error(const std::string& message) {
  Reply r;
  r.status = Status::Error(message);
  return r;
}

std::vector<uid_t> PrivilegedUids(const std::string& slurm_user) {
  std::vector<uid_t> out{0};
  if (!slurm_user.empty()) {
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* found = nullptr;
    if (getpwnam_r(slurm_user.c_str(), &pw, buf.data(), buf.size(), &found) == 0 && found) {
      out.push_back(pw.pw_uid);
    }
  }
  return out;
}

}  // namespace

Daemon::Daemon(const DaemonConfig& config, std::unique_ptr<JobOwnerLookup> owners)
    : config_(config),
      limits_(config.max_connections, config.max_connections_per_uid),
      owners_(std::make_unique<CachedJobOwners>(std::move(owners),
                                                std::chrono::seconds(config.owner_cache_s))) {}

Result<std::unique_ptr<Daemon>> Daemon::Create(const DaemonConfig& config,
                                               std::unique_ptr<JobOwnerLookup> owners) {
  std::unique_ptr<Daemon> d(new Daemon(config, std::move(owners)));
  if (d->config_.node.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    d->config_.node = host;
  }
  if (Status st = MakeDirs(d->config_.state_dir, 0700); !st) return Status::Error("state_dir: " + st.message());
  auto db = StateDb::Open(d->config_.state_dir + "/autopard.db", d->config_.commit_sync);
  if (!db) return db.status();
  d->db_ = std::move(*db);
  StateDb* state = d->db_.get();
  d->quota_ = std::make_unique<JobQuota>(
      QuotaLimitsOf(d->config_),
      [state](const std::string& job) {
        JobQuota::Seed seed;
        if (auto u = state->UsageOf(job); u.ok()) {
          seed.events = u->events;
          seed.event_bytes = u->event_bytes;
          seed.ranks.insert(u->ranks.begin(), u->ranks.end());
        }
        return seed;
      },
      [self = d.get()](const std::string& job) -> int64_t {
        // Slurm's word on the job's size (0 without failure handling's libslurm, or for a job
        // Slurm does not know: then only max_ranks_per_job bounds it).
        if (!self->slurm_actions_) return 0;
        auto j = self->slurm_actions_->LoadJob(job);
        if (!j.ok()) return 0;
        return std::max(j->max_ranks(), self->slurm_actions_->MaxStepTasks(job));
      });
  d->effective_ = d->config_;
  d->auth_ = std::make_unique<Authorizer>(d->owners_.get(), PrivilegedUids(d->config_.slurm_user));
  d->stores_ = std::make_unique<StoreCache>(d->config_);
  Daemon* self = d.get();
  d->metrics_ = std::make_unique<NodeMetrics>(AUTOPAR_VERSION, Now());
  d->uploader_ = std::make_unique<Uploader>(d->db_.get(), d->config_, d->stores_.get(),
                                            [self](const JournalEvent& e) { (void)self->Journal(e); });
  d->uploader_->OnUploaded([self](uint64_t bytes, double seconds) { self->metrics_->ObserveUpload(bytes, seconds); });
  if (!d->config_.journal_uri.empty()) {
    if (Status st = CheckJournalDirPrivate(d->config_.journal_uri); !st) return st;
    auto store = d->stores_->Get(d->config_.journal_uri, UserIdentity{0, 0});  // the site's
    if (!store) return Status::Error("journal_uri: " + store.message());
    TransferOptions t = d->uploader_->Transfer();
    t.backoff.max_attempts = 5;  // a publication that fails stays pending for the next round
    t.backoff.max_elapsed = std::chrono::seconds(10);
    t.cancel = nullptr;  // not the uploader's: the shutdown's publication must go out
    d->publisher_ = std::make_unique<JournalPublisher>(
        *store, d->config_.node, d->db_.get(),
        [self](const std::string& job) { return self->owners_->Owner(job); }, t);
  }
  return d;
}

Status CheckJournalDirPrivate(const std::string& journal_uri) {
  auto uri = ParseCheckpointUri(journal_uri);
  if (!uri.ok() || uri->kind != CheckpointUri::Kind::kFile) return Status::Ok();
  struct stat st;
  if (::stat(uri->path.c_str(), &st) != 0) return Status::Ok();  // the store makes it, 0700
  if ((st.st_mode & S_IRWXO) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::Error("journal_uri: " + uri->path + ": open to others (mode " + mode +
                         "): the journal holds every user's events (kernel stacks among them); "
                         "chmod o= it (0700, or 0750 for a group of admins)");
  }
  return Status::Ok();
}

void Daemon::EnableFailureHandling(std::shared_ptr<SlurmActions> slurm, const JobLimits& limits) {
  slurm_actions_ = std::move(slurm);
  FailureHandlerConfig fc;
  fc.limits = limits;
  fc.node = config_.node;
  fc.lock_dir = config_.state_dir;
  fc.progress_interval_s = config_.progress_interval_s;
  // A rank's Python stack dump is at a path its owner chose: read with their rights, a regular
  // file only, never blocking (a FIFO there would hold the failure thread of every job), bounded.
  fc.read_dump = [](int pid, const std::string& path) -> Result<std::string> {
    auto owner = ProcessOwner(pid);
    if (!owner.ok()) return owner.status();
    return ReadUserFile(*owner, path, kMaxStackDumpBytes);
  };
  failure_ = std::make_unique<FailureHandler>(
      fc, slurm_actions_.get(), RealProcAccess(), [this](const JournalEvent& e) { (void)Journal(e); },
      [] { return Now(); });
  failure_ticker_ = std::thread([this] {
    while (!stop_) {
      for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!stop_) failure_->Tick();
    }
  });
}

Daemon::~Daemon() {
  Stop();
  metrics_server_.Stop();
  if (failure_ticker_.joinable()) failure_ticker_.join();
  if (retention_.joinable()) retention_.join();
  if (heartbeat_flusher_.joinable()) heartbeat_flusher_.join();
  if (cleanup_.joinable()) cleanup_.join();
  uploader_->Stop();
  publisher_.reset();  // publishes what is still pending
  for (int fd : wake_) {
    if (fd >= 0) close(fd);
  }
}

Status Daemon::Journal(const JournalEvent& e, pid_t pid, bool own) {
  Status st = db_->AddEvent(e);
  if (!st) {
    if (!own) return st;
    Log(LogLevel::kError, "journal: %s", st.message().c_str());
  }
  if (own) metrics_->Observe(e);
  if (publisher_) publisher_->Changed(e.job_id);
  // The uploader's ckpt_* events time the checkpoints and complete time-limit requeues.
  if (failure_) failure_->OnEvent(e, pid);
  return Status::Ok();
}

std::string Daemon::RenderMetrics() {
  const Uploader::Counts c = uploader_->CurrentCounts();
  return metrics_->Render({c.queued, c.running, c.waiting_retry, c.steps_watched, c.bytes_sent}, Now());
}

Status Daemon::FlushJournal() { return publisher_ ? publisher_->Flush() : Status::Ok(); }

void Daemon::Stop() {
  {
    std::lock_guard<std::mutex> l(retention_mu_);
    stop_ = true;
  }
  retention_cv_.notify_all();
  if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
}

Daemon::PruneSummary Daemon::PruneState(double now) {
  PruneSummary sum;
  if (config_.state_keep_days <= 0) return sum;
  const auto t0 = std::chrono::steady_clock::now();
  const double before = now - 86400.0 * config_.state_keep_days;
  auto jobs = db_->InactiveJobs(before);
  if (!jobs) {
    Log(LogLevel::kWarning, "state retention: %s", jobs.message().c_str());
    return sum;
  }
  for (const auto& job : *jobs) {
    if (stop_) break;
    // Local-only checkpoints stay restorable while their step directories exist (stat'ed here,
    // outside the database's write lock: a slow shared filesystem must not stall commits).
    std::vector<std::pair<int64_t, std::string>> gone;
    if (auto local = db_->LocalCompleteSteps(job)) {
      for (const auto& [step, dir] : *local) {
        std::string step_dir = RankStepDir(dir, step, 0);
        step_dir = step_dir.substr(0, step_dir.rfind('/'));
        struct stat st {};
        if (lstat(step_dir.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
          gone.emplace_back(step, dir);
        }
      }
    }
    Result<StateDb::PruneResult> r = Status::Error("journal publication pending");
    auto prune = [&] { r = db_->PruneJob(job, before, publisher_ != nullptr, gone); };
    if (publisher_) {
      (void)publisher_->RunIfIdle(job, prune);
    } else {
      prune();
    }
    if (r.ok()) sum.rows += r->rows;
    if (r.ok() && r->pruned) {
      quota_->Forget(job);
      if (r->rows > 0) ++sum.jobs_pruned;
      continue;
    }
    ++sum.jobs_kept;
    if (!r.ok()) {
      if (r.message() != "journal publication pending") {
        Log(LogLevel::kWarning, "state retention: %s", r.message().c_str());
      }
    }
  }
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Log(LogLevel::kInfo,
      "state retention: %d jobs pruned (%lld rows deleted), %d inactive jobs "
      "kept (uploads or journal publication pending), in %.3f s (state_keep_days %d)",
      sum.jobs_pruned, static_cast<long long>(sum.rows), sum.jobs_kept, sum.seconds,
      config_.state_keep_days);
  return sum;
}

void Daemon::StartLocalCleanup() {
  if (config_.local_ckpt_cleanup == LocalCleanup::kNone || cleanup_.joinable()) return;
  if (!slurm_actions_) {
    Log(LogLevel::kWarning,
        "local_ckpt_cleanup: without Slurm autopard cannot tell when a job ends; node-local "
        "checkpoint directories are kept");
    return;
  }
  auto io = RealLocalCleanupIo(
      [this] { return db_->CheckpointDirs(); },
      [this](const std::string& job) { return EndOf(*slurm_actions_, job); },
      [this](const std::string& job, const std::string& detail) {
        (void)Journal(JournalEvent{Now(), config_.node, job, "ckpt_local_removed", -1, -1, detail});
      });
  cleanup_ = std::thread([this, cleaner = std::make_shared<LocalCheckpointCleaner>(
                                    config_.local_ckpt_cleanup, std::move(io))] {
    std::unique_lock<std::mutex> l(retention_mu_);
    while (!retention_cv_.wait_for(l, kCleanupInterval, [this] { return stop_.load(); })) {
      l.unlock();
      cleaner->Sweep();
      l.lock();
    }
  });
}

void Daemon::PruneJournals(double now) {
  const JournalPublisher::PruneSummary sum =
      publisher_->PruneJournals(now - config_.journal_keep_days * 86400.0);
  if (!sum.error.empty()) Log(LogLevel::kWarning, "journal retention: %s", sum.error.c_str());
  if (sum.jobs > 0) {
    Log(LogLevel::kInfo, "journal retention: deleted this node's published journal of %d jobs "
        "(%lld objects; journal_keep_days %d)", sum.jobs, static_cast<long long>(sum.objects),
        config_.journal_keep_days);
  }
}

ConfigChanges Daemon::Reload(const DaemonConfig& fresh, const JobLimits& limits) {
  std::lock_guard<std::mutex> lock(reload_mu_);
  ConfigChanges changes = CompareForReload(effective_, fresh);
  for (const std::string& key : changes.applied) {
    auto given = fresh.given.find(key);
    if (given == fresh.given.end()) {
      effective_.given.erase(key);
    } else {
      effective_.given[key] = given->second;
    }
  }
  effective_.log_level = fresh.log_level;
  effective_.max_events_per_job = fresh.max_events_per_job;
  effective_.max_event_bytes_per_job = fresh.max_event_bytes_per_job;
  effective_.max_ranks_per_job = fresh.max_ranks_per_job;
  effective_.s3 = fresh.s3;
  effective_.posix = fresh.posix;
  SetLogLevel(fresh.log_level);
  quota_->SetLimits(QuotaLimitsOf(fresh));
  stores_->Reconfigure(fresh.s3, fresh.posix);
  if (failure_) failure_->SetLimits(limits);
  return changes;
}

void Daemon::ResumeWatches() {
  if (!failure_) return;
  // A week back at most: a rank silent for longer is not a watch to resume.
  auto ranks = db_->WatchedRanks(Now() - 7 * 86400);
  if (!ranks) {
    Log(LogLevel::kWarning, "cannot resume the watch of running jobs: %s", ranks.message().c_str());
    return;
  }
  std::map<std::string, std::pair<int, int64_t>> jobs;  // job -> ranks watched again, last step
  for (const auto& w : *ranks) {
    if (!failure_->ResumeWatch(w.job_id, w.rank, w.step, w.pid, w.time)) continue;
    auto& j = jobs[w.job_id];
    ++j.first;
    j.second = std::max(j.second, w.step);
  }
  for (const auto& [job, j] : jobs) {
    (void)Journal(JournalEvent{Now(), config_.node, job, "watch_resumed", -1, j.second,
                               "ranks=" + std::to_string(j.first)});
  }
  if (!jobs.empty()) Log(LogLevel::kNotice, "resumed watching %zu running jobs", jobs.size());
}

Status Daemon::Serve(const std::function<void()>& ready) {
  if (Status st = uploader_->ResumePending(); !st) return st;
  ResumeWatches();
  if (!heartbeat_flusher_.joinable()) {
    heartbeat_flusher_ = std::thread([this] {
      std::string last_error;
      std::unique_lock<std::mutex> l(retention_mu_);
      while (!retention_cv_.wait_for(l, std::chrono::seconds(1), [this] { return stop_.load(); })) {
        l.unlock();
        Status st = db_->FlushHeartbeats();
        if (!st && st.message() != last_error) {
          Log(LogLevel::kWarning, "heartbeats: %s", st.message().c_str());
        }
        last_error = st.message();
        l.lock();
      }
    });
  }
  const bool journal_retention = publisher_ && config_.journal_keep_days > 0;
  if ((config_.state_keep_days > 0 || journal_retention) && !retention_.joinable()) {
    retention_ = std::thread([this, journal_retention] {
      std::unique_lock<std::mutex> l(retention_mu_);
      while (!stop_) {
        l.unlock();
        if (config_.state_keep_days > 0) (void)PruneState(Now());
        if (journal_retention) PruneJournals(Now());
        l.lock();
        retention_cv_.wait_for(l, std::chrono::hours(1), [this] { return stop_.load(); });
      }
    });
  }
  StartLocalCleanup();
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) return Status::Error(std::string("pipe: ") + std::strerror(errno));
  const std::string& path = config_.socket;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return Status::Error("socket: path too long: " + path);
  std::memcpy(addr.sun_path, path.data(), path.size());
  std::string parent = path.substr(0, path.rfind('/'));
  if (!parent.empty()) {
    if (Status st = MakeDirs(parent, 0755); !st) return Status::Error("socket: " + st.message());
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Status::Error("socket: " + path + " exists and is not a socket");
    unlink(path.c_str());
  }
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) return Status::Error(std::string("socket: ") + std::strerror(errno));
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status e = Status::Error("socket: bind " + path + ": " + std::strerror(errno));
    close(lfd);
    return e;
  }
  chmod(path.c_str(), config_.socket_mode);
  if (listen(lfd, 128) != 0) {
    close(lfd);
    return Status::Error("socket: listen: " + std::string(std::strerror(errno)));
  }
  Log(LogLevel::kNotice, "node %s serving on %s (state %s)", config_.node.c_str(), path.c_str(),
      config_.state_dir.c_str());
  if (!config_.metrics_listen.empty() && metrics_server_.port() == 0) {
    // Checkpoints and recovery matter more than metrics: a listener that cannot start is one
    // line in the log, not a node without autopard.
    auto address = ParseListenAddress(config_.metrics_listen);
    Status ms = address ? metrics_server_.Start(*address, [this] { return RenderMetrics(); }) : address.status();
    if (ms) {
      Log(LogLevel::kInfo, "metrics on http://%s/metrics", config_.metrics_listen.c_str());
    } else {
      Log(LogLevel::kWarning, "metrics_listen: %s (no metrics)", ms.message().c_str());
    }
  }
  auto listener = std::make_shared<Listener>(lfd);
  for (int i = 0; i < kIdleAcceptors; ++i) StartAcceptor(listener);
  if (ready) ready();
  while (!stop_) {
    pollfd p{wake_[0], POLLIN, 0};
    if (poll(&p, 1, -1) < 0 && errno != EINTR) break;
    if (p.revents) break;
  }
  // shutdown() makes every accept() on the socket, blocked or later, fail (EINVAL); the last
  // acceptor to leave closes it. Connections served now are shut down too (a request being
  // handled finishes first; its reply may not reach the peer), and Serve returns once every
  // connection thread has left: none of them outlives the Daemon it uses.
  listener->stopped = true;
  shutdown(lfd, SHUT_RDWR);
  unlink(path.c_str());
  std::unique_lock<std::mutex> lock(listener->mu);
  for (int fd : listener->open) shutdown(fd, SHUT_RDWR);
  listener->done.wait(lock, [&] { return listener->threads == 0; });
  return Status::Ok();
}

Daemon::Listener::~Listener() { close(fd); }

void Daemon::StartAcceptor(const std::shared_ptr<Listener>& l) {
  {
    std::lock_guard<std::mutex> lock(l->mu);
    ++l->idle;
    ++l->threads;
  }
  try {
    std::thread([this, l] { Accept(l); }).detach();
  } catch (const std::system_error& e) {
    Log(LogLevel::kError, "cannot start a connection thread: %s", e.what());
    std::lock_guard<std::mutex> lock(l->mu);
    --l->idle;
    --l->threads;
  }
}

void Daemon::Accept(std::shared_ptr<Listener> l) {
  for (;;) {
    int cfd = accept4(l->fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (cfd < 0) {
      if (l->stopped) break;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors or memory: give the connections in flight time to finish.
      Log(LogLevel::kWarning, "accept: %s", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (l->stopped) {  // pending in the backlog when the daemon stopped
      close(cfd);
      break;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(cfd);
      continue;
    }
    // Over a limit: one error line and closed by this thread, which goes on accepting.
    if (std::string refused = limits_.Admit(cred.uid); !refused.empty()) {
      RefuseConnection(cfd, cred, refused);
      continue;
    }
    Trace t{std::chrono::steady_clock::now(), {}};
    if (kTrace) g_trace = &t;
    bool last;
    {
      std::lock_guard<std::mutex> lock(l->mu);
      last = --l->idle == 0;
      l->open.insert(cfd);
    }
    // Never leave the socket without an acceptor while this connection is served (a restore
    // may take minutes): the next request must not wait for it.
    if (last && !l->stopped) StartAcceptor(l);
    ServeConnection(cfd, Peer{cred.pid, cred.uid, cred.gid});
    limits_.Release(cred.uid);
    g_trace = nullptr;
    std::lock_guard<std::mutex> lock(l->mu);
    l->open.erase(cfd);
    close(cfd);  // after leaving `open`: Serve never shuts down a reused descriptor number
    if (l->idle >= kIdleAcceptors) {  // enough are waiting
      --l->threads;
      l->done.notify_all();
      return;
    }
    ++l->idle;
  }
  // This thread's last touch of the Daemon is above: Serve may return (and the Daemon go) once
  // `threads` is 0.
  std::lock_guard<std::mutex> lock(l->mu);
  --l->idle;
  --l->threads;
  l->done.notify_all();
}

void Daemon::RefuseConnection(int fd, const ucred& cred, const std::string& why) {
  std::string e = EncodeErrorReply(why) + "\n";
  (void)!send(fd, e.data(), e.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  close(fd);
  // One log line per 10 s at most: a flood must not fill the log either.
  const int64_t now = static_cast<int64_t>(Now());
  int64_t last = last_refusal_log_.load();
  if (now - last >= 10 && last_refusal_log_.compare_exchange_strong(last, now)) {
    Log(LogLevel::kWarning, "refused a connection of uid %u (pid %d): %s",
        static_cast<unsigned>(cred.uid), static_cast<int>(cred.pid), why.c_str());
  }
}

namespace {

// A connection that behaves like a flood (a line past kSuspectLineBytes on its way to the limit,
// or kSuspectBadRequests malformed requests) is served at nice 19 from then on, below the upload
// threads: until it is closed, its reads and error replies take only the CPU nobody else wants
// (bench/hostile/flood_bench.py). The thread's priority is restored when the connection ends
// (the thread then accepts the next one).
constexpr size_t kSuspectLineBytes = 64 << 10;
constexpr int kSuspectBadRequests = 4;

class ThreadDemotion {
 public:
  ~ThreadDemotion() {
    if (demoted_) setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), before_);
  }
  void Demote() {
    if (demoted_) return;
    errno = 0;
    before_ = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
    demoted_ = errno == 0 && setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19) == 0;
  }

 private:
  bool demoted_ = false;
  int before_ = 0;
};

}  // namespace

void Daemon::ServeConnection(int fd, const Peer& peer) {
  // A reply the peer does not read blocks a send at most this long (then the connection ends).
  timeval send_timeout{config_.request_timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
  ThreadDemotion demotion;
  int bad_requests = 0;
  Mark("cred");
  std::string in;
  char buf[65536];
  size_t scanned = 0;  // bytes of `in` known to hold no newline (a long line is scanned once)
  for (;;) {
    size_t nl;
    // A request must be whole within request_timeout_s of its first byte (a slow sender holds a
    // thread that long at most); between requests a connection may stay idle_timeout_s.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(
        in.empty() ? config_.idle_timeout_s : config_.request_timeout_s);
    while ((nl = in.find('\n', scanned)) == std::string::npos) {
      scanned = in.size();
      if (in.size() > kSuspectLineBytes) demotion.Demote();
      if (in.size() > kMaxLineBytes) {
        std::string e = EncodeErrorReply("request longer than " + std::to_string(kMaxLineBytes) + " bytes") + "\n";
        (void)!send(fd, e.data(), e.size(), MSG_NOSIGNAL);
        return;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      const int ready = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        if (!in.empty()) {
          std::string e = EncodeErrorReply("request not complete within " + std::to_string(config_.request_timeout_s) +
                                           " s (request_timeout_s)") + "\n";
          (void)!send(fd, e.data(), e.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        return;
      }
      ssize_t n = ready < 0 ? -1 : recv(fd, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return;
      }
      if (in.empty()) deadline = std::chrono::steady_clock::now() + std::chrono::seconds(config_.request_timeout_s);
      in.append(buf, static_cast<size_t>(n));
    }
    std::string line = in.substr(0, nl);
    in.erase(0, nl + 1);
    scanned = 0;
    Mark("read");
    std::string out;
    auto req = DecodeRequest(line);
    Mark("decode");
    if (!req) {
      if (++bad_requests >= kSuspectBadRequests) demotion.Demote();
      out = EncodeErrorReply(req.message());
    } else {
      out = EncodeReply(req->op, Handle(*req, peer));
    }
    out += "\n";
    Mark("encode");
    size_t sent = 0;
    while (sent < out.size()) {
      ssize_t n = send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return;
      }
      sent += static_cast<size_t>(n);
    }
    if (g_trace) {
      Mark("sent");
      Log(LogLevel::kInfo, "trace %s at=%lld:%s", req ? OpName(req->op) : "bad",
          static_cast<long long>(
              std::chrono::duration_cast<std::chrono::microseconds>(g_trace->t0.time_since_epoch())
                  .count()),
          g_trace->marks.c_str());
      g_trace->marks.clear();
      g_trace->t0 = std::chrono::steady_clock::now();
    }
  }
}

Reply Daemon::Handle(const Request& r, const Peer& peer) {
  if (Status st = ValidateRequest(r); !st) return Error(st.message());
  const char* op = OpName(r.op);
  switch (r.op) {
    case Op::kCommit:
      return Commit(r, peer);
    case Op::kRestore:
      return Restore(r, peer);
    case Op::kLs:
      return List(r, peer);
    case Op::kStatus:
      return UploadStatus(r, peer);
    case Op::kHeartbeat: {
      if (Status st = auth_->Check(peer, op, r.job_id); !st) return Error(st.message());
      if (Status st = quota_->TakeRank(r.job_id, r.rank); !st) return Error("heartbeat: " + st.message());
      const double now = Now();
      metrics_->CountHeartbeat();
      Reply reply;
      pid_t rank_process = 0;
      if (failure_) {
        reply.checkpoint_requested = failure_->OnHeartbeat(r.job_id, r.rank, r.step, peer.pid,
                                                              r.short_lived, r.samples, r.tokens,
                                                              r.loss, {r.rank_compute_s, r.rank_nodes});
        rank_process = failure_->RankProcessOf(r.job_id, r.rank);
      }
      if (Status st = db_->Heartbeat(r.job_id, r.rank, r.step, now, rank_process); !st) return Error(st.message());
      return reply;
    }
    case Op::kEvent: {
      if (Status st = auth_->Check(peer, op, r.job_id); !st) return Error(st.message());
      JournalEvent e{Now(), r.node.empty() ? config_.node : r.node, r.job_id, r.kind, r.rank, r.step, r.detail};
      if (r.kind == event_kind::kUsageSample) {
        // A measurement, not a story: summarised per node by the failure handler.
        if (failure_) failure_->OnUsageSample(e, peer.pid);
        return Reply{};
      }
      if (r.kind == event_kind::kSubmitted && slurm_actions_) {
        // The launcher tells it when the first step starts; the story begins at submission.
        auto job = slurm_actions_->LoadJob(r.job_id);
        if (job.ok() && job->submit_time > 0 && job->submit_time < e.time) e.time = job->submit_time;
      }
      if (Status st = quota_->TakeEvent(r.job_id, r.detail.size()); !st) return Error("event: " + st.message());
      // Not counted in the metrics: a job's programs may send any kind and fields.
      if (Status st = Journal(e, peer.pid, false); !st) return Error(st.message());
      return Reply{};
    }
    case Op::kEvents:
      return Events(r, peer);
    case Op::kRecover: {
      if (Status st = auth_->Check(peer, op, r.job_id); !st) return Error(st.message());
      Reply reply;
      if (!failure_) {
        reply.recover.action = "none";
        reply.recover.reason = "this node's autopard has no failure handling";
        return reply;
      }
      auto d = failure_->Recover(r.job_id, r.rank, r.detail, peer.pid);
      if (!d) return Error(d.message());
      if (publisher_) publisher_->Changed(r.job_id);
      reply.recover = *d;
      return reply;
    }
  }
  return Error("unknown op");
}

Reply Daemon::Commit(const Request& r, const Peer& peer) {
  if (Status st = auth_->Check(peer, "commit", r.job_id); !st) return Error(st.message());
  Mark("auth");
  auto owner = auth_->FileOwner(peer, r.job_id);
  if (!owner) return Error("commit: " + owner.message());
  Mark("owner");
  UserIdentity id = IdentityOf(*owner);
  Mark("identity");
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
  Mark("uri");
  auto listed = ListRankFiles(id, dir);
  if (!listed) return Error("commit: " + listed.message());
  Mark("list");
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
  Mark("db");
  if (!duplicate) uploader_->Enqueue(*idr, &c);
  Mark("enqueue");
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

namespace {
// A file of the rank's step directory that already has the manifest's size and SHA-256.
bool LocalCopyIntact(const UserIdentity& id, const std::string& path, uint64_t size,
                     const std::string& sha256) {
  auto fd = OpenUserFile(id, path, static_cast<int64_t>(size));
  if (!fd) return false;
  auto sha = Sha256OfFd(*fd, path);
  close(*fd);
  return sha && *sha == sha256;
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
    const std::string label = "step " + std::to_string(s.step) + " of job " + s.job_id;
    auto m = ReadStepManifest(store, s.job_id, s.step, topt);
    if (!m) {
      reply.restore.skipped.push_back(label + ": " + m.message());
      continue;
    }
    // Another world size: only for an elastic job, which then gets every saved rank's files.
    const bool reshard = m->world_size != r.world_size;
    if (reshard && !r.reshard) {
      reply.restore.skipped.push_back(label + ": written by " + std::to_string(m->world_size) +
                                      " ranks, this job has " + std::to_string(r.world_size));
      continue;
    }
    std::vector<int> ranks;
    if (reshard) {
      for (const auto& [saved_rank, files] : m->ranks) ranks.push_back(saved_rank);
    } else if (m->ranks.count(r.rank)) {
      ranks.push_back(r.rank);
    }
    if (ranks.empty()) {
      reply.restore.skipped.push_back(label + ": no files of rank " + std::to_string(r.rank));
      continue;
    }
    if (r.probe) {  // decide only: the ranks restore this step next, each on its node
      reply.restore.step = s.step;
      reply.restore.source_job = s.job_id;
      reply.restore.world_size = m->world_size;
      return reply;
    }
    // The node's ranks of an elastic job all want every saved rank's files: one at a time, so
    // that the later ones find the earlier one's copies intact instead of fetching them again.
    std::unique_lock<std::mutex> reshard_lock(reshard_mu_, std::defer_lock);
    if (reshard) reshard_lock.lock();
    uint64_t local_bytes = 0, fetched_bytes = 0;
    Status dl;
    for (int saved_rank : ranks) {
      const std::string dest = RankStepDir(r.ckpt_dir, s.step, saved_rank);
      // What the node already holds (an in-place restart, or a requeued run back on this node) is
      // used as it is when it matches the manifest; only missing or damaged files are fetched.
      std::vector<DownloadItem> items;
      for (const auto& f : m->ranks.at(saved_rank).files) {
        if (LocalCopyIntact(id, dest + "/" + f.path, f.size, f.sha256)) {
          local_bytes += f.size;
          continue;
        }
        items.push_back({RankFileKey(s.job_id, s.step, saved_rank, f.path), dest + "/" + f.path,
                         f.size, f.sha256, f.mode});
        fetched_bytes += f.size;
      }
      // Straight into the job's directory, as its owner: their quota and permissions hold, and
      // nothing is staged in root's space (the transfer's worker threads only write into the
      // files this thread opened as the user).
      if (!items.empty()) {
        AsUser as(id);
        dl = DownloadFiles(store, items, topt);
      }
      if (!dl.ok()) break;
    }
    if (!dl.ok()) {
      reply.restore.skipped.push_back(label + ": " + dl.message());
      JournalEvent e{Now(), config_.node, r.job_id, "ckpt_restore_skipped", r.rank, s.step, dl.message()};
      (void)Journal(e);
      continue;
    }
    // With another world size a rank beyond the saved ones reads rank 0's copy (replicated
    // state is the same in every rank's; sharded state is read through the step directory).
    const int own = m->ranks.count(r.rank) ? r.rank : 0;
    const std::string dest = RankStepDir(r.ckpt_dir, s.step, own);
    reply.restore.step = s.step;
    reply.restore.source_job = s.job_id;
    reply.restore.dir = dest;
    reply.restore.step_dir = dest.substr(0, dest.rfind('/'));
    reply.restore.world_size = m->world_size;
    reply.restore.bytes_local = local_bytes;
    reply.restore.bytes_fetched = fetched_bytes;
    std::string what = reshard ? StepKeyPrefix(s.job_id, s.step) + " (" + std::to_string(ranks.size()) +
                                     " ranks, written by " + std::to_string(m->world_size) + ")"
                               : RankKeyPrefix(s.job_id, s.step, r.rank);
    (void)Journal({Now(), config_.node, r.job_id, "ckpt_restored", r.rank, s.step,
             store.Describe() + "/" + what + " -> " + (reshard ? reply.restore.step_dir : dest) +
                 " bytes_local=" + std::to_string(local_bytes) +
                 " bytes_fetched=" + std::to_string(fetched_bytes)});
    return reply;
  }
  (void)Journal({Now(), config_.node, r.job_id, "fresh_start", r.rank, -1,
           "no complete checkpoint in " + store.Describe()});
  return reply;
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
    std::string problem;
    for (const auto& f : *files) {
      auto fd = OpenUserFile(id, dir + "/" + f.path, static_cast<int64_t>(f.size));
      if (!fd) {
        problem = fd.message();
        break;
      }
      auto sha = Sha256OfFd(*fd, dir + "/" + f.path);
      close(*fd);
      if (!sha) {
        problem = sha.message();
        break;
      }
      if (*sha != f.sha256) {
        problem = dir + "/" + f.path + ": SHA-256 mismatch: expected " + f.sha256 + ", got " + *sha;
        break;
      }
    }
    if (!problem.empty()) {
      reply.restore.skipped.push_back(label + ": " + problem);
      continue;
    }
    reply.restore.step = s.step;
    reply.restore.source_job = s.job_id;
    reply.restore.dir = dir;
    reply.restore.step_dir = dir.substr(0, dir.rfind('/'));
    reply.restore.world_size = mine->world_size;
    (void)Journal({Now(), config_.node, r.job_id, "ckpt_restored", r.rank, s.step, "local " + dir});
    return reply;
  }
  (void)Journal({Now(), config_.node, r.job_id, "fresh_start", r.rank, -1,
           "no complete local checkpoint in " + ckpt_dir});
  return reply;
}

Reply Daemon::List(const Request& r, const Peer& peer) {
  Reply reply;
  TransferOptions topt = uploader_->Transfer();
  auto list_store = [&](const std::string& uri, const std::string& job_id, const UserIdentity& as,
                        const std::function<bool(const std::string&)>& allowed) -> Status {
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
      reply.steps.push_back(std::move(info));
    }
    return Status::Ok();
  };
  if (!r.upload.empty()) {
    auto uri = ParseCheckpointUri(r.upload);
    if (!uri) return Error("ls: " + uri.message());
    std::map<std::string, bool> cache;
    bool privileged = auth_->IsPrivileged(peer.uid);
    // With the peer's own rights (a file:// store): nothing they could not list themselves.
    const UserIdentity as = privileged ? UserIdentity{0, 0} : IdentityOf(peer.uid);
    auto store_r = stores_->Get(uri->ToString(), as);
    if (!store_r) return Error("ls: " + store_r.message());
    std::shared_ptr<ObjectStore> store = *store_r;
    Status st = list_store(uri->ToString(), "", as, [&](const std::string& job) {
      if (privileged) return true;
      auto it = cache.find(job);
      if (it != cache.end()) return it->second;
      bool ok = StoredJobOwner(*store, job) == static_cast<int64_t>(peer.uid);
      cache[job] = ok;
      return ok;
    });
    if (!st) return Error("ls: " + st.message());
    return reply;
  }
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
  for (const auto& uri : uris) {
    Status st = list_store(uri, r.job_id, owner_id, [](const std::string&) { return true; });
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

Reply Daemon::Events(const Request& r, const Peer& peer) {
  Reply reply;
  std::vector<PublishedJournal> published;
  bool read = false;
  Status read_error = Status::Ok();
  auto read_published = [&] {
    if (read || !publisher_) return;
    read = true;
    // This node's own publication is read too, for the owner it recorded there.
    auto got = ReadPublishedJournals(publisher_->store(), r.job_id, "", publisher_->Transfer(),
                                     &reply.notes);
    if (got) {
      published = std::move(*got);
    } else {
      read_error = got.status();
    }
  };
  // Slurm names the owner while it knows the job; after it has forgotten the job, the owner
  // recorded with the journals decides (this node's and every published one).
  Status allowed = auth_->CheckRecorded(peer, "events", r.job_id, [&] {
    read_published();
    std::vector<int64_t> uids;
    auto recorded = db_->JobOwner(r.job_id);  // the owner this node recorded (publisher)
    if (recorded.ok()) uids.push_back(*recorded);
    for (const auto& j : published) uids.push_back(j.uid);
    return uids;
  });
  if (!allowed) return Error(allowed.message());
  read_published();
  auto local = db_->Events(r.job_id);
  if (!local) return Error("events: " + local.message());
  std::vector<std::vector<JournalEvent>> journals{std::move(*local)};
  // This node's own publication too: the same events as its local journal (MergeTimelines drops
  // exact duplicates), and the only record of them once state retention pruned the job.
  for (auto& j : published) journals.push_back(std::move(j.events));
  reply.events = MergeTimelines(journals);
  if (!auth_->IsPrivileged(peer.uid)) {
    // Kernel stacks (kernel addresses and symbols) are root's and SlurmUser's to see.
    reply.events.erase(std::remove_if(reply.events.begin(), reply.events.end(),
                                      [](const JournalEvent& e) { return e.kind == event_kind::kStackKernel; }),
                       reply.events.end());
  }
  // One protocol line (the newline and the notes added below fit in the margin).
  FitEventsReply(&reply, kMaxLineBytes - 4096);
  if (!publisher_) {
    reply.notes.push_back("only the events recorded on " + config_.node +
                          ": other nodes' events need journal_uri in autopard.conf");
  } else if (!read_error.ok()) {
    reply.notes.push_back("only the events recorded on " + config_.node + ": journal_uri: " +
                          read_error.message());
  }
  return reply;
}

Reply Daemon::UploadStatus(const Request& r, const Peer& peer) {
  if (!r.job_id.empty()) {
    if (Status st = auth_->Check(peer, "status", r.job_id); !st) return Error(st.message());
  }
  Reply reply;
  for (auto& u : uploader_->Progress(r.job_id)) {
    if (!auth_->IsPrivileged(peer.uid) && !auth_->Check(peer, "status", u.job_id).ok()) continue;
    reply.uploads.push_back(std::move(u));
  }
  return reply;
}

}  // namespace autopar
