#include "job_files_env.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace autopar {

void RunInBackground() {
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
}

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

Status JobFilesEnv::OpenForRead(const std::string& path, int* fd, uint64_t* size, uint32_t* mode) {
  auto opened = OpenUserFile(owner_, path, -1);
  if (!opened) return opened.status();
  struct stat st {};
  if (fstat(*opened, &st) != 0) {
    Status e = Status::Error(path + ": " + std::strerror(errno));
    close(*opened);
    return e;
  }
  *fd = *opened;
  *size = static_cast<uint64_t>(st.st_size);
  *mode = static_cast<uint32_t>(st.st_mode & 07777);
  return Status::Ok();
}

Status JobFilesEnv::CreateSized(const std::string& path, uint32_t mode, uint32_t dir_mode,
                                uint64_t size, int* fd) {
  return DefaultTransferEnv()->CreateSized(path, mode, dir_mode, size, fd);
}
bool JobFilesEnv::ReadAt(int fd, char* buf, size_t size, uint64_t offset) {
  return DefaultTransferEnv()->ReadAt(fd, buf, size, offset);
}
bool JobFilesEnv::WriteAt(int fd, const char* buf, size_t size, uint64_t offset) {
  return DefaultTransferEnv()->WriteAt(fd, buf, size, offset);
}
bool JobFilesEnv::Sync(int fd) { return DefaultTransferEnv()->Sync(fd); }
void JobFilesEnv::Close(int fd) { DefaultTransferEnv()->Close(fd); }
bool JobFilesEnv::Replace(const std::string& from, const std::string& to) {
  return DefaultTransferEnv()->Replace(from, to);
}
void JobFilesEnv::Remove(const std::string& path) { DefaultTransferEnv()->Remove(path); }

void JobFilesEnv::RunConcurrently(size_t n, const std::function<void(size_t)>& body) {
  std::vector<std::thread> threads;
  for (size_t i = 1; i < n; ++i) {
    threads.emplace_back([&body, i] {
      RunInBackground();
      body(i);
    });
  }
  if (n > 0) body(0);
  for (auto& t : threads) t.join();
}

void JobFilesEnv::RunWorkers(size_t n, const std::function<void(size_t)>& body) {
  std::mutex mu;
  std::condition_variable cv;
  size_t left = n;
  for (size_t i = 0; i < n; ++i) {
    pool_->Submit([&, i] {
      body(i);
      std::lock_guard<std::mutex> l(mu);
      if (--left == 0) cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return left == 0; });
}

}  // namespace autopar
