// An in-memory TransferEnv for tests of the transfer engine: files are strings in a map, the
// workers run one after another (deterministic), failures are injected by path.
#pragma once

#include <cerrno>
#include <map>
#include <set>
#include <string>

#include "core/ckpt/transfer_env.h"

namespace autopar {

class MemoryEnv : public TransferEnv {
 public:
  std::map<std::string, std::string> files;
  std::map<std::string, uint32_t> modes;
  std::set<std::string> dirs;
  std::set<std::string> fail_writes;  // paths whose writes fail (ENOSPC)
  size_t most_concurrent = 0;         // the largest n RunConcurrently was given
  size_t most_workers = 0;            // the largest n RunWorkers was given

  Status OpenForRead(const std::string& path, int* fd, uint64_t* size, uint32_t* mode) override {
    auto it = files.find(path);
    if (it == files.end()) return Status::Error(path + ": No such file or directory");
    *fd = Open(path);
    *size = it->second.size();
    *mode = modes.count(path) ? modes[path] : 0644;
    return Status::Ok();
  }
  Status CreateSized(const std::string& path, uint32_t mode, uint32_t dir_mode, uint64_t size,
                     int* fd) override {
    dirs.insert(path.substr(0, path.rfind('/')));
    (void)dir_mode;
    files[path] = std::string(size, '\0');
    modes[path] = mode;
    *fd = Open(path);
    return Status::Ok();
  }
  bool ReadAt(int fd, char* buf, size_t size, uint64_t offset) override {
    const std::string& f = files[open_.at(fd)];
    if (offset + size > f.size()) {
      errno = EIO;
      return false;
    }
    f.copy(buf, size, offset);
    return true;
  }
  bool WriteAt(int fd, const char* buf, size_t size, uint64_t offset) override {
    const std::string& path = open_.at(fd);
    if (fail_writes.count(path)) {
      errno = ENOSPC;
      return false;
    }
    std::string& f = files[path];
    if (offset + size > f.size()) f.resize(offset + size);
    f.replace(offset, size, buf, size);
    return true;
  }
  bool Sync(int) override { return true; }
  void Close(int fd) override { open_.erase(fd); }
  bool Replace(const std::string& from, const std::string& to) override {
    auto it = files.find(from);
    if (it == files.end()) {
      errno = ENOENT;
      return false;
    }
    files[to] = std::move(it->second);
    modes[to] = modes[from];
    files.erase(from);
    return true;
  }
  void Remove(const std::string& path) override { files.erase(path); }
  void RunConcurrently(size_t n, const std::function<void(size_t)>& body) override {
    most_concurrent = std::max(most_concurrent, n);
    for (size_t i = 0; i < n; ++i) body(i);
  }
  void RunWorkers(size_t n, const std::function<void(size_t)>& body) override {
    most_workers = std::max(most_workers, n);
    for (size_t i = 0; i < n; ++i) body(i);
  }
  size_t open_files() const { return open_.size(); }

 private:
  int Open(const std::string& path) {
    open_[next_fd_] = path;
    return next_fd_++;
  }
  std::map<int, std::string> open_;
  int next_fd_ = 100;
};

}  // namespace autopar
