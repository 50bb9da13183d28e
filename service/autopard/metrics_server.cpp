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
#include <vector>

#include "core/text.h"

namespace autopar {
namespace {

constexpr size_t kMaxRequest = 8192;
constexpr int kClientBudgetMs = 2000;
constexpr size_t kMaxClients = 64;

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
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(fd, 64) != 0) {
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

std::string MetricsServer::Reply(const std::string& req) {
  // Request line: METHOD SP TARGET SP VERSION
  const std::string line = req.substr(0, req.find_first_of("\r\n"));
  const auto parts = Split(line, ' ');
  if (parts.size() != 3 || !StartsWith(parts[2], "HTTP/1.")) {
    return Response(400, "Bad Request", "text/plain", "bad request\n");
  }
  const std::string path = parts[1].substr(0, parts[1].find('?'));
  if (parts[0] != "GET" && parts[0] != "HEAD") {
    return Response(405, "Method Not Allowed", "text/plain", "only GET\n");
  }
  if (path != "/metrics") return Response(404, "Not Found", "text/plain", "autopard serves /metrics only\n");
  std::string r = Response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", render_());
  if (parts[0] == "HEAD") r.resize(r.find("\r\n\r\n") + 4);
  return r;
}

namespace {

// One connection: its request as it arrives, then its reply as it leaves; closed at `deadline`.
struct Client {
  int fd = -1;
  std::chrono::steady_clock::time_point deadline;
  std::string in, out;
  size_t sent = 0;
  bool replying = false;
};

bool RequestComplete(const std::string& req) {
  return req.find("\r\n\r\n") != std::string::npos || req.find("\n\n") != std::string::npos;
}

}  // namespace

void MetricsServer::Loop() {
  using Clock = std::chrono::steady_clock;
  std::vector<Client> clients;
  auto drop = [&clients](size_t i) {
    close(clients[i].fd);
    clients.erase(clients.begin() + static_cast<std::ptrdiff_t>(i));
  };
  for (;;) {
    auto now = Clock::now();
    for (size_t i = clients.size(); i-- > 0;) {
      if (clients[i].deadline <= now) drop(i);
    }
    std::vector<pollfd> p = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    int timeout_ms = -1;
    for (const Client& c : clients) {
      p.push_back({c.fd, static_cast<short>(c.replying ? POLLOUT : POLLIN), 0});
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now).count() + 1;
      if (timeout_ms < 0 || left < timeout_ms) timeout_ms = static_cast<int>(left);
    }
    if (poll(p.data(), p.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[1].revents) break;
    // Clients first (their indexes match p[2..] until one is dropped: walk backwards).
    for (size_t i = clients.size(); i-- > 0;) {
      const short ev = p[i + 2].revents;
      if (!ev) continue;
      Client& c = clients[i];
      if (!c.replying) {
        char buf[2048];
        ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) {
          drop(i);
          continue;
        }
        c.in.append(buf, static_cast<size_t>(n));
        if (c.in.size() > kMaxRequest) {
          c.out = Response(431, "Request Header Fields Too Large", "text/plain", "request too large\n");
        } else if (RequestComplete(c.in)) {
          c.out = Reply(c.in);
        } else {
          continue;
        }
        c.replying = true;
      }
      // Replying: send what the socket takes now, the rest when it is writable again.
      ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0 || (c.sent += static_cast<size_t>(n)) == c.out.size()) drop(i);
    }
    if (!p[0].revents) continue;
    for (;;) {
      int cfd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (cfd < 0) {
        // EAGAIN: none left. Out of descriptors: poll again, a bit later.
        if (errno != EAGAIN && errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        break;
      }
      // Full: the oldest connection (the one nearest its deadline) makes room. A scraper's
      // request is answered within milliseconds of its connecting, so connections held open by
      // someone else are the ones that go.
      if (clients.size() >= kMaxClients) drop(0);
      clients.push_back({cfd, Clock::now() + std::chrono::milliseconds(kClientBudgetMs), {}, {}, 0, false});
    }
  }
  for (size_t i = clients.size(); i-- > 0;) drop(i);
}

}  // namespace autopar
