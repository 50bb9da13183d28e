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

#include "autopar/launch.h"

namespace autopar {

// The signals forwarded to the program, plus SIGCHLD.
sigset_t ForwardedSignals();
// Blocks ForwardedSignals() in the calling thread; returns the previous mask (the program's).
sigset_t BlockForwardedSignals();

struct ChildSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH (execvp)
  EnvMap env;
  std::vector<int> cpus;          // empty: inherit the affinity
  sigset_t mask;                  // signal mask for the program
};

// Starts the program. Fails when fork fails or the program cannot be executed (the message
// names the program and errno's text; *exec_errno gets the errno, 0 otherwise).
Result<pid_t> StartChild(const ChildSpec& spec, int* exec_errno);

struct ChildOutcome {
  int wait_status = 0;
  int termination_signal = 0;  // SIGINT/SIGTERM the launcher received while waiting, else 0
};
// Waits for `pid`, forwarding signals to its process group. Signals sent by the launcher's parent
// (Slurm's step daemon) are forwarded only when `forward_from_parent` (see
// ForwardSignalFromSlurm in launch.h); signals from anyone else always are.
ChildOutcome SuperviseChild(pid_t pid, bool forward_from_parent);

// A termination signal (SIGINT/SIGTERM) already pending before the program started, or 0.
int PendingTerminationSignal();

}  // namespace autopar
