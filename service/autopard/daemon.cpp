#include "daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

#include "core/ckpt/ckpt_uri.h"
#include "daemon_internal.h"
#include "log.h"
#include "proc_access.h"
#include "request_server.h"
#include "service/user_access/user_fs.h"

namespace autopar {
namespace daemon_detail {

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Reply Error(const std::string& message) {
  Reply r;
  r.status = Status::Error(message);
  return r;
}

}  // namespace daemon_detail

using daemon_detail::Error;
using daemon_detail::Now;

namespace {

JobQuotaLimits QuotaLimitsOf(const DaemonConfig& c) {
  return JobQuotaLimits{c.max_events_per_job, c.max_event_bytes_per_job, c.max_ranks_per_job};
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

Status Daemon::FlushJournal() { return publisher_ ? publisher_->Flush() : Status::Ok(); }

void Daemon::Stop() {
  {
    std::lock_guard<std::mutex> l(retention_mu_);
    stop_ = true;
  }
  retention_cv_.notify_all();
  if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
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
    (void)Journal(JournalEvent{Now(), config_.node, job, event_kind::kWatchResumed, -1, j.second,
                               "ranks=" + std::to_string(j.first)});
  }
  if (!jobs.empty()) Log(LogLevel::kNotice, "resumed watching %zu running jobs", jobs.size());
}

Status Daemon::Serve(const std::function<void()>& ready) {
  if (Status st = uploader_->ResumePending(); !st) return st;
  ResumeWatches();
  StartHousekeeping();
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) return Status::Error(std::string("pipe: ") + std::strerror(errno));
  RequestServerOptions options;
  options.socket = config_.socket;
  options.socket_mode = config_.socket_mode;
  options.request_timeout_s = config_.request_timeout_s;
  options.idle_timeout_s = config_.idle_timeout_s;
  options.max_connections = config_.max_connections;
  options.max_connections_per_uid = config_.max_connections_per_uid;
  RequestServer server(options, [this](const Request& r, const Peer& peer) { return Handle(r, peer); });
  if (Status st = server.Start(); !st) return st;
  Log(LogLevel::kNotice, "node %s serving on %s (state %s)", config_.node.c_str(), config_.socket.c_str(),
      config_.state_dir.c_str());
  StartMetricsListener();
  if (ready) ready();
  while (!stop_) {
    pollfd p{wake_[0], POLLIN, 0};
    if (poll(&p, 1, -1) < 0 && errno != EINTR) break;
    if (p.revents) break;
  }
  // Returns once every connection thread has left: none of them outlives the Daemon it uses.
  server.Stop();
  return Status::Ok();
}

void Daemon::StartMetricsListener() {
  if (config_.metrics_listen.empty() || metrics_server_.port() != 0) return;
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

Reply Daemon::Handle(const Request& r, const Peer& peer) {
  if (Status st = ValidateRequest(r); !st) return Error(st.message());
  switch (r.op) {
    case Op::kCommit:
      return Commit(r, peer);
    case Op::kRestore:
      return Restore(r, peer);
    case Op::kLs:
      return List(r, peer);
    case Op::kStatus:
      return UploadStatus(r, peer);
    case Op::kHeartbeat:
      return Heartbeat(r, peer);
    case Op::kEvent:
      return Event(r, peer);
    case Op::kEvents:
      return Events(r, peer);
    case Op::kRecover:
      return Recover(r, peer);
  }
  return Error("unknown op");
}

}  // namespace autopar
