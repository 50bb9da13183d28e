#include "port_reservation.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace autopar {

PortReservation::~PortReservation() { Release(); }

PortReservation::PortReservation(PortReservation&& other) noexcept
    : fd_(other.fd_), port_(other.port_) {
  other.fd_ = -1;
}

PortReservation& PortReservation::operator=(PortReservation&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = other.fd_;
    port_ = other.port_;
    other.fd_ = -1;
  }
  return *this;
}

void PortReservation::Release() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

Result<PortReservation> PortReservation::Reserve() {
  PortReservation r;
  r.fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (r.fd_ < 0) return Status::Error(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  if (setsockopt(r.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return Status::Error(std::string("setsockopt(SO_REUSEADDR): ") + std::strerror(errno));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  if (bind(r.fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::Error(std::string("reserving a TCP port: bind: ") + std::strerror(errno));
  }
  socklen_t len = sizeof(addr);
  if (getsockname(r.fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Status::Error(std::string("getsockname: ") + std::strerror(errno));
  }
  r.port_ = ntohs(addr.sin_port);
  return r;
}

Result<std::string> ReachableAddress(const std::string& host, const std::string& ifname) {
  char buf[INET_ADDRSTRLEN] = {};
  if (!ifname.empty()) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) {
      return Status::Error(std::string("getifaddrs: ") + std::strerror(errno));
    }
    std::string found;
    for (ifaddrs* i = list; i; i = i->ifa_next) {
      if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && ifname == i->ifa_name) {
        auto* sin = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
        if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf))) found = buf;
        break;
      }
    }
    freeifaddrs(list);
    if (found.empty()) {
      return Status::Error("AUTOPAR_MASTER_IFNAME: interface '" + ifname +
                           "' has no IPv4 address on this node");
    }
    return found;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    return Status::Error("cannot resolve this node's name '" + host + "': " + gai_strerror(rc) +
                         " (set the plugin's master_ifname)");
  }
  auto* sin = reinterpret_cast<sockaddr_in*>(res->ai_addr);
  std::string out = inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)) ? buf : "";
  freeaddrinfo(res);
  if (out.empty()) return Status::Error("cannot format the address of '" + host + "'");
  return out;
}

}  // namespace autopar
