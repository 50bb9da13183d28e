// How many connections autopard serves at once, in all and per user (autopard.conf
// max_connections, max_connections_per_uid): every user may connect to the root daemon,
// so one user's thousands of connections must not take the threads and descriptors that another
// user's commit needs. A connection over a limit gets one error line and is closed at once by the
// thread that accepted it (no thread of its own). Timeouts for slow and idle connections are the
// daemon's (request_timeout_s, idle_timeout_s).
//
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <string>

namespace autopar {

class ConnectionLimits {
 public:
  ConnectionLimits(int max_total, int max_per_uid) : max_total_(max_total), max_per_uid_(max_per_uid) {}

  // Counts a connection of `uid` in and returns "" when it may be served; otherwise counts
  // nothing and returns why not (for the error line and the log).
  std::string Admit(uid_t uid);
  // A connection Admit let in has ended.
  void Release(uid_t uid);

  int total() const;
  int of(uid_t uid) const;

 private:
  const int max_total_;
  const int max_per_uid_;
  mutable std::mutex mu_;
  int total_ = 0;
  std::map<uid_t, int> per_uid_;
};

}  // namespace autopar
