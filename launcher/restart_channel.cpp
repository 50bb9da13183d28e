#include "restart_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace autopar {
namespace {

constexpr size_t kMaxLine = 4096;

Status Errno(const std::string& what) { return Status::Error(what + ": " + std::strerror(errno)); }

int MillisLeft(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
  return left > 0 ? static_cast<int>(left) : 0;
}

bool ParseEndpoint(const std::string& ep, sockaddr_in* sa) {
  size_t colon = ep.rfind(':');
  if (colon == std::string::npos) return false;
  std::memset(sa, 0, sizeof(*sa));
  sa->sin_family = AF_INET;
  int port = std::atoi(ep.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return false;
  sa->sin_port = htons(static_cast<uint16_t>(port));
  return inet_pton(AF_INET, ep.substr(0, colon).c_str(), &sa->sin_addr) == 1;
}

}  // namespace

RestartChannel::~RestartChannel() { Close(); }

void RestartChannel::Close() {
  for (auto& c : conns_) close(c.fd);
  conns_.clear();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (fd_ >= 0) close(fd_);
  epoll_fd_ = fd_ = -1;
}

RestartChannel::RestartChannel(RestartChannel&& other) noexcept
    : fd_(other.fd_), epoll_fd_(other.epoll_fd_), endpoint_(std::move(other.endpoint_)),
      conns_(std::move(other.conns_)) {
  other.fd_ = other.epoll_fd_ = -1;
  other.conns_.clear();
}

RestartChannel& RestartChannel::operator=(RestartChannel&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    epoll_fd_ = other.epoll_fd_;
    endpoint_ = std::move(other.endpoint_);
    conns_ = std::move(other.conns_);
    other.fd_ = other.epoll_fd_ = -1;
    other.conns_.clear();
  }
  return *this;
}

Result<RestartChannel> RestartChannel::Listen(const std::string& addr) {
  sockaddr_in sa;
  if (!ParseEndpoint(addr + ":1", &sa)) {
    return Status::Error("restart channel: not an IPv4 address: '" + addr + "'");
  }
  sa.sin_port = 0;
  RestartChannel ch;
  ch.fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (ch.fd_ < 0) return Errno("restart channel: socket");
  if (bind(ch.fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return Errno("restart channel: bind " + addr);
  }
  // Every other launcher of the step may notify at once; they wait in the backlog, unaccepted,
  // while this launcher is in a fence.
  if (listen(ch.fd_, SOMAXCONN) != 0) return Errno("restart channel: listen");
  socklen_t len = sizeof(sa);
  if (getsockname(ch.fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    return Errno("restart channel: getsockname");
  }
  ch.epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (ch.epoll_fd_ < 0) return Errno("restart channel: epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = ch.fd_;
  if (epoll_ctl(ch.epoll_fd_, EPOLL_CTL_ADD, ch.fd_, &ev) != 0) return Errno("restart channel: epoll_ctl");
  ch.endpoint_ = addr + ":" + std::to_string(ntohs(sa.sin_port));
  return ch;
}

void RestartChannel::Drop(size_t i) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conns_[i].fd, nullptr);
  close(conns_[i].fd);
  conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(i));
}

namespace {

// Reads what `fd` has sent into `line`; true when it has ended (a whole line, the cap, EOF or an
// error), false when it waits for more.
bool ReadLine(int fd, std::string* line, size_t cap) {
  char buf[512];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      line->append(buf, static_cast<size_t>(n));
      if (line->find('\n') != std::string::npos || line->size() >= cap) return true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n == 0 || errno != EAGAIN;
  }
}

// Takes the whole line `text` holds, if any, into `lines`.
void TakeLine(const std::string& text, std::vector<std::string>* lines) {
  const size_t nl = text.find('\n');
  if (nl != std::string::npos) lines->push_back(text.substr(0, nl));
}

}  // namespace

