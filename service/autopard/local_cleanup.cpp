#include "local_cleanup.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

namespace autopar {
namespace {

bool IsStepName(const char* name) {
  if (std::strncmp(name, "step-", 5) != 0 || name[5] == '\0') return false;
  for (const char* p = name + 5; *p; ++p) {
    if (!std::isdigit(static_cast<unsigned char>(*p))) return false;
  }
  return true;
}

Result<std::vector<std::string>> StepsAsUser(const UserIdentity& id, const std::string& dir) {
  AsUser as(id);
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::vector<std::string>{};
    return Status::Error(dir + ": " + std::strerror(errno));
  }
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    close(fd);
    return Status::Error(dir + ": " + std::strerror(errno));
  }
  std::vector<std::string> steps;
  while (dirent* e = readdir(d)) {
    if (IsStepName(e->d_name)) steps.emplace_back(e->d_name);
  }
  closedir(d);
  return steps;
}

void RemoveIfEmptyAsUser(const UserIdentity& id, const std::string& dir) {
  AsUser as(id);
  (void)rmdir(dir.c_str());  // ENOTEMPTY: the user keeps something there
}

}  // namespace

Result<LocalCleanup> ParseLocalCleanup(const std::string& text) {
  if (text == "uploaded") return LocalCleanup::kUploaded;
  if (text == "all") return LocalCleanup::kAll;
  if (text == "none") return LocalCleanup::kNone;
  return Status::Error("must be uploaded, all or none, got '" + text + "'");
}

bool LocalCheckpointCleaner::Wanted(const CheckpointDirRow& row) const {
  switch (policy_) {
    case LocalCleanup::kNone:
      return false;
    case LocalCleanup::kUploaded:
      return row.uploads && row.unfinished == 0;
    case LocalCleanup::kAll:
      return row.unfinished == 0;
  }
  return false;
}

int LocalCheckpointCleaner::Sweep() {
  if (policy_ == LocalCleanup::kNone) return 0;
  auto rows = io_.dirs();
  if (!rows) return 0;
  int cleaned = 0;
  for (const CheckpointDirRow& row : *rows) {
    const std::string key = row.job_id + "\n" + row.ckpt_dir;
    if (done_.count(key) || !Wanted(row)) continue;
    auto steps = io_.steps(row.owner, row.ckpt_dir);
    if (!steps) {
      io_.journal(row.job_id, "dir=" + row.ckpt_dir + " error=" + steps.message());
      done_.insert(key);
      continue;
    }
    // Nothing (left) to remove: Slurm is not asked. After a restart of autopard every job the
    // database remembers is looked at again; only those with steps on disk cost a request.
    if (steps->empty()) continue;
    if (io_.job_end(row.job_id) != JobEnd::kEnded) continue;
    done_.insert(key);
    std::string error;
    for (const std::string& step : *steps) {
      Status st = io_.remove_tree(row.owner, row.ckpt_dir + "/" + step);
      if (!st && error.empty()) error = st.message();
    }
    io_.remove_if_empty(row.owner, row.ckpt_dir);
    io_.journal(row.job_id, "dir=" + row.ckpt_dir + " steps=" + std::to_string(steps->size()) +
                                (error.empty() ? "" : " error=" + error));
    ++cleaned;
  }
  return cleaned;
}

LocalCleanupIo RealLocalCleanupIo(
    std::function<Result<std::vector<CheckpointDirRow>>()> dirs,
    std::function<JobEnd(const std::string& job_id)> job_end,
    std::function<void(const std::string& job_id, const std::string& detail)> journal) {
  LocalCleanupIo io;
  io.dirs = std::move(dirs);
  io.job_end = std::move(job_end);
  io.steps = StepsAsUser;
  io.remove_tree = RemoveTreeAsUser;
  io.remove_if_empty = RemoveIfEmptyAsUser;
  io.journal = std::move(journal);
  return io;
}

}  // namespace autopar
