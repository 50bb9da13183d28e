// Node-local checkpoint directories of jobs that ended: without a sweep, every job leaves its
// step directories on each node's disk for ever (/tmp/autopar/<user>/<job> by default).
//
// What is removed depends on autopard.conf's local_ckpt_cleanup:
//   all (default)  the step-<N> directories of a job none of whose commits on this node waits
//                  for an upload (queued, uploading or failed to retry): a node's disk is not
//                  where a finished job's checkpoints live.
//   uploaded       only those of jobs that upload (--ckpt-upload), whose local copies are a
//                  cache: a local-only checkpoint (the job's only copy) stays.
//   none           nothing.
// Only entries named step-<digits> (what autopar writes) go, then the directory itself when that
// leaves it empty; anything else the user put there stays. Everything is done with the job
// owner's identity, never through a symlink at the directory itself.
//
// A job has ended when Slurm says so (a final state, no requeue under way) or no longer knows it
// (past MinJobAge); a job Slurm cannot be asked about now is left for the next sweep. Slurm is
// asked only about a directory that still holds steps. Each removal
// is a "ckpt_local_removed" event in the job's timeline.
//
// Thread safety: Sweep() from one thread at a time.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "autopar/status.h"
#include "core/proto/protocol.h"
#include "service/user_access/user_fs.h"

namespace autopar {

enum class LocalCleanup { kNone, kUploaded, kAll };
Result<LocalCleanup> ParseLocalCleanup(const std::string& text);

// One job's checkpoint directory on this node, as the state database has it.
struct CheckpointDirRow {
  std::string job_id;
  std::string ckpt_dir;
  UserIdentity owner;
  bool uploads = false;     // its commits name an upload target
  int64_t unfinished = 0;   // commits not uploaded yet (queued, uploading, failed to retry)
};

enum class JobEnd { kRunning, kEnded, kCannotTell };

// What the cleaner acts through (real ones: RealLocalCleanupIo; tests: fakes).
struct LocalCleanupIo {
  std::function<Result<std::vector<CheckpointDirRow>>()> dirs;
  std::function<JobEnd(const std::string& job_id)> job_end;
  // The step-<N> entries of `dir` ("" list when it is gone), read as `id`.
  std::function<Result<std::vector<std::string>>(const UserIdentity& id, const std::string& dir)> steps;
  std::function<Status(const UserIdentity& id, const std::string& path)> remove_tree;
  std::function<void(const UserIdentity& id, const std::string& dir)> remove_if_empty;
  std::function<void(const std::string& job_id, const std::string& detail)> journal;
};

class LocalCheckpointCleaner {
 public:
  LocalCheckpointCleaner(LocalCleanup policy, LocalCleanupIo io) : policy_(policy), io_(std::move(io)) {}
  // One pass; returns the directories cleaned. Errors go to the journal of the job concerned.
  int Sweep();

 private:
  bool Wanted(const CheckpointDirRow& row) const;
  LocalCleanup policy_;
  LocalCleanupIo io_;
  std::set<std::string> done_;  // "job\ndir" cleaned (or found gone) in this process
};

// The real I/O: the state database's commits, Slurm's job state through `load_state` (returns
// the state or an error; "Invalid job id" means Slurm forgot the job), the owner's file access.
LocalCleanupIo RealLocalCleanupIo(
    std::function<Result<std::vector<CheckpointDirRow>>()> dirs,
    std::function<JobEnd(const std::string& job_id)> job_end,
    std::function<void(const std::string& job_id, const std::string& detail)> journal);

}  // namespace autopar