std::vector<std::string> RestartChannel::Drain(int timeout_ms) {
  std::vector<std::string> lines;
  if (fd_ < 0) return lines;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    for (;;) {  // every connection waiting in the backlog
      int c = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (c < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        break;  // EAGAIN: nothing more pending
      }
      // A launcher sends its line as soon as it connects: read at once, it is taken before any
      // flood of silent connections can push it out of the table.
      std::string text;
      if (ReadLine(c, &text, kMaxLine)) {
        TakeLine(text, &lines);
        close(c);
        continue;
      }
      if (conns_.size() >= kMaxConnections) {
        // The oldest makes room; what it has sent by now is taken first, never dropped.
        ReadLine(conns_[0].fd, &conns_[0].line, kMaxLine);
        TakeLine(conns_[0].line, &lines);
        Drop(0);
      }
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = c;
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c, &ev);
      conns_.push_back({c, std::move(text), now});
    }
    // Read what each connection has sent; none waits for another.
    for (size_t i = 0; i < conns_.size();) {
      Conn& c = conns_[i];
      const bool ended = ReadLine(c.fd, &c.line, kMaxLine);
      if (!ended && now - c.since < std::chrono::milliseconds(kMaxIdleMs)) {
        ++i;
        continue;
      }
      TakeLine(c.line, &lines);
      Drop(i);
    }
    // Whatever has arrived is returned at once; a connection still silent stays open (its line
    // wakes fd() when it comes), so idle connections cost a restart nothing.
    if (!lines.empty() || conns_.empty()) return lines;
    const int left = MillisLeft(deadline);
    if (left <= 0) return lines;
    epoll_event ev[8];
    int n = epoll_wait(epoll_fd_, ev, 8, left);
    if (n < 0 && errno != EINTR) return lines;
    if (n == 0) return lines;
  }
}

std::vector<size_t> RestartChannel::Broadcast(const std::vector<std::string>& endpoints,
                                              const std::string& line, int timeout_ms) {
  std::vector<size_t> failed;
  std::vector<pollfd> fds;
  std::vector<size_t> index;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    sockaddr_in sa;
    int s = -1;
    if (ParseEndpoint(endpoints[i], &sa)) s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0 || (connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 &&
                  errno != EINPROGRESS)) {
      if (s >= 0) close(s);
      failed.push_back(i);
      continue;
    }
    fds.push_back({s, POLLOUT, 0});
    index.push_back(i);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  size_t open = fds.size();
  while (open > 0) {
    int n = poll(fds.data(), fds.size(), MillisLeft(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (auto& p : fds) {
      if (p.fd < 0 || p.revents == 0) continue;
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      // One short line fits the socket's send buffer: written at once or not at all.
      bool sent = err == 0 && (p.revents & POLLOUT) &&
                  send(p.fd, line.data(), line.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(line.size());
      if (!sent) failed.push_back(index[static_cast<size_t>(&p - fds.data())]);
      close(p.fd);
      p.fd = -1;
      --open;
    }
  }
  for (size_t k = 0; k < fds.size(); ++k) {
    if (fds[k].fd >= 0) {
      close(fds[k].fd);
      failed.push_back(index[k]);
    }
  }
  std::sort(failed.begin(), failed.end());
  return failed;
}

void Mailbox::Pump(RestartChannel& channel, int wait_ms) {
  if (channel.fd() < 0) return;
  pollfd p{channel.fd(), POLLIN, 0};
  if (wait_ms > 0 && poll(&p, 1, wait_ms) <= 0) return;
  for (const std::string& line : channel.Drain(0)) {
    auto m = DecodePeerMessage(line, token_);
    if (m) inbox_.push_back(std::move(*m));
  }
}

std::optional<PeerMessage> Mailbox::Take(const Want& want) {
  for (auto it = inbox_.begin(); it != inbox_.end(); ++it) {
    if (want(*it)) {
      PeerMessage m = std::move(*it);
      inbox_.erase(it);
      return m;
    }
  }
  return std::nullopt;
}

void Mailbox::Drop(const Want& stale) {
  for (auto it = inbox_.begin(); it != inbox_.end();) it = stale(*it) ? inbox_.erase(it) : it + 1;
}

std::string DeriveKey(const std::string& token, const std::string& purpose) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
       reinterpret_cast<const unsigned char*>(purpose.data()), purpose.size(), mac, &len);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 15];
  }
  return out;
}

Result<std::string> RandomToken() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("getrandom");
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace autopar
