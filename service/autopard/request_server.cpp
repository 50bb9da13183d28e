#include "request_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>

#include "log.h"
#include "service/user_access/user_fs.h"

namespace autopar {
namespace {

struct Trace {
  std::chrono::steady_clock::time_point t0;
  std::string marks;
  void Mark(const char* what) {
    marks += ' ';
    marks += what;
    marks += '=';
    marks += std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now() - t0).count());
  }
};
thread_local Trace* g_trace = nullptr;
const bool kTrace = [] {
  const char* e = std::getenv("AUTOPARD_TRACE_REQUESTS");
  return e && *e && std::string(e) != "0";
}();

void LogTrace(const char* op) {
  TraceRequestPhase("sent");
  Log(LogLevel::kInfo, "trace %s at=%lld:%s", op,
      static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                 g_trace->t0.time_since_epoch()).count()),
      g_trace->marks.c_str());
  g_trace->marks.clear();
  g_trace->t0 = std::chrono::steady_clock::now();
}

// A connection that behaves like a flood (a line past kSuspectLineBytes on its way to the limit,
// or kSuspectBadRequests malformed requests) is served at nice 19 from then on, below the upload
// threads: until it is closed, its reads and error replies take only the CPU nobody else wants
// (bench/hostile/flood_bench.py). The thread's priority is restored when the connection ends
// (the thread then accepts the next one).
constexpr size_t kSuspectLineBytes = 64 << 10;
constexpr int kSuspectBadRequests = 4;

class ThreadDemotion {
 public:
  ~ThreadDemotion() {
    if (demoted_) setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), before_);
  }
  void Demote() {
    if (demoted_) return;
    errno = 0;
    before_ = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
    demoted_ = errno == 0 && setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19) == 0;
  }

 private:
  bool demoted_ = false;
  int before_ = 0;
};

// Sends `line` and a newline; false once the peer is gone or a send timed out.
bool SendLine(int fd, std::string line, int flags = 0) {
  line += '\n';
  size_t sent = 0;
  while (sent < line.size()) {
    ssize_t n = send(fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL | flags);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// The request lines of one connection, each whole within request_timeout_s of its first byte
// (a slow sender holds a thread that long at most); between requests a connection may stay
// idle_timeout_s.
class LineReader {
 public:
  LineReader(int fd, const RequestServerOptions& o, ThreadDemotion* demotion)
      : fd_(fd), options_(o), demotion_(demotion) {}

  // The next line without its newline; false when the connection ends (the peer closed it, a
  // timeout or an overlong line, the last two answered with an error line first).
  bool Next(std::string* line) {
    size_t nl;
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::seconds(in_.empty() ? options_.idle_timeout_s : options_.request_timeout_s);
    while ((nl = in_.find('\n', scanned_)) == std::string::npos) {
      scanned_ = in_.size();
      if (in_.size() > kSuspectLineBytes) demotion_->Demote();
      if (in_.size() > kMaxLineBytes) {
        SendLine(fd_, EncodeErrorReply("request longer than " + std::to_string(kMaxLineBytes) + " bytes"));
        return false;
      }
      if (!Receive(&deadline)) return false;
    }
    *line = in_.substr(0, nl);
    in_.erase(0, nl + 1);
    scanned_ = 0;
    return true;
  }

 private:
  // Appends what arrives before `deadline` (moved to request_timeout_s from a request's first
  // byte); false when nothing more will come.
  bool Receive(std::chrono::steady_clock::time_point* deadline) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          *deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      const int ready = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        if (!in_.empty()) {
          SendLine(fd_, EncodeErrorReply("request not complete within " +
                                         std::to_string(options_.request_timeout_s) +
                                         " s (request_timeout_s)"),
                   MSG_DONTWAIT);
        }
        return false;
      }
      ssize_t n = ready < 0 ? -1 : recv(fd_, buf_, sizeof(buf_), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      if (in_.empty()) {
        *deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options_.request_timeout_s);
      }
      in_.append(buf_, static_cast<size_t>(n));
      return true;
    }
  }

  const int fd_;
  const RequestServerOptions& options_;
  ThreadDemotion* demotion_;
  std::string in_;
  size_t scanned_ = 0;  // bytes of in_ known to hold no newline (a long line is scanned once)
  char buf_[65536];
};

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

void TraceRequestPhase(const char* phase) {
  if (g_trace) g_trace->Mark(phase);
}

RequestServer::RequestServer(RequestServerOptions options, RequestHandler handle)
    : options_(std::move(options)),
      handle_(std::move(handle)),
      limits_(options_.max_connections, options_.max_connections_per_uid) {}

RequestServer::~RequestServer() { Stop(); }

RequestServer::Listener::~Listener() { close(fd); }

