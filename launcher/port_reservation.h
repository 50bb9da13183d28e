// Rank 0's rendezvous port: a TCP port bound (not listening) on the wildcard address with
// SO_REUSEADDR, held by the launcher until its program exits.
//
// Why this keeps the port for the program: on Linux a bound socket that is not listening blocks
// every other bind of that port (bind(0) never hands it out, and an explicit bind fails with
// EADDRINUSE) except binds that also set SO_REUSEADDR while no socket on the port listens.
// PyTorch's TCPStore (c10d/socket.cpp, SocketListenOp::tryListen) sets SO_REUSEADDR before its
// bind, so the program's store takes the port over while the launcher still holds it, and no
// other job on the node can be handed the same port in between (the race of guessing a port from
// the job id, or of closing a probe socket before the program binds). A native program that
// listens on MASTER_PORT must set SO_REUSEADDR too. Passing the socket to the child instead would
// need every program to adopt an inherited fd, which torch cannot.
#pragma once

#include <string>

#include "autopar/status.h"

namespace autopar {

class PortReservation {
 public:
  PortReservation() = default;
  ~PortReservation();
  PortReservation(PortReservation&& other) noexcept;
  PortReservation& operator=(PortReservation&& other) noexcept;
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;

  // Binds a free port (close-on-exec, so the program does not inherit it). Fails with errno's
  // text.
  static Result<PortReservation> Reserve();
  int port() const { return port_; }
  void Release();

 private:
  int fd_ = -1;
  int port_ = 0;
};

// The address other nodes use to reach this host: the IPv4 address of interface `ifname` when it
// is not empty (fails naming it when it has none), else the first IPv4 address `host` resolves to
// (fails naming the host when it does not resolve).
Result<std::string> ReachableAddress(const std::string& host, const std::string& ifname);

}  // namespace autopar
