#include "log.h"

#include "core/text.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace autopar {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
// -1: not decided yet; 0 or 1 once decided (or forced).
std::atomic<int> g_prefixes{-1};

constexpr struct {
  LogLevel level;
  const char* name;
} kLevels[] = {{LogLevel::kError, "error"},   {LogLevel::kWarning, "warning"},
               {LogLevel::kNotice, "notice"}, {LogLevel::kInfo, "info"},
               {LogLevel::kDebug, "debug"}};

// systemd connects stderr to the journal and names that stream in JOURNAL_STREAM
// ("DEVICE:INODE"); a stderr redirected elsewhere afterwards no longer matches.
bool StderrIsJournal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev &&
         static_cast<unsigned long long>(st.st_ino) == ino;
}

bool Prefixes() {
  int p = g_prefixes.load();
  if (p < 0) {
    p = StderrIsJournal() ? 1 : 0;
    g_prefixes.store(p);
  }
  return p == 1;
}

}  // namespace

Result<LogLevel> ParseLogLevel(const std::string& name) {
  for (const auto& l : kLevels) {
    if (name == l.name) return l.level;
  }
  return Status::Error("'" + name + "' is not a level (error, warning, notice, info, debug)");
}

const char* LogLevelName(LogLevel level) {
  for (const auto& l : kLevels) {
    if (l.level == level) return l.name;
  }
  return "info";
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel CurrentLogLevel() { return static_cast<LogLevel>(g_level.load()); }
void SetLogPrefixes(bool on) { g_prefixes.store(on ? 1 : 0); }

void Log(LogLevel level, const char* format, ...) {
  if (static_cast<int>(level) > g_level.load()) return;
  char line[4096];
  int n = 0;
  if (Prefixes()) n = std::snprintf(line, sizeof line, "<%d>", static_cast<int>(level));
  const char* tag = level == LogLevel::kError     ? "error: "
                    : level == LogLevel::kWarning ? "warning: "
                                                  : "";
  n += std::snprintf(line + n, sizeof line - n, "autopard: %s", tag);
  char text[4096];
  va_list args;
  va_start(args, format);
  const int body = std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  // A message may quote what a job named (a checkpoint file, an error): its control characters
  // are escaped, so that a newline cannot start a forged line (with its own "<0>" priority) nor
  // an escape sequence reach the terminal of an admin reading the log.
  const std::string safe = body < 0 ? std::string() : EscapeControl(text);
  // A line longer than the buffer is cut; it still ends with a newline.
  size_t len = std::min(sizeof line - 2, static_cast<size_t>(n) + safe.size());
  std::memcpy(line + n, safe.data(), len - static_cast<size_t>(n));
  line[len++] = '\n';
  ssize_t unused = ::write(STDERR_FILENO, line, len);
  (void)unused;
}

}  // namespace autopar
