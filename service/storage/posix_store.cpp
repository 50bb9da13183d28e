// POSIX backend: objects are files under a directory (storage_backends.h).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "service/storage/storage_backends.h"

namespace autopar {
namespace {

constexpr const char* kTmpTag = ".autopar-tmp-";

StoreStatus FromErrno(int err, const std::string& what) {
  std::string msg = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
      return StoreStatus::NotFound(msg);
    case EINTR:
    case EAGAIN:
    case EIO:
    case ESTALE:
    case ETIMEDOUT:
    case EBUSY:
      return StoreStatus::Retryable(msg);
    default:
      return StoreStatus::Fatal(msg);
  }
}

std::string RandomId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

bool ValidKey(const std::string& key) {
  if (key.empty() || key.front() == '/' || key.back() == '/') return false;
  size_t start = 0;
  while (start <= key.size()) {
    size_t end = key.find('/', start);
    if (end == std::string::npos) end = key.size();
    std::string_view seg(key.data() + start, end - start);
    if (seg.empty() || seg == "." || seg == ".." || seg.find(kTmpTag) != std::string_view::npos) {
      return false;
    }
    start = end + 1;
  }
  return true;
}

class PosixStore : public ObjectStore {
 public:
  PosixStore(CheckpointUri uri, PosixConfig config) : uri_(std::move(uri)), config_(config) {}

  std::string Describe() const override { return uri_.ToString(); }
  // The bytes go from page cache to page cache; a digest of them would verify nothing the
  // size check and the manifest's SHA-256 do not.
  bool UsesMd5() const override { return false; }
  bool ReadsFiles() const override { return true; }

  Status CheckWrittenOnlyByUs(const std::string& key) const override {
    if (!ValidKey(key)) return Status::Error(BadKey(key).message);
    const std::string path = Path(key);
    for (size_t cut = path.size(); cut > uri_.path.size();) {
      const std::string part = path.substr(0, cut);
      struct stat st;
      if (::lstat(part.c_str(), &st) != 0) return Status::Error(part + ": " + std::strerror(errno));
      if (Status s = Private(part, st, cut == path.size() ? S_IFREG : S_IFDIR); !s) return s;
      cut = path.rfind('/', cut - 1);
      if (cut == std::string::npos) break;
    }
    return Status::Ok();
  }

  StoreStatus PutObjectFromFile(const std::string& key, int src, uint64_t length) override {
    if (!ValidKey(key)) return BadKey(key);
    std::string path = Path(key);
    if (StoreStatus s = MakeParents(path); !s.ok()) return s;
    std::string tmp = path + kTmpTag + RandomId();
    int fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return FromErrno(errno, tmp);
    StoreStatus s = CopyRange(src, fd, 0, length, tmp);
    if (s.ok()) s = Sync(fd, tmp);
    ::close(fd);
    if (s.ok()) s = Publish(tmp, path);
    if (!s.ok()) ::unlink(tmp.c_str());
    return s;
  }

  StoreStatus UploadPartFromFile(const std::string& key, const std::string& upload_id,
                                 int part_number, uint64_t offset, int src, uint64_t length,
                                 std::string* etag) override {
    if (!ValidKey(key)) return BadKey(key);
    std::string tmp = Path(key) + kTmpTag + upload_id;
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return FromErrno(errno, tmp);
    StoreStatus s = CopyRange(src, fd, offset, length, tmp);
    ::close(fd);
    // Non-empty by contract (callers use it to tell uploaded parts).
    if (s.ok()) *etag = "part-" + std::to_string(part_number);
    return s;
  }

  StoreStatus PutObject(const std::string& key, std::string_view data,
                        const Md5Digest& /*md5*/) override {
    if (!ValidKey(key)) return BadKey(key);
    std::string path = Path(key);
    if (StoreStatus s = MakeParents(path); !s.ok()) return s;
    std::string tmp = path + kTmpTag + RandomId();
    int fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return FromErrno(errno, tmp);
    StoreStatus s = WriteAt(fd, data, 0, tmp);
    if (s.ok()) s = Sync(fd, tmp);
    ::close(fd);
    if (s.ok()) s = Publish(tmp, path);
    if (!s.ok()) ::unlink(tmp.c_str());
    return s;
  }

  StoreStatus CreateUpload(const std::string& key, std::string* upload_id) override {
    if (!ValidKey(key)) return BadKey(key);
    std::string path = Path(key);
    if (StoreStatus s = MakeParents(path); !s.ok()) return s;
    std::string id = RandomId();
    std::string tmp = path + kTmpTag + id;
    int fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return FromErrno(errno, tmp);
    ::close(fd);
    *upload_id = id;
    return StoreStatus::Ok();
  }

