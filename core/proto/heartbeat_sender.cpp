#include "core/proto/heartbeat_sender.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <system_error>
#include <utility>

namespace autopar {

HeartbeatSender::HeartbeatSender(JobCkptEnv job, SendFn send, std::chrono::milliseconds look_every,
                                 int quiet_looks)
    : job_(std::move(job)),
      send_(std::move(send)),
      look_every_(look_every),
      quiet_looks_(quiet_looks) {}

HeartbeatSender::~HeartbeatSender() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HeartbeatSender::Replace(std::optional<Beat>& pending, Beat beat) {
  auto bad = [](const std::optional<double>& loss) { return loss && !std::isfinite(*loss); };
  // The latest wins, but a NaN or infinite loss must reach the loss guard.
  if (pending && bad(pending->progress.loss) && !bad(beat.progress.loss)) {
    beat.progress.loss = pending->progress.loss;
  }
  pending = std::move(beat);
}

HeartbeatSender::Posted HeartbeatSender::Post(Beat beat) {
  Posted out;
  bool here = false;  // no thread to send it: the caller does
  bool notify = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    Replace(pending_, std::move(beat));
    out.checkpoint_requested = std::exchange(requested_, false);
    // A time-limit request goes first: an error (rc -1 in the C API) waits for the next Post.
    if (!out.checkpoint_requested) out.error = std::exchange(error_, std::string());
    if (!started_ && !stopping_) {
      try {
        thread_ = std::thread([this] { Run(); });
        started_ = true;
      } catch (const std::system_error&) {
        here = true;  // tried again by the next Post
      }
    }
    here = here || stopping_;
    notify = waiting_;
  }
  if (!here) {
    if (notify) wake_.notify_one();  // outside the lock: the woken thread takes it at once
    return out;
  }
  std::lock_guard<std::mutex> s(send_mu_);
  std::optional<Beat> b;
  {
    std::lock_guard<std::mutex> l(mu_);
    b.swap(pending_);
  }
  if (b) SendOne(*b);
  return out;
}

Result<bool> HeartbeatSender::Send(const JobCkptEnv& job, Beat beat) {
  {
    std::lock_guard<std::mutex> l(mu_);
    ++sync_waiting_;  // the thread leaves the pending heartbeat to this one
  }
  std::unique_lock<std::mutex> s(send_mu_);
  std::optional<Beat> newest;
  bool requested;
  {
    std::lock_guard<std::mutex> l(mu_);
    --sync_waiting_;
    newest.swap(pending_);  // older than this one: superseded
    Replace(newest, std::move(beat));
    requested = std::exchange(requested_, false);
  }
  idle_.notify_all();
  Result<bool> r = send_(job, *newest);
  s.unlock();
  wake_.notify_one();  // a heartbeat posted meanwhile
  if (!r) {
    std::lock_guard<std::mutex> l(mu_);
    requested_ = requested_ || requested;
    return r;
  }
  return *r || requested;
}

bool HeartbeatSender::Flush(int timeout_ms) {
  std::unique_lock<std::mutex> l(mu_);
  if (pending_) {
    hurry_ = true;  // no waiting for the next look
    wake_.notify_one();
  }
  return idle_.wait_for(l, std::chrono::milliseconds(timeout_ms),
                        [this] { return !pending_ && !sending_; });
}

void HeartbeatSender::Stop(int timeout_ms) {
  std::unique_lock<std::mutex> l(mu_);
  stopping_ = true;
  wake_.notify_all();
  idle_.wait_for(l, std::chrono::milliseconds(timeout_ms),
                 [this] { return !pending_ && !sending_; });
}

