// autopard's socket server: listens on the Unix socket, identifies each peer by the kernel
// (SO_PEERCRED), admits it under the connection limits and answers each request line with one
// reply line (protocol.h). What a request means is the handler's business (Daemon::Handle); this
// room knows only sockets, threads, limits and timeouts.
//
// Threads waiting in accept() serve one connection each: a request is served by a thread that
// already waits for it (no thread creation, no hand-off on the commit path).
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "auth.h"
#include "connection_limits.h"
#include "core/proto/protocol.h"

namespace autopar {

struct RequestServerOptions {
  std::string socket;              // the Unix socket's path (its parent is made, 0755)
  mode_t socket_mode = 0666;       // who may connect; the peers are told apart by the kernel
  int request_timeout_s = 10;      // a request must be whole this long after its first byte
  int idle_timeout_s = 600;        // a connection may wait this long between requests
  int max_connections = 1024;      // connections served at once, all users together
  int max_connections_per_uid = 128;
};

// One request of an identified peer, answered by the daemon.
using RequestHandler = std::function<Reply(const Request&, const Peer&)>;

// AUTOPARD_TRACE_REQUESTS=1 (diagnosis, off by default): one stderr line per request, "autopard:
// trace <op> at=<CLOCK_MONOTONIC us at the start>: <phase>=<us since the start> ...", the start
// being the accept (for a connection's later requests: the previous reply). A handler names its
// phases with TraceRequestPhase; without the variable it costs one thread_local test.
void TraceRequestPhase(const char* phase);

class RequestServer {
 public:
  RequestServer(RequestServerOptions options, RequestHandler handle);
  ~RequestServer();
  RequestServer(const RequestServer&) = delete;
  RequestServer& operator=(const RequestServer&) = delete;

  // Binds the socket (replacing a stale socket file, never another kind of file), listens and
  // starts the acceptors. Errors name the socket and the call that failed.
  Status Start();
  // Stops accepting, shuts down the connections being served (a request being handled finishes
  // first; its reply may not reach the peer), removes the socket file and returns once every
  // connection thread has left: none of them outlives the handler it calls.
  void Stop();

 private:
  // The listening socket, shared by the threads that accept on it; closed by the last one.
  struct Listener {
    explicit Listener(int f) : fd(f) {}
    ~Listener();
    const int fd;
    std::atomic<bool> stopped{false};
    std::mutex mu;
    int idle = 0;     // threads waiting in accept()
    int threads = 0;  // acceptor and connection threads alive (Stop waits for 0)
    std::condition_variable done;  // notified when a thread leaves
    std::set<int> open;            // connections being served (shut down by Stop)
  };
  static constexpr int kIdleAcceptors = 2;

  void StartAcceptor(const std::shared_ptr<Listener>& l);
  // Accepts and serves connections until the socket is shut down. The thread that takes the
  // last waiting slot starts another first; one finishing a connection while kIdleAcceptors
  // others wait exits.
  void Accept(std::shared_ptr<Listener> l);
  // Serves one admitted connection until the peer closes it or a timeout ends it (the caller
  // closes `fd`).
  void ServeConnection(int fd, const Peer& peer);
  // Sends `why` as an error line (without waiting) and closes `fd`; logs at most every 10 s.
  void RefuseConnection(int fd, const ucred& cred, const std::string& why);

  const RequestServerOptions options_;
  const RequestHandler handle_;
  ConnectionLimits limits_;
  std::atomic<int64_t> last_refusal_log_{0};
  std::shared_ptr<Listener> listener_;
};

}  // namespace autopar