  StoreStatus UploadPart(const std::string& key, const std::string& upload_id, int /*part*/,
                         uint64_t offset, std::string_view data, const Md5Digest& md5,
                         std::string* etag) override {
    if (!ValidKey(key)) return BadKey(key);
    std::string tmp = Path(key) + kTmpTag + upload_id;
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return FromErrno(errno, tmp);
    StoreStatus s = WriteAt(fd, data, offset, tmp);
    ::close(fd);
    // Non-empty by contract (callers use it to tell uploaded parts); the MD5 given, if any.
    if (s.ok()) *etag = HexEncode(md5);
    return s;
  }

  StoreStatus CompleteUpload(const std::string& key, const std::string& upload_id,
                             const std::vector<std::string>& /*part_etags*/,
                             std::string* etag) override {
    if (!ValidKey(key)) return BadKey(key);
    std::string tmp = Path(key) + kTmpTag + upload_id;
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return FromErrno(errno, tmp);
    StoreStatus s = Sync(fd, tmp);
    ::close(fd);
    if (s.ok()) s = Publish(tmp, Path(key));
    etag->clear();
    return s;
  }

  StoreStatus AbortUpload(const std::string& key, const std::string& upload_id) override {
    if (!ValidKey(key)) return BadKey(key);
    std::string tmp = Path(key) + kTmpTag + upload_id;
    if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) return FromErrno(errno, tmp);
    return StoreStatus::Ok();
  }

