// DefaultTransferEnv: the transfer engine's local files and threads on POSIX. The only file of
// core/ckpt's transfer path that touches the filesystem or starts a thread.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "core/ckpt/transfer_env.h"

namespace autopar {
namespace {

std::string Errno(const std::string& path) { return path + ": " + std::strerror(errno); }

Status MakeDirs(const std::string& dir, mode_t mode) {
  if (dir.empty()) return Status::Ok();
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    return S_ISDIR(st.st_mode) ? Status::Ok() : Status::Error(dir + ": not a directory");
  }
  size_t slash = dir.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    if (Status s = MakeDirs(dir.substr(0, slash), mode); !s.ok()) return s;
  }
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) return Status::Error(Errno(dir));
  return Status::Ok();
}

std::string ParentDir(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

class PosixTransferEnv : public TransferEnv {
 public:
  Status OpenForRead(const std::string& path, int* fd, uint64_t* size, uint32_t* mode) override {
    *fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (*fd < 0 || ::fstat(*fd, &st) != 0) {
      Status e = Status::Error(Errno(path));
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
      return e;
    }
    *size = static_cast<uint64_t>(st.st_size);
    *mode = static_cast<uint32_t>(st.st_mode & 07777);
    return Status::Ok();
  }

  Status CreateSized(const std::string& path, uint32_t mode, uint32_t dir_mode, uint64_t size,
                     int* fd) override {
    if (Status d = MakeDirs(ParentDir(path), static_cast<mode_t>(dir_mode)); !d.ok()) return d;
    *fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
    // The saved mode exactly (open's mode passes through the umask).
    if (*fd >= 0) (void)::fchmod(*fd, static_cast<mode_t>(mode));
    if (*fd < 0 || ::ftruncate(*fd, static_cast<off_t>(size)) != 0) return Status::Error(Errno(path));
    return Status::Ok();
  }

  bool ReadAt(int fd, char* buf, size_t size, uint64_t offset) override {
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::pread(fd, buf + done, size - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  bool WriteAt(int fd, const char* buf, size_t size, uint64_t offset) override {
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::pwrite(fd, buf + done, size - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  bool Sync(int fd) override { return ::fsync(fd) == 0; }
  void Close(int fd) override { ::close(fd); }

  bool Replace(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return false;
    int dfd = ::open(ParentDir(to).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
    return true;
  }

  void Remove(const std::string& path) override { ::unlink(path.c_str()); }

  void RunConcurrently(size_t n, const std::function<void(size_t)>& body) override {
    std::vector<std::thread> threads;
    for (size_t i = 1; i < n; ++i) threads.emplace_back(body, i);
    if (n > 0) body(0);
    for (auto& t : threads) t.join();
  }
};

}  // namespace

TransferEnv* DefaultTransferEnv() {
  static PosixTransferEnv* env = new PosixTransferEnv;
  return env;
}

}  // namespace autopar
