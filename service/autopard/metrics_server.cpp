#include "metrics_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/text.h"

namespace autopar {
namespace {

constexpr size_t kMaxRequest = 8192;
constexpr int kClientBudgetMs = 2000;

// Sends all of `data` before `deadline`; false on error or timeout.
bool SendAll(int fd, const std::string& data, std::chrono::steady_clock::time_point deadline) {
  size_t off = 0;
  while (off < data.size()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string Response(int code, const char* reason, const std::string& type, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

Result<ListenAddress> ParseListenAddress(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Status::Error(why + ", got '" + text + "' (e.g. 127.0.0.1:9464 or [::1]:9464)");
  };
  ListenAddress a;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("must be [IPV6]:PORT");
    }
    a.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
    in6_addr v6{};
    if (inet_pton(AF_INET6, a.host.c_str(), &v6) != 1) return bad("not a numeric IPv6 address");
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos) return bad("must be ADDRESS:PORT");
    a.host = text.substr(0, colon);
    port = text.substr(colon + 1);
    in_addr v4{};
    if (inet_pton(AF_INET, a.host.c_str(), &v4) != 1) return bad("not a numeric IPv4 address");
  }
  auto p = ParseInt(port, 0, 65535);
  if (!p) return bad("the port must be an integer in [0, 65535]");
  a.port = static_cast<int>(*p);
  return a;
}

Status MetricsServer::Start(const ListenAddress& address, Render render) {
  render_ = std::move(render);
  const bool v6 = address.host.find(':') != std::string::npos;
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (v6) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(static_cast<uint16_t>(address.port));
    inet_pton(AF_INET6, address.host.c_str(), &s6->sin6_addr);
    len = sizeof(*s6);
  } else {
    auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
    s4->sin_family = AF_INET;
    s4->sin_port = htons(static_cast<uint16_t>(address.port));
    inet_pton(AF_INET, address.host.c_str(), &s4->sin_addr);
    len = sizeof(*s4);
  }
  const std::string where = (v6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::Error("metrics_listen: socket: " + std::string(std::strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(fd, 16) != 0) {
    Status e = Status::Error("metrics_listen: cannot listen on " + where + ": " + std::strerror(errno));
    close(fd);
    return e;
  }
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    port_ = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  }
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    close(fd);
    return Status::Error("metrics_listen: pipe: " + std::string(std::strerror(errno)));
  }
  listen_fd_ = fd;
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void MetricsServer::Stop() {
  if (thread_.joinable()) {
    (void)!write(wake_[1], "x", 1);
    thread_.join();
  }
  for (int* fd : {&listen_fd_, &wake_[0], &wake_[1]}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

void MetricsServer::Loop() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents) return;
    int cfd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (cfd < 0) {
      // EAGAIN (a client gave up before accept) or out of descriptors: poll again, a bit later.
      if (errno != EAGAIN && errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    ServeOne(cfd);
    close(cfd);
  }
}

void MetricsServer::ServeOne(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kClientBudgetMs);
  std::string req;
  char buf[2048];
  while (req.find("\r\n\r\n") == std::string::npos && req.find("\n\n") == std::string::npos) {
    if (req.size() > kMaxRequest) {
      SendAll(fd, Response(431, "Request Header Fields Too Large", "text/plain", "request too large\n"), deadline);
      return;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;
    req.append(buf, static_cast<size_t>(n));
  }
  // Request line: METHOD SP TARGET SP VERSION
  const std::string line = req.substr(0, req.find_first_of("\r\n"));
  const auto parts = Split(line, ' ');
  if (parts.size() != 3 || !StartsWith(parts[2], "HTTP/1.")) {
    SendAll(fd, Response(400, "Bad Request", "text/plain", "bad request\n"), deadline);
    return;
  }
  const std::string path = parts[1].substr(0, parts[1].find('?'));
  if (parts[0] != "GET" && parts[0] != "HEAD") {
    SendAll(fd, Response(405, "Method Not Allowed", "text/plain", "only GET\n"), deadline);
  } else if (path != "/metrics") {
    SendAll(fd, Response(404, "Not Found", "text/plain", "autopard serves /metrics only\n"), deadline);
  } else {
    std::string r = Response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", render_());
    if (parts[0] == "HEAD") r.resize(r.find("\r\n\r\n") + 4);
    SendAll(fd, r, deadline);
  }
}

}  // namespace autopar
