#include "systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace autopar {

Status NotifySystemd(const std::string& state) {
  const char* where = std::getenv("NOTIFY_SOCKET");
  if (where == nullptr || where[0] == '\0') return Status::Ok();
  const std::string path = where;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if ((path[0] != '/' && path[0] != '@') || path.size() >= sizeof(addr.sun_path)) {
    return Status::Error("NOTIFY_SOCKET: not a socket path: " + path);
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Error(std::string("NOTIFY_SOCKET: socket: ") + std::strerror(errno));
  const ssize_t sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                              reinterpret_cast<const sockaddr*>(&addr), len);
  const int err = errno;
  close(fd);
  if (sent != static_cast<ssize_t>(state.size())) {
    return Status::Error("NOTIFY_SOCKET: " + path + ": " + std::strerror(err));
  }
  return Status::Ok();
}

std::string ReloadingState() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const unsigned long long usec =
      static_cast<unsigned long long>(ts.tv_sec) * 1000000ull + static_cast<unsigned long long>(ts.tv_nsec) / 1000;
  return "RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec);
}

}  // namespace autopar
