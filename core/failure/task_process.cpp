#include "core/failure/task_process.h"

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/text.h"

namespace autopar {

std::optional<ProcStat> ParseProcStat(const std::string& text) {
  // "PID (COMM) STATE PPID ...": COMM may hold anything, so split at the last ')'.
  size_t open = text.find(" (");
  size_t close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  ProcStat s;
  char* end = nullptr;
  long pid = std::strtol(text.c_str(), &end, 10);
  if (end != text.c_str() + open || pid <= 0) return std::nullopt;
  s.pid = static_cast<pid_t>(pid);
  s.comm = text.substr(open + 2, close - open - 2);
  // Fields after COMM, numbered from 3 (state) as in proc(5).
  if (close + 2 > text.size()) return std::nullopt;
  std::vector<std::string> rest = Split(std::string_view(text).substr(close + 2), ' ');
  if (rest.size() < 20) return std::nullopt;  // up to field 22 (starttime)
  if (rest[0].size() == 1) s.state = rest[0][0];
  const std::string& ppid = rest[1];
  const std::string& start = rest[19];
  s.ppid = static_cast<pid_t>(std::strtol(ppid.c_str(), &end, 10));
  if (*end != '\0' || s.ppid < 0) return std::nullopt;
  s.start_ticks = std::strtoull(start.c_str(), &end, 10);
  if (*end != '\0') return std::nullopt;
  s.pgrp = static_cast<pid_t>(std::strtol(rest[2].c_str(), nullptr, 10));
  for (size_t i = 11; i <= 14; ++i) s.cpu_ticks += std::strtoull(rest[i].c_str(), nullptr, 10);
  if (rest.size() > 21) s.rss_pages = std::strtoll(rest[21].c_str(), nullptr, 10);
  return s;
}

std::optional<ProcStat> ReadProcStat(pid_t pid, const ProcAccess& proc) {
  if (pid <= 0) return std::nullopt;
  auto text = proc.read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!text.ok()) return std::nullopt;
  return ParseProcStat(*text);
}

std::optional<ProcStat> TaskProcessOf(pid_t pid, const ProcAccess& proc) {
  auto self = ReadProcStat(pid, proc);
  if (!self) return std::nullopt;
  ProcStat cur = *self;
  // A task's process tree is shallow; the bound only guards against a malformed /proc.
  for (int depth = 0; depth < 64 && cur.ppid > 1; ++depth) {
    auto parent = ReadProcStat(cur.ppid, proc);
    if (!parent) break;
    if (parent->comm == "slurmstepd" || parent->comm == "autopar-launch") return cur;
    cur = *parent;
  }
  return self;
}

}  // namespace autopar
