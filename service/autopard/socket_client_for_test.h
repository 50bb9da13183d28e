// What autopard's tests use to talk to a Daemon over its socket, and to write rank files: one
// copy for daemon_test.cpp and daemon_load_test.cpp. Test-only, header-only.
#pragma once

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/proto/protocol.h"

namespace autopar::testing_socket {

inline void Write(const std::filesystem::path& p, const std::string& data) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << data;
}

// A connection to the socket at `path` (-1 when refused). A reply that never comes makes a read
// fail after 20 s, failing the test instead of hanging it.
inline int Connect(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  timeval limit{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  return fd;
}

// Sends `r` on `fd` and returns the reply line ("" on error).
inline std::string Roundtrip(int fd, const Request& r) {
  std::string line = EncodeRequest(r) + "\n";
  if (send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) return "";
  std::string in;
  char buf[4096];
  while (in.find('\n') == std::string::npos) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return "";
    in.append(buf, static_cast<size_t>(n));
  }
  return in.substr(0, in.find('\n'));
}

// One status request on `fd`; its reply line ("" on error).
inline std::string StatusOn(int fd) {
  Request r;
  r.op = Op::kStatus;
  return Roundtrip(fd, r);
}

}  // namespace autopar::testing_socket
