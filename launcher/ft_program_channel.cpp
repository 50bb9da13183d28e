#include "launcher/ft_program_channel.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace autopar {
namespace {

Status Errno(const std::string& what) {
  return Status::Error("fault-tolerance channel: " + what + ": " + std::strerror(errno));
}

}  // namespace

FtProgramChannel::~FtProgramChannel() { Close(); }

FtProgramChannel::FtProgramChannel(FtProgramChannel&& other) noexcept { *this = std::move(other); }

FtProgramChannel& FtProgramChannel::operator=(FtProgramChannel&& other) noexcept {
  if (this != &other) {
    Close();
    listen_fd_ = other.listen_fd_;
    epoll_fd_ = other.epoll_fd_;
    conn_ = other.conn_;
    dir_ = std::move(other.dir_);
    path_ = std::move(other.path_);
    pending_ = std::move(other.pending_);
    other.listen_fd_ = other.epoll_fd_ = other.conn_ = -1;
    other.dir_.clear();
    other.path_.clear();
  }
  return *this;
}

void FtProgramChannel::Close() {
  Disconnect();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (listen_fd_ >= 0) close(listen_fd_);
  epoll_fd_ = listen_fd_ = -1;
  if (!path_.empty()) unlink(path_.c_str());
  if (!dir_.empty()) rmdir(dir_.c_str());
  path_.clear();
  dir_.clear();
}

Result<FtProgramChannel> FtProgramChannel::Open(const std::string& parent) {
  FtProgramChannel ch;
  std::string tmpl = parent + "/autopar-ft-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return Errno("mkdtemp " + tmpl);  // 0700
  ch.dir_ = tmpl;
  ch.path_ = tmpl + "/sock";
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (ch.path_.size() >= sizeof(sa.sun_path)) {
    return Status::Error("fault-tolerance channel: path too long: " + ch.path_);
  }
  std::memcpy(sa.sun_path, ch.path_.c_str(), ch.path_.size() + 1);
  ch.listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (ch.listen_fd_ < 0) return Errno("socket");
  if (bind(ch.listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) return Errno("bind " + ch.path_);
  if (listen(ch.listen_fd_, 4) != 0) return Errno("listen");
  ch.epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (ch.epoll_fd_ < 0) return Errno("epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = ch.listen_fd_;
  if (epoll_ctl(ch.epoll_fd_, EPOLL_CTL_ADD, ch.listen_fd_, &ev) != 0) return Errno("epoll_ctl");
  return ch;
}

void FtProgramChannel::Disconnect() {
  if (conn_ < 0) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn_, nullptr);
  close(conn_);
  conn_ = -1;
  pending_.clear();
}

std::vector<std::string> FtProgramChannel::Drain() {
  std::vector<std::string> lines;
  for (;;) {
    int c = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      break;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != getuid()) {
      close(c);  // not the job's user: not its program
      continue;
    }
    Disconnect();  // a replacement's connection takes the place of the program it replaces
    conn_ = c;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = conn_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, conn_, &ev);
  }
  char buf[8192];
  while (conn_ >= 0) {
    ssize_t n = read(conn_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0 || errno != EAGAIN) Disconnect();  // the program closed its end (or died)
      break;
    }
    pending_.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = pending_.find('\n')) != std::string::npos) {
      lines.push_back(pending_.substr(0, nl));
      pending_.erase(0, nl + 1);
    }
    if (pending_.size() > kMaxLine) Disconnect();
  }
  return lines;
}

Status FtProgramChannel::Send(const std::string& line) {
  if (conn_ < 0) return Status::Error("fault-tolerance channel: no program connected");
  const std::string data = line + "\n";
  size_t off = 0;
  int full_ms = 0;  // a stopped program cannot read: its line is dropped after a while
  while (off < data.size()) {
    ssize_t n = send(conn_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && full_ms < kSendTimeoutMs) {
      usleep(1000);
      ++full_ms;
      continue;
    }
    if (n < 0) {
      Disconnect();
      return Errno("send");
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace autopar
