// The node's periodic work, in threads of their own beside the request server: heartbeats
// written to the state database every second, state and journal retention hourly, and the sweep
// of ended jobs' node-local checkpoint directories.
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <set>
#include <thread>

#include "core/ckpt/ckpt_layout.h"
#include "daemon.h"
#include "daemon_internal.h"
#include "log.h"

namespace autopar {

using daemon_detail::Now;

namespace {

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

}  // namespace

void Daemon::StartHousekeeping() {
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
        (void)Journal(JournalEvent{Now(), config_.node, job, event_kind::kCkptLocalRemoved, -1, -1, detail});
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

}  // namespace autopar
