// A file the CLI writes whole or not at all (`autopar report --html FILE`): the content goes to
// FILE.tmp beside it, renamed over FILE once complete, so that a reader (a browser, a web server)
// never sees half a page and a failed run leaves FILE as it was. Opened before the slow part
// (asking autopard), so that an unwritable FILE fails at once. Not thread-safe; move-only.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "autopar/status.h"

namespace autopar::cli {

class ReplacingFile {
 public:
  // Creates (or truncates) FILE.tmp. Error: "cannot write 'FILE': <strerror>".
  static Result<ReplacingFile> Open(const std::string& path);
  ReplacingFile(ReplacingFile&&) = default;
  ReplacingFile& operator=(ReplacingFile&&) = default;
  ~ReplacingFile();  // removes FILE.tmp unless committed

  // Writes `content` to FILE.tmp and renames it over FILE. On error FILE.tmp is removed and FILE
  // is left as it was; the message names FILE and the reason.
  Status Commit(const std::string& content);

 private:
  struct Close {
    void operator()(std::FILE* f) const { (void)std::fclose(f); }
  };
  ReplacingFile(std::string path, std::FILE* f);
  Status Fail(int err);

  std::string path_, tmp_;
  std::unique_ptr<std::FILE, Close> file_;
};

}  // namespace autopar::cli
