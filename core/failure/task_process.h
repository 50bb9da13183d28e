// Which process of a Slurm task a peer of autopard belongs to (`autopar heartbeat`).
//
// A heartbeat may come from a process that exits right after sending it (the `autopar heartbeat`
// command in a shell loop). The rank is then alive as long as its task is: the task's process is
// the sender's ancestor (or the sender itself) whose parent is slurmstepd or autopar-launch, found
// by walking /proc/PID/stat's parent links. Reads /proc through ProcAccess only; reentrant.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "core/failure/stack_capture.h"

namespace autopar {

// The fields of /proc/PID/stat that identify a process.
struct ProcStat {
  pid_t pid = 0;
  std::string comm;         // the name between the parentheses (may contain spaces or ')')
  char state = '?';         // field 3: R, S, D, Z (zombie), X (dead), ...
  pid_t ppid = 0;
  uint64_t start_ticks = 0;  // field 22: start time since boot; with pid, unique over time
  pid_t pgrp = 0;            // field 5: process group
  uint64_t cpu_ticks = 0;    // fields 14-17: utime + stime + cutime + cstime (its reaped children)
  int64_t rss_pages = 0;     // field 24
};
// Parses /proc/PID/stat; nullopt when malformed.
std::optional<ProcStat> ParseProcStat(const std::string& text);
// Reads and parses /proc/<pid>/stat; nullopt when the process is gone or unreadable.
std::optional<ProcStat> ReadProcStat(pid_t pid, const ProcAccess& proc);

// The task process of `pid` (see above): `pid` itself when its parent is slurmstepd or
// autopar-launch, or when no such ancestor exists (not a Slurm task, or the walk hit init or an
// unreadable process); nullopt when `pid` itself is gone.
std::optional<ProcStat> TaskProcessOf(pid_t pid, const ProcAccess& proc);

}  // namespace autopar
