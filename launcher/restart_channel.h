// RestartChannel: how the launchers of one step reach each other for an in-place restart
// (issue 11; restart_logic.h has the messages). Each launcher listens on a TCP port of its
// reachable address (published through PMIx with the step's token); a launcher whose program
// failed sends every other one a stop notice. One connection per notice, one line, then closed.
// Not thread-safe; the launcher's main thread uses it.
#pragma once

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

  // Listens on `addr` (an IPv4 address), a free port; non-blocking, close-on-exec.
  static Result<RestartChannel> Listen(const std::string& addr);
  int fd() const { return fd_; }
  // "ADDR:PORT".
  const std::string& endpoint() const { return endpoint_; }

  // Accepts every pending connection and reads its line (each within `timeout_ms`); returns the
  // lines, without their newlines. Connections that send nothing are dropped.
  std::vector<std::string> Drain(int timeout_ms);

  // Sends `line` to every endpoint ("ADDR:PORT") at once, all within `timeout_ms`; returns the
  // indexes of the endpoints it could not deliver to, in order.
  static std::vector<size_t> Broadcast(const std::vector<std::string>& endpoints,
                                       const std::string& line, int timeout_ms);

 private:
  int fd_ = -1;
  std::string endpoint_;
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

}  // namespace autopar
