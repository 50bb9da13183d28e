// File operations that autopard (running as root) performs on behalf of a job's owner, with the
// owner's filesystem identity: the calling thread switches its fsuid/fsgid and supplementary
// groups to the user (per-thread on Linux) for the duration, so the kernel applies the user's
// permissions; files are opened with O_NOFOLLOW and must be regular files owned by the user.
// A user can therefore never make the daemon read, write or delete a file they could not.
//
// Thread safety: every function is reentrant; the identity switch affects the calling thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autopar/status.h"

namespace autopar {

struct UserIdentity {
  UserIdentity() = default;
  UserIdentity(uid_t u, gid_t g, std::vector<gid_t> gs = {}) : uid(u), gid(g), groups(std::move(gs)) {}
  uid_t uid = 0;
  gid_t gid = 0;
  // Supplementary groups (getgrouplist); empty: looked up by each AsUser (WithGroups fills them
  // once, for an identity used again and again, such as a store's).
  std::vector<gid_t> groups;
};
// The user's primary group from the password database (their uid as gid when unknown), and their
// groups.
UserIdentity IdentityOf(uid_t uid);
// `id` with its supplementary groups looked up (no-op when it has them, or for root).
UserIdentity WithGroups(UserIdentity id);

// RAII: switches the calling thread's filesystem identity (fsuid, fsgid, supplementary groups)
// to `id`, and back to what it was when it goes (so switches nest: a store acting as the user,
// called inside a switch to the same user, changes nothing). No-op when the process is not root.
// The kernel drops the filesystem capabilities (CAP_DAC_OVERRIDE, CAP_FOWNER, ...) while fsuid
// is not 0: the user's permissions apply exactly.
class AsUser {
 public:
  explicit AsUser(const UserIdentity& id);
  ~AsUser();
  AsUser(const AsUser&) = delete;
  AsUser& operator=(const AsUser&) = delete;

 private:
  bool switched_ = false;
  uid_t saved_uid_ = 0;
  gid_t saved_gid_ = 0;
  std::vector<gid_t> saved_groups_;
};

struct LocalFile {
  std::string path;  // relative to the listed directory, '/'-separated
  uint64_t size = 0;
};
// Every regular file under `dir` (recursively, sorted), as `id`. Symlinks, devices and files not
// owned by `id.uid` are errors naming the path; so is a missing or empty directory.
Result<std::vector<LocalFile>> ListRankFiles(const UserIdentity& id, const std::string& dir);

// Opens a file for reading as `id`: O_NOFOLLOW, must be a regular file owned by `id.uid` and
// `expected_size` bytes long (when >= 0). Returns the descriptor (the caller closes it).
Result<int> OpenUserFile(const UserIdentity& id, const std::string& path, int64_t expected_size);

// Reads a small file the user names (a Python stack dump), as `id`: the last component must not
// be a symlink and the file must be a regular file (a FIFO, a device or a socket is refused
// without blocking: O_NONBLOCK); at most `max_bytes` are read (the rest is left, and the result
// ends with "\n... truncated at N bytes"). Errors say no more than the kernel told the user.
Result<std::string> ReadUserFile(const UserIdentity& id, const std::string& path, size_t max_bytes);

// The owner of a running process (the uid of /proc/PID), or an error when it is gone.
Result<UserIdentity> ProcessOwner(int pid);

// SHA-256 of an open file (pread from offset 0).
Result<std::string> Sha256OfFd(int fd, const std::string& name);

// Removes the directory tree `dir` as `id` (never following symlinks). Missing is not an error, nor
// is an entry that another thread or process removes meanwhile.
Status RemoveTreeAsUser(const UserIdentity& id, const std::string& dir);

// mkdir -p as the calling identity (mode 0700 for new directories).
Status MakeDirs(const std::string& dir, mode_t mode);

}  // namespace autopar