void HeartbeatSender::Run() {
  // SCHED_BATCH: the same share of the CPU, but no wake-up preemption (sched(7)). As a normal
  // thread, woken by Post, it would often preempt the program on its own core inside Post's
  // futex wake-up and send first, the program waiting (p99 ~0.2-0.3 ms on a busy 2-core VM
  // against ~20 us): now it runs on an idle core, or once the program blocks or at the next tick.
  // Permitted to any thread; without it the heartbeats are sent all the same.
  sched_param normal{};
  (void)sched_setscheduler(0, SCHED_BATCH, &normal);
  int quiet = 0;  // looks in a row that found nothing to send
  // Flush or Stop want the pending heartbeat sent now, or Stop finds nothing left.
  auto now = [this] {
    return (pending_ && sync_waiting_ == 0 && (hurry_ || stopping_)) || (stopping_ && !pending_);
  };
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    if (stopping_ && !pending_) return;
    if (!pending_ || sync_waiting_ > 0) {
      if (quiet < quiet_looks_) {
        ++quiet;
        wake_.wait_for(l, look_every_, now);
      } else {
        waiting_ = true;  // from now on Post wakes it
        wake_.wait(l, [this] { return (pending_ && sync_waiting_ == 0) || stopping_; });
        waiting_ = false;
      }
      continue;
    }
    quiet = 0;
    l.unlock();
    {
      std::lock_guard<std::mutex> s(send_mu_);
      std::optional<Beat> beat;
      {
        std::lock_guard<std::mutex> g(mu_);
        beat.swap(pending_);
        sending_ = beat.has_value();
      }
      if (beat) SendOne(*beat);  // else a synchronous Send took it
    }
    l.lock();
    sending_ = false;
    if (!pending_) hurry_ = false;
    idle_.notify_all();
  }
}

void HeartbeatSender::SendOne(const Beat& beat) {
  Result<bool> r = send_(job_, beat);
  std::lock_guard<std::mutex> l(mu_);
  if (!r) {
    error_ = "heartbeat of step " + std::to_string(beat.step) + ": " + r.message();
  } else if (*r) {
    requested_ = true;
  }
}

namespace {

std::mutex g_mu;  // held while g_sender is made, and across fork()
std::atomic<HeartbeatSender*> g_sender{nullptr};
// Senders left alone (a forked child's parent's, a restarted one's) stay reachable from here, so
// that leak checkers do not report them: they are never deleted (their thread may still hold their
// locks). A fixed array: the child of a fork must not allocate. Guarded by g_mu.
HeartbeatSender* g_retired[64];
size_t g_retired_n = 0;
void Retire(HeartbeatSender* s) {
  if (s != nullptr && g_retired_n < sizeof g_retired / sizeof g_retired[0]) g_retired[g_retired_n++] = s;
}

void StopAtExit() {
  if (HeartbeatSender* s = g_sender.load()) s->Stop(1000);
}

void LockForFork() { g_mu.lock(); }
void UnlockInParent() { g_mu.unlock(); }
void ForgetInChild() {
  // The parent's thread does not exist here and the sender's locks may be held by it: that
  // sender is left alone (leaked); the next heartbeat makes the child's own.
  Retire(g_sender.exchange(nullptr));
  g_mu.unlock();
}

}  // namespace

Result<HeartbeatSender*> ProcessHeartbeatSender() {
  if (HeartbeatSender* s = g_sender.load(std::memory_order_acquire)) return s;
  std::lock_guard<std::mutex> l(g_mu);
  if (HeartbeatSender* s = g_sender.load()) return s;
  auto job = JobTaskEnvFrom([](const char* k) { return std::getenv(k); });
  if (!job) return job.status();
  static bool registered = false;  // under g_mu; inherited by a forked child, as the handlers
  if (!registered) {
    // Static objects are destroyed at exit in the reverse order of their construction and of
    // atexit registrations: the function-local statics a send uses (jsoncpp's, Status's) are
    // made here first, so that they outlive StopAtExit, which waits for the send in flight.
    Request probe;
    probe.op = Op::kHeartbeat;
    probe.job_id = "0";
    probe.loss = std::nan("");
    (void)EncodeRequest(probe);
    (void)DecodeReply(Op::kHeartbeat, R"({"ok":true,"checkpoint_requested":true})");
    (void)DecodeReply(Op::kHeartbeat, R"({"ok":false,"error":"x"})");
    (void)Status::Ok().message();
    pthread_atfork(LockForFork, UnlockInParent, ForgetInChild);
    std::atexit(StopAtExit);
    registered = true;
  }
  auto* s =
      new HeartbeatSender(std::move(*job), [](const JobCkptEnv& j, const HeartbeatSender::Beat& b) {
        return SendHeartbeat(j, b.step, false, b.timeout_ms, b.progress);
      });
  g_sender.store(s, std::memory_order_release);
  return s;
}

HeartbeatSender* ExistingProcessHeartbeatSender() { return g_sender.load(); }

void RestartProcessHeartbeatSender() {
  std::lock_guard<std::mutex> l(g_mu);
  if (HeartbeatSender* s = g_sender.exchange(nullptr)) {
    s->Stop(1000);  // left alone, stopped
    Retire(s);
  }
}

}  // namespace autopar
