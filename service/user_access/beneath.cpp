#include "service/user_access/beneath.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace autopar {

bool IsPlainRelativePath(std::string_view rel) {
  if (rel.empty() || rel.front() == '/' || rel.back() == '/') return false;
  size_t start = 0;
  while (start <= rel.size()) {
    size_t end = rel.find('/', start);
    if (end == std::string_view::npos) end = rel.size();
    std::string_view seg = rel.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    start = end + 1;
  }
  return true;
}

std::pair<std::string_view, std::string_view> SplitParent(std::string_view rel) {
  size_t slash = rel.rfind('/');
  if (slash == std::string_view::npos) return {std::string_view(), rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

int OpenDirBeneath(int root_fd, std::string_view rel_dir, bool create, mode_t mode) {
  if (!rel_dir.empty() && !IsPlainRelativePath(rel_dir)) {
    errno = EINVAL;
    return -1;
  }
  int fd = ::fcntl(root_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return -1;
  size_t start = 0;
  while (!rel_dir.empty() && start <= rel_dir.size()) {
    size_t end = rel_dir.find('/', start);
    if (end == std::string_view::npos) end = rel_dir.size();
    const std::string name(rel_dir.substr(start, end - start));
    start = end + 1;
    if (create && ::mkdirat(fd, name.c_str(), mode) != 0 && errno != EEXIST) {
      const int err = errno;
      ::close(fd);
      errno = err;
      return -1;
    }
    int next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    if (next < 0 && err == ENOTDIR) {
      // O_DIRECTORY|O_NOFOLLOW on a symlink fails with ENOTDIR: tell a symlink apart (ELOOP).
      struct stat st {};
      if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) err = ELOOP;
    }
    ::close(fd);
    if (next < 0) {
      errno = err;
      return -1;
    }
    fd = next;
  }
  return fd;
}

int OpenBeneath(int root_fd, std::string_view rel, int flags, mode_t mode, bool create_parents,
                mode_t dir_mode) {
  if (!IsPlainRelativePath(rel)) {
    errno = EINVAL;
    return -1;
  }
  auto [parent, name] = SplitParent(rel);
  int dir = OpenDirBeneath(root_fd, parent, create_parents, dir_mode);
  if (dir < 0) return -1;
  int fd = ::openat(dir, std::string(name).c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
  const int err = errno;
  ::close(dir);
  errno = err;
  return fd;
}

}  // namespace autopar
