// Stack capture for a hung rank, before autopard kills it: what the kernel knows of the
// process, and the Python stacks when the rank runs Python.
//
//  - /proc/PID/status "State:" (e.g. "T (stopped)", "S (sleeping)") and /proc/PID/wchan (the
//    kernel function it waits in) are readable by anyone who may see the process;
//  - /proc/PID/stack (the kernel stack) needs root (autopard runs as root) and is shown to root
//    and SlurmUser only (a stack_kernel event); missing or unreadable parts are noted, never fatal;
//  - Python ranks: the autopar Python module registers faulthandler on SIGUSR2
//    (faulthandler.register(SIGUSR2, file=..., all_threads=True)) writing to
//    PythonStackDumpPath(dir, rank); CaptureStack sends SIGUSR2 and waits up to `python_wait_ms`
//    for the file to appear. SIGUSR2 is sent only to a process that catches it (SigCgt in
//    /proc/PID/status), since its default action would kill the rank; a stopped process (state T)
//    cannot run its handler either: no signal is sent and the capture says so.
//
// All process access goes through ProcAccess so tests inject /proc contents, signals and time.
// CaptureStack is reentrant when the ProcAccess functions are.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "autopar/status.h"

namespace autopar {

inline constexpr int kPythonStackSignal = 12;  // SIGUSR2 on Linux
// The most of a Python stack dump that is read (a dump of many threads is a few KiB; the file is
// the user's and could be anything).
inline constexpr size_t kMaxStackDumpBytes = 256 << 10;

struct ProcAccess {
  // The whole content of a file (e.g. "/proc/123/status"); an error when it cannot be read.
  std::function<Result<std::string>(const std::string& path)> read_file;
  // kill(pid, sig).
  std::function<Status(int pid, int sig)> send_signal;
  // sigqueue(pid, sig, value): a signal that carries a value (si_value.sival_int).
  std::function<Status(int pid, int sig, int value)> queue_signal;
  // Sleeps this many milliseconds (polling for the Python dump).
  std::function<void(int ms)> sleep_ms;
};
// The real one (/proc, kill(2), nanosleep) is autopard's: service/failure/proc_access.h.

// Where a rank's Python faulthandler dump goes: "<dir>/stack-rank<R>.txt". `dir` is
// AUTOPAR_STACK_DIR when the task has it, else "/tmp/autopar-stacks/<job_id>".
std::string PythonStackDumpPath(const std::string& dir, int rank);
std::string DefaultStackDir(const std::string& job_id);

struct StackCaptureOptions {
  std::string python_dump_path;  // empty: do not ask Python for its stacks
  int python_wait_ms = 2000;
  // Reads the Python dump (a file the rank's owner names and controls). Empty: proc.read_file.
  // autopard passes one that reads as that owner, regular files only, without blocking, at most
  // a bounded size (service/user_access: ReadUserFile).
  std::function<Result<std::string>(const std::string& path)> read_dump;
};

struct StackCapture {
  int pid = 0;
  std::string state;         // "T (stopped)"; empty when unreadable
  std::string wchan;         // "do_signal_stop"; empty when unreadable or "0"
  std::string kernel_stack;  // lines of /proc/PID/stack joined with " <- "
  bool python = false;       // the process runs a Python interpreter
  std::string python_stack;  // the faulthandler dump, lines joined with "; " (may be empty)
  std::vector<std::string> notes;  // what could not be captured, and why
  // key=value fields for the journal's "stack" event (timeline.h FormatEventFields): everything
  // but the kernel stack, which is root's to see (KernelDetail, the "stack_kernel" event).
  std::string ToDetail() const;
  // pid= kernel_stack= (empty when there is no kernel stack).
  std::string KernelDetail() const;
};

// Never fails: whatever cannot be read is recorded in `notes`.
StackCapture CaptureStack(int pid, const StackCaptureOptions& options, const ProcAccess& proc);

}  // namespace autopar
