// The process half of prewarm.h: a warm interpreter started like the program, told over a
// socket pair (MSG_NOSIGNAL: one that died never kills the launcher with SIGPIPE).
#include "launcher/prewarm.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "launcher/child_process.h"

namespace autopar {

Status WarmInterpreter::Start(const PythonCommand& cmd, const EnvMap& env,
                              const std::vector<int>& cpus, const sigset_t& mask) {
  Discard();
  auto g = env.find("AUTOPAR_RESTART_GENERATION");
  generation_ = g == env.end() ? "" : g->second;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status::Error(std::string("warm interpreter: socketpair: ") + strerror(errno));
  }
  ChildSpec spec{WarmInterpreterArgv(cmd, sv[1]), env, cpus, mask, {sv[1]}};
  int exec_errno = 0;
  auto pid = StartChild(spec, &exec_errno);
  close(sv[1]);
  if (!pid) {
    close(sv[0]);
    return Status::Error("warm interpreter: " + pid.message());
  }
  pid_ = *pid;
  fd_ = sv[0];
  ready_ = false;
  return Status::Ok();
}

bool WarmInterpreter::Ready() {
  if (ready_ || fd_ < 0) return ready_;
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, 0) == 1 && (p.revents & POLLIN)) {
    char c = 0;
    ready_ = recv(fd_, &c, 1, MSG_DONTWAIT) == 1 && c == 'R';
  }
  return ready_;
}

Result<pid_t> WarmInterpreter::Activate(const EnvMap& env) {
  if (pid_ <= 0) return Status::Error("no warm interpreter");
  auto g = env.find("AUTOPAR_RESTART_GENERATION");
  if ((g == env.end() ? "" : g->second) != generation_) {
    Discard();
    return Status::Error("the warm interpreter was made for generation " + generation_ + ", not " +
                         (g == env.end() ? std::string("none") : g->second));
  }
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;  // reaped
    Discard();
    return Status::Error("the warm interpreter is gone (wait status " + std::to_string(status) +
                         ")");
  }
  const std::string request = WarmRequest(env);
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = strerror(errno);
      Discard();
      return Status::Error("the warm interpreter cannot be told: " + why);
    }
    sent += static_cast<size_t>(n);
  }
  // End of the request, but the socket stays open until the next interpreter: closing it while
  // its "R" is unread (an interpreter activated while still importing) would make the kernel
  // reset the pair, and the interpreter would lose the request it has not read yet.
  shutdown(fd_, SHUT_WR);
  if (spent_fd_ >= 0) close(spent_fd_);
  spent_fd_ = fd_;
  fd_ = -1;
  const pid_t pid = pid_;
  pid_ = -1;
  return pid;
}

void WarmInterpreter::Discard() {
  if (fd_ >= 0) close(fd_);
  if (spent_fd_ >= 0) close(spent_fd_);
  fd_ = spent_fd_ = -1;
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
  ready_ = false;
}

}  // namespace autopar
