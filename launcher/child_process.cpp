#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/signalfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "core/failure/launch_events.h"

namespace autopar {

sigset_t ForwardedSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGCONT, SIGCHLD}) sigaddset(&set, s);
  return set;
}

sigset_t BlockForwardedSignals() {
  sigset_t set = ForwardedSignals(), old;
  sigaddset(&set, HungProgramSignal());
  sigaddset(&set, BadLossSignal());
  sigemptyset(&old);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  return old;
}

namespace {

// The paths execvpe would try for `program`, in order: itself when it names a directory, else
// each directory of PATH (the program's environment's, or the default).
std::vector<std::string> ExecCandidates(const std::string& program,
                                        const EnvMap& env) {
  if (program.find('/') != std::string::npos) return {program};
  const std::string path = env.count("PATH") ? env.at("PATH") : "/usr/local/bin:/usr/bin:/bin";
  std::vector<std::string> candidates;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t colon = path.find(':', pos);
    std::string dir = path.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    candidates.push_back((dir.empty() ? "." : dir) + "/" + program);
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  return candidates;
}

// What the child reads between clone and execve, all prepared before: after clone only
// async-signal-safe calls.
struct ExecArgs {
  const ChildSpec* spec;
  const cpu_set_t* cpus;
  const std::vector<std::string>* candidates;
  char** argv;
  char** envp;
  pid_t parent;
  int err;  // written by the child when no candidate could be executed
};

// The child's side, sharing the launcher's memory until it execs.
int ChildMain(void* arg) {
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
  for (int fd : e->spec->inherit_fds) fcntl(fd, F_SETFD, 0);  // the child's own descriptor table
  sigprocmask(SIG_SETMASK, &e->spec->mask, nullptr);
  int err = ENOENT;
  for (const auto& c : *e->candidates) {
    execve(c.c_str(), e->argv, e->envp);
    // Like execvp: remember a permission problem, keep searching on ENOENT/ENOTDIR.
    if (errno != ENOENT && errno != ENOTDIR) err = errno;
  }
  e->err = err;
  _exit(err == ENOENT ? 127 : 126);
}

}  // namespace

Result<pid_t> StartChild(const ChildSpec& spec, int* exec_errno) {
  *exec_errno = 0;
  // Everything the child needs is prepared before clone(): after it, only async-signal-safe calls.
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
  const std::vector<std::string> candidates = ExecCandidates(args[0], spec.env);
  // The child shares the launcher's memory until it execs (clone with CLONE_VM|CLONE_VFORK, as
  // posix_spawn does): no page tables to copy and no copy-on-write faults in the launcher, whose
  // address space (PMIx, its threads) is large next to the little a child needs before execve.
  // The launcher is suspended meanwhile; the child touches only `exec`, its own stack and
  // async-signal-safe calls, and all signals stay blocked until it installs the program's mask.
  ExecArgs exec{&spec, &cpus, &candidates, argv.data(), envp.data(), getpid(), 0};
  // Not value-initialized: the child touches only the top pages of its stack.
  constexpr size_t kStackBytes = 256 * 1024;
  std::unique_ptr<char[]> stack(new char[kStackBytes]);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = clone(ChildMain, stack.get() + kStackBytes, CLONE_VM | CLONE_VFORK | SIGCHLD, &exec);
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

constexpr size_t kMaxWakeFds = 4;

ChildOutcome SuperviseChild(pid_t pid, const SuperviseOptions& options) {
  ChildOutcome out;
  sigset_t set = ForwardedSignals();
  if (options.generation >= 0) {
    sigaddset(&set, HungProgramSignal());
    sigaddset(&set, BadLossSignal());
  }
  // Blocked since main() (BlockForwardedSignals), so they queue for this descriptor only.
  int sfd = signalfd(-1, &set, SFD_CLOEXEC);
  pid_t parent = getppid();
  for (;;) {
    // A SIGCHLD may have been merged with one that arrived before we started waiting.
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      out.wait_status = status;
      break;
    }
    if (r < 0 && errno != EINTR) {
      out.wait_status = 1 << 8;  // lost the child (cannot happen unless someone reaped it)
      break;
    }
    // A negative descriptor is ignored by poll().
    pollfd fds[3 + kMaxWakeFds] = {{sfd, POLLIN, 0}, {options.wake_fd, POLLIN, 0}, {options.timer_fd, POLLIN, 0}};
    size_t nfds = 3;
    for (size_t i = 0; i < options.wake_fds.size() && i < kMaxWakeFds; ++i) {
      fds[nfds++] = {options.wake_fds[i], POLLIN, 0};
    }
    int n = poll(fds, nfds, sfd < 0 ? 100 : -1);
    if (n < 0 && errno != EINTR) break;
    bool woken = n > 0 && (fds[1].revents & POLLIN);
    for (size_t i = 3; i < nfds && n > 0; ++i) woken = woken || (fds[i].revents & POLLIN);
    if (woken) {
      out.exited = false;
      break;
    }
    if (n > 0 && (fds[2].revents & POLLIN)) {
      out.exited = false;
      out.timer = true;
      break;
    }
    if (sfd < 0 || n <= 0 || !(fds[0].revents & POLLIN)) continue;
    signalfd_siginfo si;
    if (read(sfd, &si, sizeof(si)) != static_cast<ssize_t>(sizeof(si))) continue;
    int sig = static_cast<int>(si.ssi_signo);
    if (sig == SIGCHLD) continue;
    if (sig == HungProgramSignal() || sig == BadLossSignal()) {
      // Only autopard (root) may say the program hung or its loss went bad, and only about this
      // generation.
      if (si.ssi_uid == 0 && si.ssi_code == SI_QUEUE && si.ssi_int == options.generation) {
        out.exited = false;
        (sig == HungProgramSignal() ? out.hung : out.bad_loss) = true;
        break;
      }
      continue;
    }
    if (sig == SIGINT || sig == SIGTERM) out.termination_signal = sig;
    bool from_parent = si.ssi_code == SI_USER && static_cast<pid_t>(si.ssi_pid) == parent;
    if (!from_parent || options.forward_from_parent) kill(-pid, sig);
  }
  if (sfd >= 0) close(sfd);
  return out;
}

int StopChild(pid_t pid, int grace_ms) {
  kill(-pid, grace_ms > 0 ? SIGTERM : SIGKILL);
  kill(-pid, SIGCONT);  // a stopped program takes its SIGTERM only once continued
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  bool killed = grace_ms <= 0;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return 1 << 8;
    if (!killed && std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      killed = true;
    }
    struct timespec tick {0, 20 * 1000 * 1000};
    sigtimedwait(&chld, nullptr, &tick);
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
