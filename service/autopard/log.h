// autopard's log: one line per message on stderr, which systemd hands to the journal.
//
//   autopard: <message>                   info and notice
//   autopard: warning: <message>          something is off; autopard goes on
//   autopard: error: <message>            a request or task failed for good
//
// When stderr is the journal's stream (systemd sets JOURNAL_STREAM to its device:inode), each
// line starts with its syslog priority, "<3>" to "<7>" (sd-daemon(3)), so `journalctl -p warning
// -u autopard` shows only warnings and errors. `log_level` (autopard.conf, reloaded on SIGHUP)
// drops the lines below it.
//
// Thread safety: every function may be called from any thread; one line is one write(2).
#pragma once

#include <string>

#include "autopar/status.h"

namespace autopar {

enum class LogLevel { kError = 3, kWarning = 4, kNotice = 5, kInfo = 6, kDebug = 7 };

// "error", "warning", "notice", "info", "debug". Error: any other name (the valid ones listed).
Result<LogLevel> ParseLogLevel(const std::string& name);
const char* LogLevelName(LogLevel level);

// The level below which lines are dropped (default kInfo).
void SetLogLevel(LogLevel level);
LogLevel CurrentLogLevel();

// Whether lines carry "<N>" priority prefixes: decided from JOURNAL_STREAM and stderr's inode
// at the first line; tests may force it.
void SetLogPrefixes(bool on);

void Log(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace autopar
