// RestartChannel: how the launchers of one step reach each other for an in-place restart
// (restart_logic.h has the messages). Each launcher listens on a TCP port of its
// reachable address (published through PMIx with the step's token); a launcher whose program
// failed sends every other one a stop notice. One connection per notice, one line, then closed.
// Anyone who can reach the port can connect: connections are served together (up to
// kMaxConnections, the oldest closed to make room), a silent one never delays another's line, and
// lines are believed only with the step's token (Mailbox, compared in constant time). A line is
// read as soon as its connection is accepted, and a connection closed to make room gives up what
// it has sent first: a flood of connections drops no launcher's line.
// Not thread-safe; the launcher's main thread uses it.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autopar/status.h"
#include "launcher/restart_logic.h"

namespace autopar {

class RestartChannel {
 public:
  RestartChannel() = default;
  ~RestartChannel();
  RestartChannel(RestartChannel&& other) noexcept;
  RestartChannel& operator=(RestartChannel&& other) noexcept;
  RestartChannel(const RestartChannel&) = delete;
  RestartChannel& operator=(const RestartChannel&) = delete;

  static constexpr size_t kMaxConnections = 64;
  static constexpr int kMaxIdleMs = 2000;  // a connection silent this long is closed

  // Listens on `addr` (an IPv4 address), a free port; non-blocking, close-on-exec.
  static Result<RestartChannel> Listen(const std::string& addr);
  // Readable (poll) when a connection or a line waits: an epoll descriptor over the listening
  // socket and the open connections.
  int fd() const { return epoll_fd_; }
  // "ADDR:PORT".
  const std::string& endpoint() const { return endpoint_; }

  // Accepts every pending connection and returns the lines that have arrived (without their
  // newlines), waiting up to `timeout_ms` for a first one while connections are open. A
  // connection that has sent no whole line stays open for a later Drain, up to kMaxIdleMs.
  std::vector<std::string> Drain(int timeout_ms);

  // Sends `line` to every endpoint ("ADDR:PORT") at once, all within `timeout_ms`; returns the
  // indexes of the endpoints it could not deliver to, in order.
  static std::vector<size_t> Broadcast(const std::vector<std::string>& endpoints,
                                       const std::string& line, int timeout_ms);

 private:
  struct Conn {
    int fd;
    std::string line;
    std::chrono::steady_clock::time_point since;  // accepted
  };
  void Close();
  void Drop(size_t i);  // closes conns_[i]
  int fd_ = -1;        // listening socket
  int epoll_fd_ = -1;  // fd_ and every conn
  std::string endpoint_;
  std::vector<Conn> conns_;  // oldest first
};

// The peer messages (restart_logic.h) that arrived on a channel and are not taken yet; lines
// without the step's token, or malformed, are dropped. Not thread-safe.
class Mailbox {
 public:
  using Want = std::function<bool(const PeerMessage&)>;
  Mailbox() = default;
  explicit Mailbox(std::string token) : token_(std::move(token)) {}

  // Reads every message pending on `channel`, waiting up to `wait_ms` for one to arrive.
  void Pump(RestartChannel& channel, int wait_ms);
  // The first message `want` accepts, removed from the box (nothing is read).
  std::optional<PeerMessage> Take(const Want& want);
  // Removes every message `stale` accepts.
  void Drop(const Want& stale);
  bool empty() const { return inbox_.empty(); }

 private:
  std::string token_;
  std::deque<PeerMessage> inbox_;
};

// 32 hex digits from getrandom(2): the step's token.
Result<std::string> RandomToken();

// HMAC-SHA256(token, purpose) in 64 hex digits: a key the step's launchers share for one purpose
// (the fault-tolerant group's, handed to their programs) while the token stays theirs.
std::string DeriveKey(const std::string& token, const std::string& purpose);

}  // namespace autopar
