#include "replacing_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace autopar::cli {

Result<ReplacingFile> ReplacingFile::Open(const std::string& path) {
  // A directory would fail only at the rename, after the slow part.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::Error("cannot write '" + path + "': " + std::strerror(EISDIR));
  }
  // FILE.tmp is made new, never opened through what is there: root writing into a directory
  // another account can write (autopar-goodput.service, node_exporter's) must not follow a
  // symbolic link planted at FILE.tmp. A stale one (file or link) is removed first; one planted
  // between the two calls makes the open fail (O_EXCL), not write elsewhere.
  const std::string tmp = path + ".tmp";
  (void)::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  std::FILE* f = fd >= 0 ? ::fdopen(fd, "w") : nullptr;
  if (!f) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return Status::Error("cannot write '" + path + "': " + std::strerror(err));
  }
  return ReplacingFile(path, f);
}

ReplacingFile::ReplacingFile(std::string path, std::FILE* f)
    : path_(std::move(path)), tmp_(path_ + ".tmp"), file_(f) {}

ReplacingFile::~ReplacingFile() {
  if (file_) {
    file_.reset();
    (void)std::remove(tmp_.c_str());
  }
}

Status ReplacingFile::Fail(int err) {
  file_.reset();
  (void)std::remove(tmp_.c_str());
  return Status::Error("cannot write '" + path_ + "': " + std::strerror(err));
}

Status ReplacingFile::Commit(const std::string& content) {
  if (!file_) return Status::Error("cannot write '" + path_ + "': already written");
  if (std::fwrite(content.data(), 1, content.size(), file_.get()) != content.size() ||
      std::fflush(file_.get()) != 0) {
    return Fail(errno);
  }
  // fclose reports what a full disk or quota refused to flush.
  if (std::fclose(file_.release()) != 0) return Fail(errno);
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) return Fail(errno);
  return Status::Ok();
}

}  // namespace autopar::cli
