#include "replacing_file.h"

#include <sys/stat.h>

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
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return Status::Error("cannot write '" + path + "': " + std::strerror(errno));
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