  StoreStatus GetRange(const std::string& key, uint64_t offset, uint64_t length,
                       const RangeSink& sink) override {
    if (!ValidKey(key)) return BadKey(key);
    std::string path = Path(key);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return FromErrno(errno, path);
    std::string buf(static_cast<size_t>(std::min<uint64_t>(length, 1 << 20)), '\0');
    uint64_t done = 0;
    StoreStatus s;
    while (done < length) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), length - done));
      ssize_t n = ::pread(fd, buf.data(), want, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        s = FromErrno(errno, path);
        break;
      }
      if (n == 0) {
        s = StoreStatus::Fatal(path + ": shorter than the requested range");
        break;
      }
      if (!sink(offset + done, buf.data(), static_cast<size_t>(n))) {
        s = StoreStatus::Fatal(path + ": writing the received data failed");
        break;
      }
      done += static_cast<uint64_t>(n);
    }
    ::close(fd);
    return s;
  }

  StoreStatus Head(const std::string& key, ObjectInfo* info) override {
    if (!ValidKey(key)) return BadKey(key);
    std::string path = Path(key);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return FromErrno(errno, path);
    if (!S_ISREG(st.st_mode)) return StoreStatus::NotFound(path + ": not a regular file");
    *info = {key, static_cast<uint64_t>(st.st_size), ""};
    return StoreStatus::Ok();
  }

  StoreStatus List(const std::string& prefix, std::vector<ObjectInfo>* objects) override {
    // Walk only below the deepest directory the prefix names.
    size_t slash = prefix.rfind('/');
    std::string dir_key = slash == std::string::npos ? "" : prefix.substr(0, slash);
    StoreStatus s = Walk(dir_key, prefix, objects);
    if (s.code == StoreStatus::Code::kNotFound) return StoreStatus::Ok();  // nothing there yet
    std::sort(objects->begin(), objects->end(),
              [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return s;
  }

  StoreStatus Delete(const std::vector<std::string>& keys) override {
    for (const auto& key : keys) {
      if (!ValidKey(key)) return BadKey(key);
      std::string path = Path(key);
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) return FromErrno(errno, path);
      // Remove directories left empty, up to (not including) the root.
      std::string dir = path;
      for (;;) {
        size_t cut = dir.rfind('/');
        if (cut == std::string::npos || cut <= uri_.path.size()) break;
        dir.resize(cut);
        if (::rmdir(dir.c_str()) != 0) break;
      }
    }
    return StoreStatus::Ok();
  }

 private:
  std::string Path(const std::string& key) const { return uri_.path + "/" + key; }
  StoreStatus BadKey(const std::string& key) const {
    return StoreStatus::Fatal(uri_.ToString() + ": invalid object key '" + key + "'");
  }

  // `st` (from lstat) is of type `type`, owned by the effective uid and not group/other-writable.
  static Status Private(const std::string& path, const struct stat& st, mode_t type) {
    if ((st.st_mode & S_IFMT) != type) {
      return Status::Error(path + ": not a " + (type == S_IFDIR ? "directory" : "regular file") +
                           " (a symlink or another user's replacement?)");
    }
    if (st.st_uid != ::geteuid()) {
      return Status::Error(path + ": owned by uid " + std::to_string(st.st_uid) + ", not uid " +
                           std::to_string(::geteuid()) + " who writes this store");
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return Status::Error(path + ": writable by group or others (mode " + mode + ")");
    }
    return Status::Ok();
  }

  // Creates the missing directories of `path`. Those below the store's root must be this
  // process's own and writable by nobody else, whether created now or found (another user with
  // write access to the root could have created one first, to read or replace what goes in it).
  StoreStatus MakeParents(const std::string& path) const {
    std::string dir = path.substr(0, path.rfind('/'));
    for (size_t pos = 1; pos <= dir.size(); ++pos) {
      if (pos != dir.size() && dir[pos] != '/') continue;
      std::string part = dir.substr(0, pos);
      if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return FromErrno(errno, part);
      if (pos <= uri_.path.size()) continue;
      struct stat st;
      if (::lstat(part.c_str(), &st) != 0) return FromErrno(errno, part);
      if (Status s = Private(part, st, S_IFDIR); !s) {
        return StoreStatus::Fatal(s.message() + ": refusing to write objects below it");
      }
    }
    return StoreStatus::Ok();
  }

  static StoreStatus WriteAt(int fd, std::string_view data, uint64_t offset,
                             const std::string& path) {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n =
          ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return FromErrno(errno, path);
      done += static_cast<size_t>(n);
    }
    return StoreStatus::Ok();
  }

  // Copies [offset, offset + length) of `src` to the same offset of `dst`: copy_file_range (in the
  // kernel, no user-space copy; what `cp` uses), falling back to pread/pwrite where the kernel
  // refuses (EXDEV across filesystems on older kernels, ENOSYS, EINVAL on some filesystems).
  static StoreStatus CopyRange(int src, int dst, uint64_t offset, uint64_t length,
                               const std::string& path) {
    uint64_t done = 0;
    while (done < length) {
      loff_t in = static_cast<loff_t>(offset + done), out = in;
      ssize_t n = ::copy_file_range(src, &in, dst, &out, static_cast<size_t>(length - done), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP))
        break;
      if (n < 0) return FromErrno(errno, path);
      if (n == 0) return StoreStatus::Fatal(path + ": source file is shorter than expected");
      done += static_cast<uint64_t>(n);
    }
    std::string buf;
    while (done < length) {
      if (buf.empty()) buf.resize(1 << 20);
      size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), length - done));
      ssize_t n = ::pread(src, buf.data(), want, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return FromErrno(errno, path);
      if (n == 0) return StoreStatus::Fatal(path + ": source file is shorter than expected");
      StoreStatus w =
          WriteAt(dst, std::string_view(buf.data(), static_cast<size_t>(n)), offset + done, path);
      if (!w.ok()) return w;
      done += static_cast<uint64_t>(n);
    }
    return StoreStatus::Ok();
  }

  StoreStatus Sync(int fd, const std::string& path) const {
    if (config_.fsync && ::fsync(fd) != 0) return FromErrno(errno, path);
    return StoreStatus::Ok();
  }

  // rename(tmp, path), then fsync the directory so the new name survives a crash.
  StoreStatus Publish(const std::string& tmp, const std::string& path) const {
    if (::rename(tmp.c_str(), path.c_str()) != 0) return FromErrno(errno, path);
    if (config_.fsync) {
      std::string dir = path.substr(0, path.rfind('/'));
      int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dfd < 0) return FromErrno(errno, dir);
      int rc = ::fsync(dfd);
      int err = errno;
      ::close(dfd);
      if (rc != 0) return FromErrno(err, dir);
    }
    return StoreStatus::Ok();
  }

  StoreStatus Walk(const std::string& dir_key, const std::string& prefix,
                   std::vector<ObjectInfo>* out) const {
    std::string dir = dir_key.empty() ? uri_.path : Path(dir_key);
    DIR* d = ::opendir(dir.c_str());
    if (!d) return FromErrno(errno, dir);
    StoreStatus s;
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == ".." || name.find(kTmpTag) != std::string::npos) continue;
      std::string key = dir_key.empty() ? name : dir_key + "/" + name;
      struct stat st;
      if (::lstat((dir + "/" + name).c_str(), &st) != 0) continue;  // deleted meanwhile
      if (S_ISDIR(st.st_mode)) {
        std::string as_dir = key + "/";
        // Descend only where the prefix can still match.
        if (as_dir.compare(0, std::min(as_dir.size(), prefix.size()), prefix, 0,
                           std::min(as_dir.size(), prefix.size())) != 0) {
          continue;
        }
        StoreStatus sub = Walk(key, prefix, out);
        if (!sub.ok() && sub.code != StoreStatus::Code::kNotFound) {
          s = sub;
          break;
        }
      } else if (S_ISREG(st.st_mode) && key.compare(0, prefix.size(), prefix) == 0) {
        out->push_back({key, static_cast<uint64_t>(st.st_size), ""});
      }
    }
    ::closedir(d);
    return s;
  }

  CheckpointUri uri_;
  PosixConfig config_;
};

}  // namespace

Result<std::unique_ptr<ObjectStore>> MakePosixStore(const CheckpointUri& uri,
                                                    const PosixConfig& config) {
  if (uri.kind != CheckpointUri::Kind::kFile) {
    return Status::Error("--ckpt-upload: '" + uri.ToString() + "' is not a file:// URI");
  }
  return std::unique_ptr<ObjectStore>(new PosixStore(uri, config));
}

}  // namespace autopar
