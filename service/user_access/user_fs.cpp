#include "user_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pwd.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>

#include "core/ckpt/sha256.h"
#include "service/user_access/beneath.h"

namespace autopar {
namespace {

std::string Errno(const std::string& path) { return path + ": " + std::strerror(errno); }

// Thread-local supplementary groups: the raw system call changes only the calling thread (glibc's
// setgroups() would change every thread of the daemon).
int ThreadSetGroups(const std::vector<gid_t>& groups) {
  return static_cast<int>(syscall(SYS_setgroups, groups.size(), groups.data()));
}

}  // namespace

namespace {
// The user's groups from the group database: `gid` first, then every group listing them.
std::vector<gid_t> GroupsOf(uid_t uid, gid_t gid) {
  std::vector<gid_t> groups{gid};
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (uid != 0 && getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) {
    int n = 64;
    std::vector<gid_t> g(static_cast<size_t>(n));
    if (getgrouplist(pw.pw_name, gid, g.data(), &n) < 0 && n > 64) {
      g.resize(static_cast<size_t>(n));
      if (getgrouplist(pw.pw_name, gid, g.data(), &n) < 0) n = 0;
    }
    if (n > 0) {
      g.resize(static_cast<size_t>(n));
      groups = g;
    }
  }
  return groups;
}
}  // namespace

UserIdentity IdentityOf(uid_t uid) {
  UserIdentity id{uid, static_cast<gid_t>(uid), {}};
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) id.gid = pw.pw_gid;
  id.groups = GroupsOf(id.uid, id.gid);
  return id;
}

UserIdentity WithGroups(UserIdentity id) {
  if (id.uid != 0 && id.groups.empty()) id.groups = GroupsOf(id.uid, id.gid);
  return id;
}

AsUser::AsUser(const UserIdentity& id) {
  if (geteuid() != 0) return;
  // setfsuid(-1) changes nothing and returns the current value.
  const uid_t current = static_cast<uid_t>(setfsuid(static_cast<uid_t>(-1)));
  if (current == id.uid) return;  // nested in a switch to the same user
  saved_uid_ = current;
  saved_gid_ = static_cast<gid_t>(setfsgid(static_cast<gid_t>(-1)));
  saved_groups_.resize(static_cast<size_t>(std::max(getgroups(0, nullptr), 0)));
  if (!saved_groups_.empty() &&
      getgroups(static_cast<int>(saved_groups_.size()), saved_groups_.data()) < 0) {
    saved_groups_.clear();
  }
  // Looked up here only when the identity does not carry them (WithGroups).
  const std::vector<gid_t> groups = !id.groups.empty() ? id.groups
                                    : id.uid == 0       ? std::vector<gid_t>{id.gid}
                                                        : GroupsOf(id.uid, id.gid);
  ThreadSetGroups(groups);
  setfsgid(id.gid);
  setfsuid(id.uid);
  switched_ = true;
}

AsUser::~AsUser() {
  if (!switched_) return;
  setfsuid(saved_uid_);
  setfsgid(saved_gid_);
  ThreadSetGroups(saved_groups_);
}

Result<std::vector<LocalFile>> ListRankFiles(const UserIdentity& id, const std::string& dir) {
  AsUser as(id);
  std::vector<LocalFile> out;
  // Iterative walk over directory descriptors opened with O_NOFOLLOW.
  struct Pending {
    int fd;
    std::string rel;
  };
  int root = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0) return Status::Error(Errno(dir));
  std::vector<Pending> stack{{root, ""}};
  Status error;
  while (!stack.empty()) {
    Pending p = stack.back();
    stack.pop_back();
    DIR* d = fdopendir(p.fd);
    if (!d) {
      close(p.fd);
      if (error.ok()) error = Status::Error(Errno(dir + "/" + p.rel));
      continue;
    }
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      std::string rel = p.rel.empty() ? name : p.rel + "/" + name;
      struct stat st {};
      if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (error.ok()) error = Status::Error(Errno(dir + "/" + rel));
        continue;
      }
      if (error.ok() && st.st_uid != id.uid) {
        error = Status::Error(dir + "/" + rel + ": owned by uid " + std::to_string(st.st_uid) +
                              ", not by the job's owner (uid " + std::to_string(id.uid) + ")");
      }
      if (S_ISDIR(st.st_mode)) {
        int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
          if (error.ok()) error = Status::Error(Errno(dir + "/" + rel));
          continue;
        }
        stack.push_back({sub, rel});
      } else if (S_ISREG(st.st_mode)) {
        if (rel.find(".autopar-tmp") != std::string::npos) continue;
        out.push_back({rel, static_cast<uint64_t>(st.st_size)});
      } else if (error.ok()) {
        error = Status::Error(dir + "/" + rel + ": not a regular file (" +
                              (S_ISLNK(st.st_mode) ? "a symlink" : "a special file") +
                              "); checkpoints hold regular files only");
      }
    }
    closedir(d);
  }
  if (!error.ok()) return error;
  if (out.empty()) return Status::Error(dir + ": no checkpoint files (write them before the commit)");
  std::sort(out.begin(), out.end(), [](const LocalFile& a, const LocalFile& b) { return a.path < b.path; });
  return out;
}

