// The autopard client (proto_client.h): the one place in core that opens a socket.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/proto/proto_client.h"
#include "core/unique_fd.h"

namespace autopar {
namespace {

using Clock = std::chrono::steady_clock;

std::string Where(const std::string& socket_path) { return "autopard (" + socket_path + ")"; }

int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// Waits until `fd` is ready for `events`; false on timeout.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, RemainingMs(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}


// Why an attempt failed, for the retry decision.
enum class Failure { kNone, kNotListening, kClosedBeforeReply, kOther };

// One connection: connect, send, read the reply line. `failure` says whether the daemon was not
// there (nothing was sent) or went away with the request (it may have been handled).
Result<Reply> CallOnce(const std::string& socket_path, const Request& request, int timeout_ms,
                       Failure* failure) {
  const std::string where = Where(socket_path);
  *failure = Failure::kOther;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty()) return Status::Error("autopard: no socket path (AUTOPAR_SOCKET is not set)");
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return Status::Error(where + ": socket path longer than " +
                         std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.get() < 0) return Status::Error(where + ": socket: " + std::strerror(errno));
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno == EAGAIN || errno == EINPROGRESS) {
      if (!WaitFor(fd.get(), POLLOUT, deadline)) {
        return Status::Error(where + ": connect: no answer within " + std::to_string(timeout_ms) + " ms");
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        if (err == ECONNREFUSED || err == ENOENT) *failure = Failure::kNotListening;
        return Status::Error(where + ": connect: " + std::strerror(err) + " (is autopard running?)");
      }
    } else {
      if (errno == ECONNREFUSED || errno == ENOENT) *failure = Failure::kNotListening;
      return Status::Error(where + ": connect: " + std::strerror(errno) + " (is autopard running?)");
    }
  }
  std::string out = EncodeRequest(request) + "\n";
  size_t sent = 0;
  while (sent < out.size()) {
    ssize_t n = send(fd.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!WaitFor(fd.get(), POLLOUT, deadline)) {
        return Status::Error(where + ": send: timed out after " + std::to_string(timeout_ms) + " ms");
      }
    } else {
      if (errno == EPIPE || errno == ECONNRESET) *failure = Failure::kClosedBeforeReply;
      return Status::Error(where + ": send: " + std::strerror(errno));
    }
  }
  std::string in;
  char buf[65536];
  for (;;) {
    size_t nl = in.find('\n');
    if (nl != std::string::npos) {
      *failure = Failure::kNone;
      return DecodeReply(request.op, std::string_view(in).substr(0, nl));
    }
    if (in.size() > kMaxLineBytes) return Status::Error(where + ": reply longer than the limit");
    ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n > 0) {
      in.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno == ECONNRESET) {
      *failure = Failure::kClosedBeforeReply;
      return Status::Error(where + ": connection closed before the reply");
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!WaitFor(fd.get(), POLLIN, deadline)) {
        return Status::Error(where + ": no reply within " + std::to_string(timeout_ms) + " ms");
      }
    } else {
      return Status::Error(where + ": recv: " + std::strerror(errno));
    }
  }
}

// Requests that may be sent again when the daemon went away after taking them: a commit is
// recorded once per (job, step, rank, target), a heartbeat or a query changes nothing twice. An
// event would be journalled twice and a recover request decided twice: those are repeated only
// when they never reached the daemon.
bool SafeToRepeat(Op op) {
  return op == Op::kCommit || op == Op::kRestore || op == Op::kLs || op == Op::kStatus ||
         op == Op::kHeartbeat || op == Op::kEvents;
}

}  // namespace

int DaemonRetryMs(const GetEnv& getenv) {
  const char* v = getenv("AUTOPAR_DAEMON_RETRY_S");
  if (v == nullptr || *v == '\0') return kDefaultDaemonRetryMs;
  char* end = nullptr;
  const long s = std::strtol(v, &end, 10);
  if (*end != '\0' || s < 0) return kDefaultDaemonRetryMs;
  return static_cast<int>(std::min<long>(s, 3600) * 1000);
}