Status RequestServer::Start() {
  const std::string& path = options_.socket;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return Status::Error("socket: path too long: " + path);
  std::memcpy(addr.sun_path, path.data(), path.size());
  std::string parent = path.substr(0, path.rfind('/'));
  if (!parent.empty()) {
    if (Status st = MakeDirs(parent, 0755); !st) return Status::Error("socket: " + st.message());
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Status::Error("socket: " + path + " exists and is not a socket");
    unlink(path.c_str());
  }
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) return Status::Error(std::string("socket: ") + std::strerror(errno));
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status e = Status::Error("socket: bind " + path + ": " + std::strerror(errno));
    close(lfd);
    return e;
  }
  chmod(path.c_str(), options_.socket_mode);
  if (listen(lfd, 128) != 0) {
    close(lfd);
    return Status::Error("socket: listen: " + std::string(std::strerror(errno)));
  }
  listener_ = std::make_shared<Listener>(lfd);
  for (int i = 0; i < kIdleAcceptors; ++i) StartAcceptor(listener_);
  return Status::Ok();
}

void RequestServer::Stop() {
  if (!listener_) return;
  // shutdown() makes every accept() on the socket, blocked or later, fail (EINVAL); the last
  // acceptor to leave closes it.
  std::shared_ptr<Listener> l = std::move(listener_);
  l->stopped = true;
  shutdown(l->fd, SHUT_RDWR);
  unlink(options_.socket.c_str());
  std::unique_lock<std::mutex> lock(l->mu);
  for (int fd : l->open) shutdown(fd, SHUT_RDWR);
  l->done.wait(lock, [&] { return l->threads == 0; });
}

void RequestServer::StartAcceptor(const std::shared_ptr<Listener>& l) {
  {
    std::lock_guard<std::mutex> lock(l->mu);
    ++l->idle;
    ++l->threads;
  }
  try {
    std::thread([this, l] { Accept(l); }).detach();
  } catch (const std::system_error& e) {
    Log(LogLevel::kError, "cannot start a connection thread: %s", e.what());
    std::lock_guard<std::mutex> lock(l->mu);
    --l->idle;
    --l->threads;
  }
}

void RequestServer::Accept(std::shared_ptr<Listener> l) {
  for (;;) {
    int cfd = accept4(l->fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (cfd < 0) {
      if (l->stopped) break;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors or memory: give the connections in flight time to finish.
      Log(LogLevel::kWarning, "accept: %s", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (l->stopped) {  // pending in the backlog when the server stopped
      close(cfd);
      break;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(cfd);
      continue;
    }
    // Over a limit: one error line and closed by this thread, which goes on accepting.
    if (std::string refused = limits_.Admit(cred.uid); !refused.empty()) {
      RefuseConnection(cfd, cred, refused);
      continue;
    }
    Trace t{std::chrono::steady_clock::now(), {}};
    if (kTrace) g_trace = &t;
    bool last;
    {
      std::lock_guard<std::mutex> lock(l->mu);
      last = --l->idle == 0;
      l->open.insert(cfd);
    }
    // Never leave the socket without an acceptor while this connection is served (a restore
    // may take minutes): the next request must not wait for it.
    if (last && !l->stopped) StartAcceptor(l);
    ServeConnection(cfd, Peer{cred.pid, cred.uid, cred.gid});
    limits_.Release(cred.uid);
    g_trace = nullptr;
    std::lock_guard<std::mutex> lock(l->mu);
    l->open.erase(cfd);
    close(cfd);  // after leaving `open`: Stop never shuts down a reused descriptor number
    if (l->idle >= kIdleAcceptors) {  // enough are waiting
      --l->threads;
      l->done.notify_all();
      return;
    }
    ++l->idle;
  }
  // This thread's last touch of the server is above: Stop may return (and the handler's owner
  // go) once `threads` is 0.
  std::lock_guard<std::mutex> lock(l->mu);
  --l->idle;
  --l->threads;
  l->done.notify_all();
}

void RequestServer::RefuseConnection(int fd, const ucred& cred, const std::string& why) {
  SendLine(fd, EncodeErrorReply(why), MSG_DONTWAIT);
  close(fd);
  // One log line per 10 s at most: a flood must not fill the log either.
  const int64_t now = static_cast<int64_t>(Now());
  int64_t last = last_refusal_log_.load();
  if (now - last >= 10 && last_refusal_log_.compare_exchange_strong(last, now)) {
    Log(LogLevel::kWarning, "refused a connection of uid %u (pid %d): %s",
        static_cast<unsigned>(cred.uid), static_cast<int>(cred.pid), why.c_str());
  }
}

void RequestServer::ServeConnection(int fd, const Peer& peer) {
  // A reply the peer does not read blocks a send at most this long (then the connection ends).
  timeval send_timeout{options_.request_timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
  ThreadDemotion demotion;
  LineReader reader(fd, options_, &demotion);
  int bad_requests = 0;
  TraceRequestPhase("cred");
  std::string line;
  while (reader.Next(&line)) {
    TraceRequestPhase("read");
    auto req = DecodeRequest(line);
    TraceRequestPhase("decode");
    std::string out;
    if (!req) {
      if (++bad_requests >= kSuspectBadRequests) demotion.Demote();
      out = EncodeErrorReply(req.message());
    } else {
      out = EncodeReply(req->op, handle_(*req, peer));
    }
    TraceRequestPhase("encode");
    if (!SendLine(fd, std::move(out))) return;
    if (g_trace) LogTrace(req ? OpName(req->op) : "bad");
  }
}

}  // namespace autopar
