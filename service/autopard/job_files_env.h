// The local side of autopard's uploads (core/ckpt/transfer_env.h): a job's committed files opened
// with its owner's rights (OpenUserFile: no symlink followed, owned by the user), the parts of
// every upload of the node sent by one shared pool of `concurrency` workers (TaskPool), and all of
// it at nice +10: commits and the training program get the CPU first on a busy node.
//
// Thread safety: TaskPool and JobFilesEnv may be used from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/ckpt/transfer_env.h"
#include "service/user_access/user_fs.h"

namespace autopar {

// Lowers the calling thread's priority to nice +10 (Linux: setpriority on a thread id).
void RunInBackground();

// A fixed set of worker threads at nice +10 running queued tasks in order.
class TaskPool {
 public:
  explicit TaskPool(int threads);
  ~TaskPool();
  void Submit(std::function<void()> task);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// Reads only: an upload writes no local file (CreateSized, WriteAt, Replace and Remove are the
// default env's, for completeness).
class JobFilesEnv : public TransferEnv {
 public:
  JobFilesEnv(UserIdentity owner, TaskPool* pool) : owner_(owner), pool_(pool) {}
  Status OpenForRead(const std::string& path, int* fd, uint64_t* size, uint32_t* mode) override;
  Status CreateSized(const std::string& path, uint32_t mode, uint32_t dir_mode, uint64_t size,
                     int* fd) override;
  bool ReadAt(int fd, char* buf, size_t size, uint64_t offset) override;
  bool WriteAt(int fd, const char* buf, size_t size, uint64_t offset) override;
  bool Sync(int fd) override;
  void Close(int fd) override;
  bool Replace(const std::string& from, const std::string& to) override;
  void Remove(const std::string& path) override;
  // body(0) on the calling thread, the others on threads of their own at nice +10.
  void RunConcurrently(size_t n, const std::function<void(size_t)>& body) override;
  // On the pool: as many at once as it has workers free, shared with every other upload.
  void RunWorkers(size_t n, const std::function<void(size_t)>& body) override;

 private:
  const UserIdentity owner_;
  TaskPool* const pool_;
};

}  // namespace autopar