Result<Reply> CallDaemon(const std::string& socket_path, const Request& request, int timeout_ms,
                         int retry_ms) {
  if (Status st = ValidateRequest(request); !st) return st;
  const auto give_up = Clock::now() + std::chrono::milliseconds(retry_ms);
  auto pause = std::chrono::milliseconds(100);
  for (int attempt = 1;; ++attempt) {
    Failure failure = Failure::kOther;
    auto reply = CallOnce(socket_path, request, timeout_ms, &failure);
    const bool again = failure == Failure::kNotListening ||
                       (failure == Failure::kClosedBeforeReply && SafeToRepeat(request.op));
    if (reply.ok() || !again || Clock::now() + pause > give_up) {
      if (!reply.ok() && attempt > 1) {
        char over[32];
        std::snprintf(over, sizeof over, "%.1f", retry_ms / 1000.0);
        return Status::Error(reply.message() + " (tried " + std::to_string(attempt) + " times over " +
                             over + " s)");
      }
      return reply;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
}

Result<Reply> CallDaemonOk(const std::string& socket_path, const Request& request, int timeout_ms,
                           int retry_ms) {
  auto reply = CallDaemon(socket_path, request, timeout_ms, retry_ms);
  if (!reply) return reply;
  if (!reply->status.ok()) return reply->status;
  return reply;
}

namespace {

Result<int> IntVar(const GetEnv& getenv, const char* name, int dflt, bool* found) {
  const char* v = getenv(name);
  if (found) *found = false;
  if (!v || !*v) return dflt;
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v, &end, 10);
  if (errno != 0 || *end != '\0' || x < 0 || x > 100000000) {
    return Status::Error(std::string(name) + ": not a non-negative integer: '" + v + "'");
  }
  if (found) *found = true;
  return static_cast<int>(x);
}

Result<JobCkptEnv> ReadJobEnv(const GetEnv& getenv, bool need_ckpt_dir) {
  JobCkptEnv job;
  auto str = [&](const char* name) -> std::string {
    const char* v = getenv(name);
    return v ? std::string(v) : std::string();
  };
  job.socket = str("AUTOPAR_SOCKET");
  job.job_id = str("SLURM_JOB_ID");
  job.ckpt_dir = str("AUTOPAR_CKPT_DIR");
  job.upload = str("AUTOPAR_CKPT_UPLOAD");
  job.node = str("SLURMD_NODENAME");
  job.elastic = !str("AUTOPAR_MIN_NODES").empty();
  if (job.job_id.empty()) return Status::Error("SLURM_JOB_ID is not set: not inside a Slurm job");
  if (need_ckpt_dir && job.ckpt_dir.empty()) {
    return Status::Error(
        "AUTOPAR_CKPT_DIR is not set: submit the job with --ckpt-dir or --ckpt-upload");
  }
  if (job.socket.empty()) {
    return Status::Error("AUTOPAR_SOCKET is not set: is the autopar SPANK plugin loaded?");
  }
  bool found = false;
  auto keep = IntVar(getenv, "AUTOPAR_CKPT_KEEP", 0, nullptr);
  if (!keep) return keep.status();
  job.keep = *keep;
  auto rank = IntVar(getenv, "RANK", 0, &found);
  if (!rank) return rank.status();
  if (!found) rank = IntVar(getenv, "SLURM_PROCID", 0, nullptr);
  if (!rank) return rank.status();
  job.rank = *rank;
  auto world = IntVar(getenv, "WORLD_SIZE", 1, &found);
  if (!world) return world.status();
  if (!found) world = IntVar(getenv, "SLURM_NTASKS", 1, nullptr);
  if (!world) return world.status();
  job.world_size = *world;
  auto local = IntVar(getenv, "LOCAL_WORLD_SIZE", 1, &found);
  if (!local) return local.status();
  if (!found) {
    // SLURM_TASKS_PER_NODE is a compressed list ("2(x3),1"); the step's local task count is in
    // SLURM_STEP_TASKS_PER_NODE only for the node's first entry, so fall back to 1.
    local = 1;
  }
  job.local_world_size = *local;
  return job;
}

}  // namespace

Result<JobCkptEnv> JobCkptEnvFrom(const GetEnv& getenv) { return ReadJobEnv(getenv, true); }
Result<JobCkptEnv> JobTaskEnvFrom(const GetEnv& getenv) { return ReadJobEnv(getenv, false); }

std::string RankStepDir(const std::string& ckpt_dir, int64_t step, int rank) {
  std::string dir = ckpt_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir + "/step-" + std::to_string(step) + "/rank-" + std::to_string(rank);
}

Result<CommitReply> CommitStep(const JobCkptEnv& job, int64_t step, int timeout_ms) {
  Request r;
  r.op = Op::kCommit;
  r.job_id = job.job_id;
  r.step = step;
  r.rank = job.rank;
  r.world_size = job.world_size;
  r.local_world_size = job.local_world_size;
  r.ckpt_dir = job.ckpt_dir;
  r.upload = job.upload;
  r.keep = job.keep;
  r.node = job.node;
  auto reply = CallDaemonOk(job.socket, r, timeout_ms);
  if (!reply) return reply.status();
  return reply->commit;
}

Result<bool> SendHeartbeat(const JobCkptEnv& job, int64_t step, bool short_lived, int timeout_ms,
                           const StepProgress& progress) {
  Request r;
  r.op = Op::kHeartbeat;
  r.job_id = job.job_id;
  r.rank = job.rank;
  r.step = step;
  r.node = job.node;
  r.short_lived = short_lived;
  r.samples = progress.samples;
  r.tokens = progress.tokens;
  r.loss = progress.loss;
  auto reply = CallDaemonOk(job.socket, r, timeout_ms);
  if (!reply) return reply.status();
  return reply->checkpoint_requested;
}

namespace {

Result<RestoreReply> Restore(const JobCkptEnv& job, int64_t max_step, bool probe, int timeout_ms) {
  Request r;
  r.op = Op::kRestore;
  r.job_id = job.job_id;
  r.rank = job.rank;
  r.world_size = job.world_size;
  r.ckpt_dir = job.ckpt_dir;
  r.upload = job.upload;
  r.max_step = max_step;
  r.probe = probe;
  r.reshard = job.elastic;
  r.node = job.node;
  auto reply = CallDaemonOk(job.socket, r, timeout_ms);
  if (!reply) return reply.status();
  return reply->restore;
}

}  // namespace

Result<RestoreReply> RequestRestore(const JobCkptEnv& job, int64_t max_step, int timeout_ms) {
  return Restore(job, max_step, /*probe=*/false, timeout_ms);
}

Result<RestoreReply> ProbeRestore(const JobCkptEnv& job, int64_t max_step, int timeout_ms) {
  return Restore(job, max_step, /*probe=*/true, timeout_ms);
}

bool CheckpointsEnabled(const GetEnv& getenv) {
  const char* dir = getenv("AUTOPAR_CKPT_DIR");
  const char* sock = getenv("AUTOPAR_SOCKET");
  return dir && *dir && sock && *sock;
}

RestoreFn RestoreForRank(const GetEnv& getenv) {
  auto job = JobCkptEnvFrom(getenv);
  return [job](int64_t max_step) -> Result<RestoreReply> {
    if (!job) return job.status();
    return RequestRestore(*job, max_step);
  };
}

RestoreFn ProbeForRank(const GetEnv& getenv) {
  auto job = JobCkptEnvFrom(getenv);
  return [job](int64_t max_step) -> Result<RestoreReply> {
    if (!job) return job.status();
    return ProbeRestore(*job, max_step);
  };
}

namespace {

void AddSkipped(const RestoreReply& reply, ResumeDecision* d) {
  for (const auto& s : reply.skipped) d->notes.push_back("checkpoint not usable: " + s);
}

void Take(const RestoreReply& reply, ResumeDecision* d) {
  d->step = reply.step;
  d->dir = reply.dir;
  d->step_dir = reply.step_dir;
  d->world_size = reply.world_size;
  d->source_job = reply.source_job;
  d->bytes_local = reply.bytes_local;
  d->bytes_fetched = reply.bytes_fetched;
}

// Rounds of agree_min before the ranks give up: each round after the first moves the agreed
// step down to a step some rank holds, so this bounds the number of unusable newer steps.
constexpr int kMaxAgreeRounds = 16;

}  // namespace

ResumeDecision DecideResume(const RestoreFn& ask, int64_t max_step) {
  ResumeDecision d;
  d.enabled = true;
  auto r = ask(max_step);
  if (!r) {
    d.notes.push_back("warning: cannot restore a checkpoint: " + r.message());
    return d;
  }
  AddSkipped(*r, &d);
  Take(*r, &d);
  return d;
}

Result<ResumeDecision> RestoreDecided(int64_t decided, const ResumeDecision* own,
                                      const RestoreFn& restore,
                                      const std::function<int64_t(int64_t mine)>& agree_min) {
  ResumeDecision d;
  d.enabled = true;
  if (own) d.notes = own->notes;  // the probe's skipped steps (all newer than `decided`)
  if (decided < 0) {
    d.step = -1;
    d.dir.clear();
    d.source_job.clear();
    return d;
  }
  auto ask = [&](int64_t max_step) -> Status {
    auto r = restore(max_step);
    if (!r) {
      return Status::Error("cannot restore checkpoint step " + std::to_string(max_step) +
                           " (decided by rank 0): " + r.message());
    }
    AddSkipped(*r, &d);
    Take(*r, &d);
    return Status::Ok();
  };
  if (Status st = ask(decided); !st) return st;
  int64_t agreed = decided;
  for (int round = 0; round < kMaxAgreeRounds; ++round) {
    int64_t least = agree_min(d.step);
    if (least == agreed && d.step == agreed) return d;  // every rank holds `agreed`
    if (least < 0) {
      // Some rank holds no usable step at all: the whole job starts fresh.
      d.notes.push_back("warning: checkpoint step " + std::to_string(decided) +
                        " is not usable on every rank and no older step is: starting fresh");
      d.step = -1;
      d.dir.clear();
      d.source_job.clear();
      return d;
    }
    agreed = least;
    if (d.step != agreed) {
      if (Status st = ask(agreed); !st) return st;
    }
  }
  return Status::Error("checkpoint restore: the ranks did not agree on a step within " +
                       std::to_string(kMaxAgreeRounds) + " rounds (last proposal: step " +
                       std::to_string(agreed) + ")");
}

}  // namespace autopar
