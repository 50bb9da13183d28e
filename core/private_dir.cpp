#include "core/private_dir.h"

#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/unique_fd.h"

namespace autopar {
namespace {

// The calling thread's file-system identity, switched for one scope (setfsuid(2) is per thread).
class AsOwner {
 public:
  explicit AsOwner(const DirOwner& o)
      : old_gid_(setfsgid(o.gid)), old_uid_(setfsuid(o.uid)) {}
  AsOwner(const AsOwner&) = delete;
  AsOwner& operator=(const AsOwner&) = delete;
  ~AsOwner() {
    setfsuid(static_cast<uid_t>(old_uid_));
    setfsgid(static_cast<gid_t>(old_gid_));
  }

 private:
  int old_gid_;
  int old_uid_;
};

std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// `path` is `root` or below it (whole components).
bool Within(const std::string& path, const std::string& root) {
  if (root.empty()) return false;
  if (root == "/") return true;
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

Status Refuse(const std::string& what, const std::string& path, const std::string& why) {
  return Status::Error(what + ": " + path + ": " + why +
                       " (refused: another user could read or replace the job's files there)");
}

Status CheckComponent(const std::string& what, const std::string& path, const struct stat& st,
                      const DirOwner& owner, bool last) {
  if (!S_ISDIR(st.st_mode)) return Refuse(what, path, "is not a directory");
  const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (last) {
    if (st.st_uid != owner.uid)
      return Refuse(what, path, "is owned by uid " + std::to_string(st.st_uid) +
                                    ", not by the job's owner (uid " + std::to_string(owner.uid) + ")");
    if (others_write)
      return Refuse(what, path, "is writable by group or others (mode " + Octal(st.st_mode) + ")");
    return Status::Ok();
  }
  if (st.st_uid != 0 && st.st_uid != owner.uid)
    return Refuse(what, path, "is owned by uid " + std::to_string(st.st_uid) +
                                  ", not by root or the job's owner (uid " +
                                  std::to_string(owner.uid) + ")");
  if (others_write && (st.st_mode & S_ISVTX) == 0)
    return Refuse(what, path, "is writable by group or others and not sticky (mode " +
                                  Octal(st.st_mode) + ")");
  return Status::Ok();
}

std::string Errno(int e) { return std::strerror(e); }

// Makes `name` in `parent` (at `path`, whose parent is at `parent_path`) as the rules of the
// header say; EEXIST is not an error (another task of the job made it first).
Status MakeComponent(const std::string& what, int parent, const struct stat& parent_st,
                     const std::string& parent_path, const std::string& name,
                     const std::string& path, const DirOwner& owner,
                     const std::vector<std::string>& shared_roots, bool* made_shared,
                     bool* made_for_owner) {
  bool shared_part = false, below_shared = false;
  for (const std::string& root : shared_roots) {
    shared_part = shared_part || Within(root, path);
    below_shared = below_shared || Within(parent_path, root);
  }
  int rc;
  if (shared_part) {
    rc = mkdirat(parent, name.c_str(), 0755);
    *made_shared = rc == 0;
  } else if (below_shared && parent_st.st_uid == 0) {
    rc = mkdirat(parent, name.c_str(), 0700);
    *made_for_owner = rc == 0;
  } else {
    AsOwner as(owner);
    rc = mkdirat(parent, name.c_str(), 0700);
  }
  if (rc != 0 && errno != EEXIST)
    return Status::Error(what + ": cannot make " + path + " as uid " + std::to_string(owner.uid) +
                         ": " + Errno(errno));
  return Status::Ok();
}

}  // namespace

std::string StaticPrefix(const std::string& pattern) {
  const size_t pct = pattern.find('%');
  if (pct == std::string::npos) return pattern;
  const size_t slash = pattern.rfind('/', pct);
  if (slash == std::string::npos || slash == 0) return "";
  return pattern.substr(0, slash);
}

Status MakePrivateDir(const std::string& what, const std::string& path, const DirOwner& owner,
                      const std::vector<std::string>& shared_roots) {
  if (path.empty() || path[0] != '/') return Status::Error(what + ": " + path + ": not an absolute path");
  std::vector<std::string> names;
  for (size_t i = 1; i <= path.size();) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string name = path.substr(i, j - i);
    if (name == "." || name == "..")
      return Status::Error(what + ": " + path + ": '.' and '..' are not allowed");
    if (!name.empty()) names.push_back(std::move(name));
    i = j + 1;
  }
  if (names.empty()) return Refuse(what, "/", "is not a directory of the job's own");
  UniqueFd dir(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return Status::Error(what + ": cannot open /: " + Errno(errno));
  struct stat st {};
  if (fstat(dir.get(), &st) != 0) return Status::Error(what + ": cannot stat /: " + Errno(errno));
  if (Status s = CheckComponent(what, "/", st, owner, false); !s.ok()) return s;
  std::string at;  // the path of `dir` ("" for "/")
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string parent_path = at.empty() ? "/" : at;
    const std::string here = at + "/" + names[i];
    const bool last = i + 1 == names.size();
    const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    UniqueFd next(openat(dir.get(), names[i].c_str(), flags));
    bool made_shared = false, made_for_owner = false;
    if (next.get() < 0 && errno == ENOENT) {
      if (Status s = MakeComponent(what, dir.get(), st, parent_path, names[i], here, owner,
                                   shared_roots, &made_shared, &made_for_owner);
          !s.ok())
        return s;
      next = UniqueFd(openat(dir.get(), names[i].c_str(), flags));
    }
    if (next.get() < 0) {
      if (errno == ELOOP || errno == ENOTDIR) return Refuse(what, here, "is a symlink or not a directory");
      return Status::Error(what + ": cannot open " + here + ": " + Errno(errno));
    }
    // What this call made gets its exact mode and owner (the umask and the parent's setgid bit
    // do not decide them); the descriptor is the directory made: a name swapped meanwhile is not.
    if (made_shared && (fchown(next.get(), 0, 0) != 0 || fchmod(next.get(), 0755) != 0))
      return Status::Error(what + ": cannot set up " + here + ": " + Errno(errno));
    if (made_for_owner && (fchown(next.get(), owner.uid, owner.gid) != 0 || fchmod(next.get(), 0700) != 0))
      return Status::Error(what + ": cannot give " + here + " to uid " + std::to_string(owner.uid) +
                           ": " + Errno(errno));
    if (fstat(next.get(), &st) != 0) return Status::Error(what + ": cannot stat " + here + ": " + Errno(errno));
    if (Status s = CheckComponent(what, here, st, owner, last); !s.ok()) return s;
    dir = std::move(next);
    at = here;
  }
  return Status::Ok();
}

}  // namespace autopar