namespace {

// Opens `path` as `id` for reading: the last component not a symlink (`symlink_note` says why in
// the error), a regular file (O_NONBLOCK: a FIFO or a device is refused without blocking).
// Its stat in `st`; the descriptor blocking again.
Result<UniqueFd> OpenRegularAsUser(const UserIdentity& id, const std::string& path,
                                   const char* symlink_note, struct stat* st) {
  AsUser as(id);
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ELOOP) return Status::Error(path + ": " + symlink_note);
    return Status::Error(Errno(path));
  }
  if (fstat(fd.get(), st) != 0) return Status::Error(Errno(path));
  if (!S_ISREG(st->st_mode)) return Status::Error(path + ": not a regular file");
  int flags = fcntl(fd.get(), F_GETFL);
  fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

}  // namespace

Result<int> OpenUserFile(const UserIdentity& id, const std::string& path, int64_t expected_size) {
  struct stat st {};
  auto fd = OpenRegularAsUser(id, path, "is a symlink; checkpoints hold regular files only", &st);
  if (!fd.ok()) return fd.status();
  if (st.st_uid != id.uid) {
    return Status::Error(path + ": owned by uid " + std::to_string(st.st_uid) +
                         ", not by the job's owner (uid " + std::to_string(id.uid) + ")");
  }
  if (expected_size >= 0 && st.st_size != expected_size) {
    return Status::Error(path + ": changed after the commit (size " + std::to_string(st.st_size) +
                         ", committed " + std::to_string(expected_size) + ")");
  }
  return fd->release();
}

Result<std::string> ReadUserFile(const UserIdentity& id, const std::string& path, size_t max_bytes) {
  struct stat st {};
  auto opened = OpenRegularAsUser(id, path, "a symlink; not followed", &st);
  if (!opened.ok()) return opened.status();
  UniqueFd& fd = *opened;
  std::string out;
  out.resize(std::min<size_t>(max_bytes, static_cast<size_t>(std::max<off_t>(st.st_size, 0)) + 1));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = pread(fd.get(), out.data() + got, out.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Error(Errno(path));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  if (got >= max_bytes) {
    out.resize(max_bytes);
    out += "\n... truncated at " + std::to_string(max_bytes) + " bytes";
  }
  return out;
}

Result<UserIdentity> ProcessOwner(int pid) {
  struct stat st {};
  const std::string proc = "/proc/" + std::to_string(pid);
  if (stat(proc.c_str(), &st) != 0) return Status::Error(Errno(proc));
  return UserIdentity{st.st_uid, st.st_gid};
}

Result<std::string> Sha256OfFd(int fd, const std::string& name) {
  Sha256 h;
  std::unique_ptr<char[]> buf(new char[1 << 20]);
  off_t off = 0;
  for (;;) {
    ssize_t n = pread(fd, buf.get(), 1 << 20, off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Error(Errno(name));
    }
    if (n == 0) break;
    h.Update(buf.get(), static_cast<size_t>(n));
    off += n;
  }
  return h.FinishHex();
}

Status MakeDirs(const std::string& dir, mode_t mode) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    size_t next = dir.find('/', pos + 1);
    cur = dir.substr(0, next);
    pos = next;
    if (cur.empty()) continue;
    if (mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) return Status::Error(Errno(cur));
  }
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return Status::Error(dir + ": not a directory");
  return Status::Ok();
}

Status RemoveTreeAsUser(const UserIdentity& id, const std::string& dir) {
  AsUser as(id);
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return errno == ENOENT ? Status::Ok() : Status::Error(Errno(dir));
  if (!S_ISDIR(st.st_mode)) return Status::Error(dir + ": not a directory; not removed");
  static thread_local std::string first_error;
  first_error.clear();
  int rc = nftw(
      dir.c_str(),
      [](const char* path, const struct stat*, int type, FTW*) -> int {
        // Gone already (another thread removing the same tree) is not an error.
        int r = (type == FTW_DP || type == FTW_DNR) ? rmdir(path) : unlink(path);
        if (r != 0 && errno != ENOENT && first_error.empty()) {
          first_error = std::string(path) + ": " + std::strerror(errno);
        }
        return 0;
      },
      16, FTW_DEPTH | FTW_PHYS);
  if (rc != 0 && errno != ENOENT) return Status::Error(Errno(dir));
  if (!first_error.empty()) return Status::Error(first_error);
  return Status::Ok();
}

}  // namespace autopar
