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
#include "service/user_access/beneath.h"

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

// Every operation runs with the store's identity (PosixConfig::identity: the job's owner for a
// user's store; AsUser switches the calling thread, which may be any transfer worker) and opens
// what is below the root component by component with O_NOFOLLOW (beneath.h): a symlink below the
// root is never followed, whenever it appears. The root itself is resolved by the kernel with the
// identity's rights, so it leads nowhere the identity could not go.
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
    AsUser as(config_.identity);
    UniqueFd dir = Root(false);
    if (!dir.ok()) return Status::Error(uri_.path + ": " + std::strerror(errno));
    const uid_t us = config_.identity.uid != 0 ? config_.identity.uid : ::geteuid();
    size_t start = 0;
    for (;;) {
      size_t end = key.find('/', start);
      const bool last = end == std::string::npos;
      const std::string name = key.substr(start, last ? std::string::npos : end - start);
      const std::string shown = uri_.path + "/" + key.substr(0, last ? key.size() : end);
      struct stat st;
      if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return Status::Error(shown + ": " + std::strerror(errno));
      }
      if (Status s = Private(shown, st, last ? S_IFREG : S_IFDIR, us); !s) return s;
      if (last) return Status::Ok();
      dir.reset(::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!dir.ok()) return Status::Error(shown + ": " + std::strerror(errno));
      start = end + 1;
    }
  }

  StoreStatus PutObjectFromFile(const std::string& key, int src, uint64_t length) override {
    if (!ValidKey(key)) return BadKey(key);
    struct stat sst;
    const mode_t mode = ::fstat(src, &sst) == 0 ? (sst.st_mode & 0777) : 0600;
    return PutWith(key, mode, [&](int fd, const std::string& tmp) {
      return CopyRange(src, fd, 0, length, tmp);
    });
  }

  StoreStatus UploadPartFromFile(const std::string& key, const std::string& upload_id,
                                 int part_number, uint64_t offset, int src, uint64_t length,
                                 std::string* etag) override {
    return WritePart(key, upload_id, [&](int fd, const std::string& tmp) {
      // The object takes its source's mode (within the root's), as a whole PUT does: set with
      // the first part (parts may come in any order; each upload has a first).
      if (part_number == 1) {
        struct stat sst;
        UniqueFd root = Root(false);
        if (::fstat(src, &sst) == 0 && root.ok()) {
          ::fchmod(fd, FileModeOf(root.get(), sst.st_mode & 0777));
        }
      }
      StoreStatus s = CopyRange(src, fd, offset, length, tmp);
      // Non-empty by contract (callers use it to tell uploaded parts).
      if (s.ok()) *etag = "part-" + std::to_string(part_number);
      return s;
    });
  }

  StoreStatus PutObject(const std::string& key, std::string_view data,
                        const Md5Digest& /*md5*/) override {
    if (!ValidKey(key)) return BadKey(key);
    return PutWith(key, kDefaultFileMode, [&](int fd, const std::string& tmp) {
      return WriteAt(fd, data, 0, tmp);
    });
  }

  StoreStatus CreateUpload(const std::string& key, std::string* upload_id) override {
    if (!ValidKey(key)) return BadKey(key);
    AsUser as(config_.identity);
    UniqueFd root = Root(true);
    if (!root.ok()) return FromErrno(errno, uri_.path);
    // Private until a part from the source file gives it that file's mode.
    const mode_t file_mode = FileModeOf(root.get(), 0600);
    std::string id = RandomId();
    const std::string tmp = TmpKey(key, id);
    UniqueFd dir(OpenDirBeneath(root.get(), SplitParent(key).first, true, DirModeOf(root.get())));
    if (!dir.ok()) return FromErrno(errno, Path(std::string(SplitParent(key).first)));
    if (StoreStatus p = CheckPrivateDirs(root.get(), SplitParent(key).first); !p.ok()) return p;
    UniqueFd fd(OpenBeneath(root.get(), tmp, O_CREAT | O_EXCL | O_WRONLY, file_mode));
    if (!fd.ok()) return FromErrno(errno, Path(tmp));
    *upload_id = id;
    return StoreStatus::Ok();
  }

  StoreStatus UploadPart(const std::string& key, const std::string& upload_id, int /*part*/,
                         uint64_t offset, std::string_view data, const Md5Digest& md5,
                         std::string* etag) override {
    return WritePart(key, upload_id, [&](int fd, const std::string& tmp) {
      StoreStatus s = WriteAt(fd, data, offset, tmp);
      // Non-empty by contract (callers use it to tell uploaded parts); the MD5 given, if any.
      if (s.ok()) *etag = HexEncode(md5);
      return s;
    });
  }

  StoreStatus CompleteUpload(const std::string& key, const std::string& upload_id,
                             const std::vector<std::string>& /*part_etags*/,
                             std::string* etag) override {
    if (!ValidKey(key)) return BadKey(key);
    AsUser as(config_.identity);
    etag->clear();
    auto [parent, name] = SplitParent(key);
    UniqueFd root = Root(false);
    if (!root.ok()) return FromErrno(errno, uri_.path);
    UniqueFd dir(OpenDirBeneath(root.get(), parent, false, 0));
    if (!dir.ok()) return FromErrno(errno, Path(std::string(parent)));
    const std::string tmp_name = std::string(name) + kTmpTag + upload_id;
    UniqueFd fd(::openat(dir.get(), tmp_name.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.ok()) return FromErrno(errno, Path(TmpKey(key, upload_id)));
    StoreStatus s = Sync(fd.get(), Path(TmpKey(key, upload_id)));
    if (s.ok()) s = Publish(dir.get(), tmp_name, std::string(name), Path(key));
    return s;
  }

  StoreStatus AbortUpload(const std::string& key, const std::string& upload_id) override {
    if (!ValidKey(key)) return BadKey(key);
    AsUser as(config_.identity);
    auto [parent, name] = SplitParent(key);
    UniqueFd root = Root(false);
    if (!root.ok()) return errno == ENOENT ? StoreStatus::Ok() : FromErrno(errno, uri_.path);
    UniqueFd dir(OpenDirBeneath(root.get(), parent, false, 0));
    if (!dir.ok()) return errno == ENOENT ? StoreStatus::Ok() : FromErrno(errno, Path(std::string(parent)));
    const std::string tmp_name = std::string(name) + kTmpTag + upload_id;
    if (::unlinkat(dir.get(), tmp_name.c_str(), 0) != 0 && errno != ENOENT) {
      return FromErrno(errno, Path(TmpKey(key, upload_id)));
    }
    return StoreStatus::Ok();
  }

  StoreStatus GetRange(const std::string& key, uint64_t offset, uint64_t length,
                       const RangeSink& sink) override {
    if (!ValidKey(key)) return BadKey(key);
    AsUser as(config_.identity);
    const std::string path = Path(key);
    // O_NONBLOCK: a FIFO put where an object should be must not hold this thread.
    UniqueFd fd = OpenKey(key, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (!fd.ok()) return FromErrno(errno, path);
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return FromErrno(errno, path);
    if (!S_ISREG(st.st_mode)) return StoreStatus::NotFound(path + ": not a regular file");
    std::string buf(static_cast<size_t>(std::min<uint64_t>(length, 1 << 20)), '\0');
    uint64_t done = 0;
    while (done < length) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), length - done));
      ssize_t n = ::pread(fd.get(), buf.data(), want, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return FromErrno(errno, path);
      if (n == 0) return StoreStatus::Fatal(path + ": shorter than the requested range");
      if (!sink(offset + done, buf.data(), static_cast<size_t>(n))) {
        return StoreStatus::Fatal(path + ": writing the received data failed");
      }
      done += static_cast<uint64_t>(n);
    }
    return StoreStatus::Ok();
  }

  StoreStatus Head(const std::string& key, ObjectInfo* info) override {
    if (!ValidKey(key)) return BadKey(key);
    AsUser as(config_.identity);
    const std::string path = Path(key);
    auto [parent, name] = SplitParent(key);
    UniqueFd root = Root(false);
    if (!root.ok()) return FromErrno(errno, uri_.path);
    UniqueFd dir(OpenDirBeneath(root.get(), parent, false, 0));
    if (!dir.ok()) return FromErrno(errno == ELOOP || errno == ENOTDIR ? ENOENT : errno, path);
    struct stat st;
    if (::fstatat(dir.get(), std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return FromErrno(errno, path);
    }
    if (!S_ISREG(st.st_mode)) return StoreStatus::NotFound(path + ": not a regular file");
    *info = {key, static_cast<uint64_t>(st.st_size), ""};
    return StoreStatus::Ok();
  }

  StoreStatus List(const std::string& prefix, std::vector<ObjectInfo>* objects) override {
    AsUser as(config_.identity);
    UniqueFd root = Root(false);
    if (!root.ok()) return errno == ENOENT ? StoreStatus::Ok() : FromErrno(errno, uri_.path);
    // Walk only below the deepest directory the prefix names.
    size_t slash = prefix.rfind('/');
    std::string dir_key = slash == std::string::npos ? "" : prefix.substr(0, slash);
    if (!dir_key.empty() && !ValidKey(dir_key)) return BadKey(prefix);
    UniqueFd dir(OpenDirBeneath(root.get(), dir_key, false, 0));
    if (!dir.ok()) {
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) return StoreStatus::Ok();  // nothing there
      return FromErrno(errno, Path(dir_key));
    }
    StoreStatus s = Walk(dir.release(), dir_key, prefix, objects);
    std::sort(objects->begin(), objects->end(),
              [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return s;
  }

  StoreStatus Delete(const std::vector<std::string>& keys) override {
    AsUser as(config_.identity);
    UniqueFd root = Root(false);
    if (!root.ok()) return errno == ENOENT ? StoreStatus::Ok() : FromErrno(errno, uri_.path);
    for (const auto& key : keys) {
      if (!ValidKey(key)) return BadKey(key);
      auto [parent, name] = SplitParent(key);
      UniqueFd dir(OpenDirBeneath(root.get(), parent, false, 0));
      if (!dir.ok()) {
        // Not there, or a symlink or file where a directory of the store should be: no object.
        if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR) continue;
        return FromErrno(errno, Path(std::string(parent)));
      }
      if (::unlinkat(dir.get(), std::string(name).c_str(), 0) != 0 && errno != ENOENT) {
        return FromErrno(errno, Path(key));
      }
      // Remove directories left empty, up to (not including) the root.
      std::string_view up = parent;
      while (!up.empty()) {
        auto [above, last] = SplitParent(up);
        UniqueFd adir(OpenDirBeneath(root.get(), above, false, 0));
        if (!adir.ok() || ::unlinkat(adir.get(), std::string(last).c_str(), AT_REMOVEDIR) != 0) break;
        up = above;
      }
    }
    return StoreStatus::Ok();
  }

 private:
  static constexpr mode_t kDefaultFileMode = 0644;

  std::string Path(const std::string& key) const { return uri_.path + "/" + key; }
  static std::string TmpKey(const std::string& key, const std::string& id) {
    return key + kTmpTag + id;
  }
  StoreStatus BadKey(const std::string& key) const {
    return StoreStatus::Fatal(uri_.ToString() + ": invalid object key '" + key + "'");
  }

  // The store's root directory, opened (and with `create`, first made with its parents) with the
  // calling thread's identity.
  UniqueFd Root(bool create) const {
    UniqueFd fd(::open(uri_.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.ok() || !create || errno != ENOENT) return fd;
    for (size_t pos = 1; pos <= uri_.path.size(); ++pos) {
      if (pos != uri_.path.size() && uri_.path[pos] != '/') continue;
      const std::string part = uri_.path.substr(0, pos);
      if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return UniqueFd();
    }
    return UniqueFd(::open(uri_.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  // Objects and directories take their modes from the store's root, less anyone else's write
  // permission (what is below the root must be its writer's alone, CheckPrivateDirs): a root of
  // 0750 gives directories 0750 and objects 0640, a shared 1777 or 0775 one 0755 and 0644, a
  // private 0700 one 0700 and 0600 (whatever the writer's umask).
  static mode_t DirModeOf(int root) {
    struct stat st;
    return ::fstat(root, &st) == 0 ? ((st.st_mode & 0755) | 0700) : 0700;
  }
  static mode_t FileModeOf(int root, mode_t wanted) {
    return wanted & (DirModeOf(root) & 0666) & 0666;
  }

  // The directories of `rel_dir` below the root must be the identity's own and writable by
  // nobody else, whether made now or found (another user with write access to the root could
  // have made one first, to read or replace what goes in it).
  StoreStatus CheckPrivateDirs(int root, std::string_view rel_dir) const {
    const uid_t us = config_.identity.uid != 0 ? config_.identity.uid : ::geteuid();
    size_t start = 0;
    while (!rel_dir.empty() && start <= rel_dir.size()) {
      size_t end = rel_dir.find('/', start);
      if (end == std::string_view::npos) end = rel_dir.size();
      const std::string sub(rel_dir.substr(0, end));
      start = end + 1;
      struct stat st;
      UniqueFd parent(OpenDirBeneath(root, SplitParent(sub).first, false, 0));
      if (!parent.ok() || ::fstatat(parent.get(), std::string(SplitParent(sub).second).c_str(), &st,
                                    AT_SYMLINK_NOFOLLOW) != 0) {
        return FromErrno(errno, Path(sub));
      }
      if (Status p = Private(Path(sub), st, S_IFDIR, us); !p) {
        return StoreStatus::Fatal(p.message() + ": refusing to write objects below it");
      }
    }
    return StoreStatus::Ok();
  }

  UniqueFd OpenKey(const std::string& key, int flags) const {
    UniqueFd root = Root(false);
    if (!root.ok()) return root;
    return UniqueFd(OpenBeneath(root.get(), key, flags));
  }

  // Writes a part of the multipart upload `upload_id` of `key`: `write(fd, shown)` on its
  // temporary, opened for writing with the store's identity (`shown`: the temporary's path).
  template <typename Write>
  StoreStatus WritePart(const std::string& key, const std::string& upload_id, Write write) {
    if (!ValidKey(key)) return BadKey(key);
    AsUser as(config_.identity);
    const std::string tmp = TmpKey(key, upload_id);
    UniqueFd fd = OpenKey(tmp, O_WRONLY);
    if (!fd.ok()) return FromErrno(errno, Path(tmp));
    return write(fd.get(), Path(tmp));
  }

  // Writes a whole object: a temporary beside it (mode `mode` within the root's), fsync'ed,
  // renamed into place.
  template <typename Fill>
  StoreStatus PutWith(const std::string& key, mode_t mode, Fill fill) {
    AsUser as(config_.identity);
    UniqueFd root = Root(true);
    if (!root.ok()) return FromErrno(errno, uri_.path);
    auto [parent, name] = SplitParent(key);
    UniqueFd dir(OpenDirBeneath(root.get(), parent, true, DirModeOf(root.get())));
    if (!dir.ok()) {
      return errno == ELOOP ? StoreStatus::Fatal(Path(std::string(parent)) +
                                                 ": a symlink below the store's root; not followed")
                            : FromErrno(errno, Path(std::string(parent)));
    }
    if (StoreStatus p = CheckPrivateDirs(root.get(), parent); !p.ok()) return p;
    const std::string tmp_name = std::string(name) + kTmpTag + RandomId();
    const std::string tmp = Path(std::string(parent).empty() ? tmp_name : std::string(parent) + "/" + tmp_name);
    UniqueFd fd(::openat(dir.get(), tmp_name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC,
                         FileModeOf(root.get(), mode)));
    if (!fd.ok()) return FromErrno(errno, tmp);
    StoreStatus s = fill(fd.get(), tmp);
    if (s.ok()) s = Sync(fd.get(), tmp);
    fd.reset();
    if (s.ok()) s = Publish(dir.get(), tmp_name, std::string(name), Path(key));
    if (!s.ok()) ::unlinkat(dir.get(), tmp_name.c_str(), 0);
    return s;
  }

  // `st` (from lstat) is of type `type`, owned by `uid` and not group/other-writable.
  static Status Private(const std::string& path, const struct stat& st, mode_t type, uid_t uid) {
    if ((st.st_mode & S_IFMT) != type) {
      return Status::Error(path + ": not a " + (type == S_IFDIR ? "directory" : "regular file") +
                           " (a symlink or another user's replacement?)");
    }
    if (st.st_uid != uid) {
      return Status::Error(path + ": owned by uid " + std::to_string(st.st_uid) + ", not uid " +
                           std::to_string(uid) + " who writes this store");
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return Status::Error(path + ": writable by group or others (mode " + mode + ")");
    }
    return Status::Ok();
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

  // renameat(tmp, name) within `dir`, then fsync the directory so the new name survives a crash.
  StoreStatus Publish(int dir, const std::string& tmp_name, const std::string& name,
                      const std::string& shown) const {
    if (::renameat(dir, tmp_name.c_str(), dir, name.c_str()) != 0) return FromErrno(errno, shown);
    if (config_.fsync && ::fsync(dir) != 0) return FromErrno(errno, shown);
    return StoreStatus::Ok();
  }

  // Lists the regular files below the open directory `dfd` (taken over) whose keys start with
  // `prefix`; symlinks and special files are not objects and are never followed.
  StoreStatus Walk(int dfd, const std::string& dir_key, const std::string& prefix,
                   std::vector<ObjectInfo>* out) const {
    DIR* d = ::fdopendir(dfd);
    if (!d) {
      const int err = errno;
      ::close(dfd);
      return FromErrno(err, Path(dir_key));
    }
    StoreStatus s;
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == ".." || name.find(kTmpTag) != std::string::npos) continue;
      std::string key = dir_key.empty() ? name : dir_key + "/" + name;
      struct stat st;
      if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // deleted meanwhile
      if (S_ISDIR(st.st_mode)) {
        std::string as_dir = key + "/";
        // Descend only where the prefix can still match.
        if (as_dir.compare(0, std::min(as_dir.size(), prefix.size()), prefix, 0,
                           std::min(as_dir.size(), prefix.size())) != 0) {
          continue;
        }
        int sub = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) continue;  // replaced or removed meanwhile, or not ours to read
        StoreStatus r = Walk(sub, key, prefix, out);
        if (!r.ok() && r.code != StoreStatus::Code::kNotFound) {
          s = r;
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
