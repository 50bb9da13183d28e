// HeartbeatSender: a program's heartbeats (hang detection, progress; protocol.h) sent by one
// background thread, so that a heartbeat costs the program a lock instead of a round trip to
// autopard (under 100 us at p99). Used by the C API (autopar/ckpt_c.h).
//
// Post() records the heartbeat as the latest and returns at once; the thread (started by the first
// Post; SCHED_BATCH, so that waking it never preempts the caller) sends the latest one each time
// it is free. While heartbeats keep coming, Post does not even wake it: the thread looks for a new
// heartbeat every kLookEvery (20 ms) and sends it then; after kQuietLooks looks (10 s) without one
// it waits until Post wakes it. A wake-up costs the caller a futex call and, when the thread's core
// is idle, an inter-processor interrupt: tens of us on the 2-core test VM (bench/RESULTS.md,
// 2026-12-02). The job's identity (JobCkptEnv) is the sender's, read once: getenv over a Slurm
// task's ~120 variables costs ~20 us at p50 when the caches went cold during a step.
//
// A program that posts faster than the sends skips the heartbeats in between (hang detection and
// progress count the steps between those that arrive; a NaN or infinite loss of a skipped one is
// carried to the one that replaces it, so the loss guard still sees it). What Post returns comes
// from the replies received before it: the time-limit request (checkpoint_requested) one
// heartbeat late, and the error of a background send that failed since the previous Post (each
// failure reported once, by one Post; after a pending request, which goes first). Send() is the
// synchronous heartbeat: it waits for the send in flight, sends its own and returns its reply.
// Every send, background or synchronous, holds one lock: autopard receives a rank's steps in order.
//
// Thread safety: every method may be called from several threads at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "autopar/status.h"
#include "core/proto/proto_client.h"

namespace autopar {

class HeartbeatSender {
 public:
  struct Beat {
    int64_t step = 0;
    StepProgress progress;
    int timeout_ms = 5000;
  };
  // Sends one heartbeat of `job` and returns the reply's checkpoint_requested (SendHeartbeat;
  // tests inject their own).
  using SendFn = std::function<Result<bool>(const JobCkptEnv& job, const Beat&)>;

  static constexpr std::chrono::milliseconds kLookEvery{20};
  static constexpr int kQuietLooks = 500;

  // Posted heartbeats are `job`'s. `look_every`, `quiet_looks`: see above (tests shorten them).
  HeartbeatSender(JobCkptEnv job, SendFn send, std::chrono::milliseconds look_every = kLookEvery,
                  int quiet_looks = kQuietLooks);
  // Stops the thread after the send in flight (tests; the process's sender is never destroyed).
  ~HeartbeatSender();
  HeartbeatSender(const HeartbeatSender&) = delete;
  HeartbeatSender& operator=(const HeartbeatSender&) = delete;

  struct Posted {
    bool checkpoint_requested = false;  // a reply received since the previous Post asked
    std::string error;                  // a background send failed since ("" when none)
  };
  Posted Post(Beat beat);
  // The reply of this heartbeat of `job` (its checkpoint_requested, or one of a reply received
  // since the previous call), or the send's error.
  Result<bool> Send(const JobCkptEnv& job, Beat beat);
  // Waits until what was posted before is sent (or failed); false when `timeout_ms` passed first.
  bool Flush(int timeout_ms);
  // At exit: sends what is pending within `timeout_ms` and stops the thread; a later Post sends
  // in the caller.
  void Stop(int timeout_ms);

 private:
  void Run();
  // Sends `beat` (send_mu_ held) and records its reply or error.
  void SendOne(const Beat& beat);
  static void Replace(std::optional<Beat>& pending, Beat beat);

  const JobCkptEnv job_;
  SendFn send_;
  const std::chrono::milliseconds look_every_;
  const int quiet_looks_;
  std::mutex send_mu_;            // held for each send: one at a time, in order
  std::mutex mu_;                 // guards what follows
  std::condition_variable wake_;  // the thread: a heartbeat is pending, or stop
  std::condition_variable idle_;  // Flush, Stop: a send finished
  std::optional<Beat> pending_;
  bool sending_ = false;
  bool waiting_ = false;  // the thread waits for Post's wake-up (no more looks)
  bool hurry_ = false;    // Flush: send what is pending now
  int sync_waiting_ = 0;  // Send calls waiting for send_mu_
  bool requested_ = false;
  std::string error_;
  bool stopping_ = false;
  bool started_ = false;
  std::thread thread_;
};

// The process's sender over SendHeartbeat, made by the first call with the task's variables
// (JobTaskEnvFrom(getenv): an error when they are missing, and nothing is made); never destroyed
// (no thread to join in a static destructor). At exit (atexit) it sends the pending heartbeat
// within 1 s and stops; a forked child makes its own (pthread_atfork: the parent's thread does not
// exist there and its locks may be held).
Result<HeartbeatSender*> ProcessHeartbeatSender();
// The process's sender if one was made, else nullptr.
HeartbeatSender* ExistingProcessHeartbeatSender();
// Stops the process's sender (sending what is pending, within 1 s) and forgets it: the next
// heartbeat reads the task's variables again (tests).
void RestartProcessHeartbeatSender();

}  // namespace autopar
