#include "child_process.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace autopar {

sigset_t ForwardedSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGCONT, SIGCHLD}) sigaddset(&set, s);
  return set;
}

sigset_t BlockForwardedSignals() {
  sigset_t set = ForwardedSignals(), old;
  sigemptyset(&old);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  return old;
}

Result<pid_t> StartChild(const ChildSpec& spec, int* exec_errno) {
  *exec_errno = 0;
  // Everything the child needs is prepared before fork(): after it, only async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : spec.cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(static_cast<size_t>(c), &cpus);
  }
  // PATH of the program's environment, as execvpe searches it.
  std::string path = spec.env.count("PATH") ? spec.env.at("PATH") : "/usr/local/bin:/usr/bin:/bin";
  std::vector<std::string> candidates;
  if (args[0].find('/') != std::string::npos) {
    candidates.push_back(args[0]);
  } else {
    size_t pos = 0;
    while (pos <= path.size()) {
      size_t colon = path.find(':', pos);
      std::string dir = path.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
      candidates.push_back((dir.empty() ? "." : dir) + "/" + args[0]);
      if (colon == std::string::npos) break;
      pos = colon + 1;
    }
  }

  // The child shares the launcher's memory until it execs (clone with CLONE_VM|CLONE_VFORK, as
  // posix_spawn does): no page tables to copy and no copy-on-write faults in the launcher, whose
  // address space (PMIx, its threads) is large next to the little a child needs before execve.
  // The launcher is suspended meanwhile; the child touches only `exec`, its own stack and
  // async-signal-safe calls, and all signals stay blocked until it installs the program's mask.
  struct ExecArgs {
    const ChildSpec* spec;
    const cpu_set_t* cpus;
    const std::vector<std::string>* candidates;
    char** argv;
    char** envp;
    pid_t parent;
    int err;  // written by the child when no candidate could be executed
  } exec{&spec, &cpus, &candidates, argv.data(), envp.data(), getpid(), 0};
  auto child_main = [](void* arg) -> int {
    auto* e = static_cast<ExecArgs*>(arg);
    setpgid(0, 0);
    // The program must not outlive a launcher that Slurm killed with SIGKILL.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != e->parent) _exit(128 + SIGKILL);
    for (int s : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGCONT, SIGCHLD, SIGPIPE}) signal(s, SIG_DFL);
    // A handler a library installed must not run in this child (it shares the launcher's memory)
    // between unblocking and execve.
    for (int s = 1; s < NSIG; ++s) {
      struct sigaction sa;
      if (sigaction(s, nullptr, &sa) == 0 && sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN) {
        signal(s, SIG_DFL);
      }
    }
    if (!e->spec->cpus.empty()) sched_setaffinity(0, sizeof(*e->cpus), e->cpus);
    sigprocmask(SIG_SETMASK, &e->spec->mask, nullptr);
    int err = ENOENT;
    for (const auto& c : *e->candidates) {
      execve(c.c_str(), e->argv, e->envp);
      // Like execvp: remember a permission problem, keep searching on ENOENT/ENOTDIR.
      if (errno != ENOENT && errno != ENOTDIR) err = errno;
    }
    e->err = err;
    _exit(err == ENOENT ? 127 : 126);
  };
  // Not value-initialized: the child touches only the top pages of its stack.
  constexpr size_t kStackBytes = 256 * 1024;
  std::unique_ptr<char[]> stack(new char[kStackBytes]);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = clone(child_main, stack.get() + kStackBytes, CLONE_VM | CLONE_VFORK | SIGCHLD, &exec);
  int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return Status::Error(std::string("clone: ") + strerror(clone_errno));
  setpgid(pid, pid);  // also in the parent, so a signal right after the start reaches the group
  if (exec.err != 0) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    *exec_errno = exec.err;
    return Status::Error("program '" + spec.argv[0] + "' cannot be started: " + strerror(exec.err));
  }
  return pid;
}

ChildOutcome SuperviseChild(pid_t pid, bool forward_from_parent) {
  ChildOutcome out;
  sigset_t set = ForwardedSignals();
  pid_t parent = getppid();
  for (;;) {
    // A SIGCHLD may have been merged with one that arrived before we started waiting.
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      out.wait_status = status;
      return out;
    }
    if (r < 0 && errno != EINTR) {
      out.wait_status = 1 << 8;  // lost the child (cannot happen unless someone reaped it)
      return out;
    }
    siginfo_t si;
    int sig = sigwaitinfo(&set, &si);
    if (sig < 0 || sig == SIGCHLD) continue;
    if (sig == SIGINT || sig == SIGTERM) out.termination_signal = sig;
    bool from_parent = si.si_code == SI_USER && si.si_pid == parent;
    if (!from_parent || forward_from_parent) kill(-pid, sig);
  }
}

int PendingTerminationSignal() {
  sigset_t pending;
  sigemptyset(&pending);
  if (sigpending(&pending) != 0) return 0;
  for (int s : {SIGTERM, SIGINT}) {
    if (sigismember(&pending, s)) return s;
  }
  return 0;
}

}  // namespace autopar
