// The process edge of autopar-launch: the program runs as a child in its own process group,
// bound to its CPUs, killed with the launcher (PR_SET_PDEATHSIG), and the launcher forwards
// SIGINT/SIGTERM/SIGUSR1/SIGUSR2/SIGCONT to that group while it waits. Not thread-safe: call
// BlockForwardedSignals() first thing in main(), before any thread (PMIx's progress thread)
// starts, so that the signals are only ever taken by SuperviseChild's sigwaitinfo().
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/launch.h"

namespace autopar {

// The signals forwarded to the program, plus SIGCHLD.
sigset_t ForwardedSignals();
// Blocks ForwardedSignals(), HungProgramSignal() and BadLossSignal() (launch_events.h; autopard's, never
// forwarded) in the calling thread; returns the previous mask (the program's).
sigset_t BlockForwardedSignals();

struct ChildSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH (execvp)
  EnvMap env;
  std::vector<int> cpus;          // empty: inherit the affinity
  sigset_t mask;                  // signal mask for the program
  std::vector<int> inherit_fds;   // kept open in the program (its FD_CLOEXEC cleared there)
};

// Starts the program. Fails when fork fails or the program cannot be executed (the message
// names the program and errno's text; *exec_errno gets the errno, 0 otherwise).
Result<pid_t> StartChild(const ChildSpec& spec, int* exec_errno);

struct SuperviseOptions {
  // Signals sent by the launcher's parent (Slurm's step daemon) are forwarded only when set (see
  // ForwardSignalFromSlurm in launch.h); signals from anyone else always are.
  bool forward_from_parent = true;
  // In-place restarts: the wait also ends, with the program still running, when
  // `wake_fd` is readable (the restart channel: the caller reads it) or when root sends
  // HungProgramSignal() carrying `generation` (autopard: the program hung).
  int wake_fd = -1;
  int64_t generation = -1;
  // The wait also ends, with the program still running, when `timer_fd` (a timerfd) is readable;
  // the caller reads it.
  int timer_fd = -1;
  // The wait also ends, with the program still running, when one of these is readable (the
  // fault-tolerant group's channel and tick; negative ones are ignored).
  std::vector<int> wake_fds;
};
struct ChildOutcome {
  bool exited = true;          // false: woken (see SuperviseOptions); the program still runs
  bool hung = false;           // woken by autopard's HungProgramSignal
  bool bad_loss = false;       // woken by autopard's BadLossSignal (a rollback)
  bool timer = false;          // woken by SuperviseOptions::timer_fd
  int wait_status = 0;
  int termination_signal = 0;  // SIGINT/SIGTERM the launcher received while waiting, else 0
};
// Waits for `pid`, forwarding signals to its process group.
ChildOutcome SuperviseChild(pid_t pid, const SuperviseOptions& options);

// Ends the program's process group: SIGTERM (with SIGCONT, for a stopped program), and SIGKILL
// once `grace_ms` have passed (at once when 0). Returns its wait status.
int StopChild(pid_t pid, int grace_ms);

// A termination signal (SIGINT/SIGTERM) already pending before the program started, or 0.
int PendingTerminationSignal();

}  // namespace autopar
