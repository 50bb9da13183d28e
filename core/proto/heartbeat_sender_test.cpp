// HeartbeatSender with an injected send (the background thread's semantics), and the C API's
// heartbeats over it against a daemon on a Unix socket (the flag and errors one call late, the
// synchronous variant, a forked child).
#include "core/proto/heartbeat_sender.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "autopar/ckpt_c.h"
#include "core/proto/temp_socket_for_test.h"

namespace autopar {
namespace {

// A send that records each heartbeat and, while `held`, waits until released.
class FakeSend {
 public:
  Result<bool> operator()(const HeartbeatSender::Beat& b) {
    std::unique_lock<std::mutex> l(mu_);
    sent_.push_back(b);
    cv_.notify_all();
    cv_.wait(l, [this] { return !held_; });
    if (b.step == fail_step_) return Status::Error("autopard (s): connect: refused");
    return b.step == request_step_;
  }
  void Hold() {
    std::lock_guard<std::mutex> l(mu_);
    held_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> l(mu_);
    held_ = false;
    cv_.notify_all();
  }
  // Waits until `n` heartbeats reached the send.
  void WaitSent(size_t n) {
    std::unique_lock<std::mutex> l(mu_);
    ASSERT_TRUE(cv_.wait_for(l, std::chrono::seconds(5), [&] { return sent_.size() >= n; }));
  }
  std::vector<HeartbeatSender::Beat> sent() {
    std::lock_guard<std::mutex> l(mu_);
    return sent_;
  }
  int64_t fail_step_ = -1, request_step_ = -1;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  std::vector<HeartbeatSender::Beat> sent_;
};

HeartbeatSender::Beat At(int64_t step, std::optional<double> loss = std::nullopt) {
  HeartbeatSender::Beat b;
  b.step = step;
  b.progress.loss = loss;
  return b;
}

TEST(HeartbeatSenderTest, PostDoesNotWaitAndTheLatestWinsKeepingABadLoss) {
  FakeSend fake;
  HeartbeatSender sender(
      JobCkptEnv{}, [&](const JobCkptEnv&, const HeartbeatSender::Beat& b) { return fake(b); });
  fake.Hold();
  auto t0 = std::chrono::steady_clock::now();
  sender.Post(At(1));
  fake.WaitSent(1);  // 1 is in flight, held
  sender.Post(At(2, std::nan("")));
  sender.Post(At(3, 2.5));  // replaces 2, and takes its NaN
  sender.Post(At(4, 2.4));  // replaces 3 (NaN and all: still the bad loss)
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_FALSE(sender.Flush(50));  // 1 is still held
  fake.Release();
  ASSERT_TRUE(sender.Flush(5000));
  auto sent = fake.sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].step, 1);
  EXPECT_EQ(sent[1].step, 4);
  ASSERT_TRUE(sent[1].progress.loss);
  EXPECT_TRUE(std::isnan(*sent[1].progress.loss));
}

TEST(HeartbeatSenderTest, TheRequestAndErrorsComeWithTheNextPostOnce) {
  FakeSend fake;
  fake.request_step_ = 1;
  fake.fail_step_ = 2;
  HeartbeatSender sender(
      JobCkptEnv{}, [&](const JobCkptEnv&, const HeartbeatSender::Beat& b) { return fake(b); });
  struct Case {
    int64_t step;
    bool requested;
    const char* error;
  } cases[] = {
      {1, false, ""},  // nothing answered yet
      {2, true, ""},   // 1's reply asked
      {3, false, "heartbeat of step 2: autopard (s): connect: refused"},
      {4, false, ""},  // reported once
  };
  for (const auto& c : cases) {
    auto posted = sender.Post(At(c.step));
    EXPECT_EQ(posted.checkpoint_requested, c.requested) << c.step;
    EXPECT_EQ(posted.error, c.error) << c.step;
    ASSERT_TRUE(sender.Flush(5000));
  }
}

TEST(HeartbeatSenderTest, SendWaitsForTheSendInFlightAndReplacesThePendingOne) {
  FakeSend fake;
  fake.request_step_ = 3;
  HeartbeatSender sender(
      JobCkptEnv{}, [&](const JobCkptEnv&, const HeartbeatSender::Beat& b) { return fake(b); });
  fake.Hold();
  sender.Post(At(1));
  fake.WaitSent(1);
  sender.Post(At(2));  // pending behind 1
  Result<bool> got = Status::Error("not yet");
  std::thread sync([&] { got = sender.Send(JobCkptEnv{}, At(3)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(fake.sent().size(), 1u);  // 3 waits for 1
  fake.Release();
  sync.join();
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_TRUE(*got);  // its own reply
  ASSERT_TRUE(sender.Flush(5000));
  auto sent = fake.sent();
  ASSERT_EQ(sent.size(), 2u);  // 2 was superseded by 3: autopard never sees a step go back
  EXPECT_EQ(sent[1].step, 3);
  fake.fail_step_ = 4;
  EXPECT_EQ(sender.Send(JobCkptEnv{}, At(4)).message(), "autopard (s): connect: refused");
  EXPECT_EQ(sender.Post(At(5)).error, "");  // a synchronous error is the caller's, not repeated
}

TEST(HeartbeatSenderTest, StopSendsThePendingOneAndLaterPostsSendInTheCaller) {
  FakeSend fake;
  HeartbeatSender sender(
      JobCkptEnv{}, [&](const JobCkptEnv&, const HeartbeatSender::Beat& b) { return fake(b); });
  fake.Hold();
  sender.Post(At(1));
  fake.WaitSent(1);
  sender.Post(At(2));
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    fake.Release();
  });
  sender.Stop(5000);
  release.join();
  EXPECT_EQ(fake.sent().size(), 2u);
  sender.Post(At(3));
  EXPECT_EQ(fake.sent().size(), 3u);  // sent before Post returned
}

TEST(HeartbeatSenderTest, SentByTheNextLookOrByAWakeUpOnceQuiet) {
  FakeSend fake;
  // Looks every 10 ms; quiet after 3 looks without a heartbeat (30 ms).
  HeartbeatSender sender(
      JobCkptEnv{}, [&](const JobCkptEnv&, const HeartbeatSender::Beat& b) { return fake(b); },
      std::chrono::milliseconds(10), 3);
  for (int64_t step = 1; step <= 3; ++step) {  // active: found by a look
    sender.Post(At(step));
    fake.WaitSent(static_cast<size_t>(step));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // quiet: waits to be woken
  sender.Post(At(4));
  fake.WaitSent(4);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  sender.Post(At(5));
  fake.WaitSent(5);
  EXPECT_EQ(fake.sent().back().step, 5);
}

// ---- the C API over the process's sender ----------------------------------------------------

// Answers every request line with `reply`, one connection at a time; records each request and
// its sender's pid.
class EchoDaemon {
 public:
  EchoDaemon() {
    fd_ = socket_.Listen(16);
    EXPECT_GE(fd_, 0);
    thread_ = std::thread([this] {
      for (;;) {
        int c = accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        ucred cred{};
        socklen_t len = sizeof(cred);
        getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len);
        std::string in;
        char buf[4096];
        while (in.find('\n') == std::string::npos) {
          ssize_t n = read(c, buf, sizeof(buf));
          if (n <= 0) break;
          in.append(buf, static_cast<size_t>(n));
        }
        std::string out;
        {
          std::lock_guard<std::mutex> l(mu_);
          auto req = DecodeRequest(in.substr(0, in.find('\n')));
          if (req.ok()) steps_.push_back(req->step);
          pids_.push_back(cred.pid);
          out = reply_ + "\n";
        }
        (void)!write(c, out.data(), out.size());
        close(c);
      }
    });
  }
  ~EchoDaemon() {
    socket_.Shutdown();
    thread_.join();
  }
  const std::string& path() const { return socket_.path(); }
  void Reply(const std::string& r) {
    std::lock_guard<std::mutex> l(mu_);
    reply_ = r;
  }
  std::vector<int64_t> steps() {
    std::lock_guard<std::mutex> l(mu_);
    return steps_;
  }
  std::vector<pid_t> pids() {
    std::lock_guard<std::mutex> l(mu_);
    return pids_;
  }
  void Clear() {
    std::lock_guard<std::mutex> l(mu_);
    steps_.clear();
    pids_.clear();
  }

 private:
  TempSocket socket_;
  int fd_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::string reply_ = R"({"ok":true})";
  std::vector<int64_t> steps_;
  std::vector<pid_t> pids_;
};

// The task's variables towards `daemon`, and a process's sender that reads them (nothing left
// over from an earlier test).
void StartClean(EchoDaemon& daemon) {
  setenv("AUTOPAR_SOCKET", daemon.path().c_str(), 1);
  setenv("SLURM_JOB_ID", "42", 1);
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  RestartProcessHeartbeatSender();
}

TEST(CkptCApiHeartbeatTest, TheFlagAndErrorsComeOneCallLate) {
  EchoDaemon daemon;
  StartClean(daemon);
  const std::string asks = R"({"ok":true,"checkpoint_requested":true})";
  const std::string refuses = R"({"ok":false,"error":"job 42: refused"})";
  struct Case {
    int64_t step;
    const std::string& reply;  // to this heartbeat
    int rc;
    int requested;
    const char* error;
  } cases[] = {
      {17, asks, 0, 0, ""},     // no reply yet
      {18, asks, 0, 1, ""},     // 17's
      {19, refuses, 0, 1, ""},  // 18's
      {20, asks, -1, 0, "heartbeat of step 19: job 42: refused"},
      {21, asks, 0, 1, ""},  // 20's
  };
  for (const auto& c : cases) {
    daemon.Reply(c.reply);
    int requested = -1;
    char err[256] = {};
    EXPECT_EQ(autopar_ckpt_heartbeat_check(c.step, &requested, err, sizeof(err)), c.rc)
        << c.step << ": " << err;
    EXPECT_EQ(requested, c.requested) << c.step;
    EXPECT_STREQ(err, c.error) << c.step;
    ASSERT_EQ(autopar_ckpt_heartbeat_flush(5000, err, sizeof(err)), 0) << err;
  }
  EXPECT_EQ(daemon.steps(), (std::vector<int64_t>{17, 18, 19, 20, 21}));
  // The synchronous one: its own reply, and its own error.
  daemon.Reply(R"({"ok":true})");
  int requested = -1;
  char err[256] = {};
  ASSERT_EQ(autopar_ckpt_heartbeat_sync(22, 64, 8192, 1, 2.5, &requested, err, sizeof(err)), 0)
      << err;
  EXPECT_EQ(requested, 1);  // 21's reply, received meanwhile, still counts
  ASSERT_EQ(autopar_ckpt_heartbeat_sync(23, -1, -1, 0, 0.0, &requested, err, sizeof(err)), 0);
  EXPECT_EQ(requested, 0);
  const std::string dead = daemon.path() + ".gone";
  setenv("AUTOPAR_SOCKET", dead.c_str(), 1);  // read by each synchronous heartbeat
  setenv("AUTOPAR_DAEMON_RETRY_S", "1", 1);    // gone for good: the error after a second
  EXPECT_EQ(autopar_ckpt_heartbeat_sync(24, -1, -1, 0, 0.0, &requested, err, sizeof(err)), -1);
  EXPECT_NE(std::string(err).find("connect"), std::string::npos) << err;
  EXPECT_NE(std::string(err).find("times over 1.0 s"), std::string::npos) << err;
  unsetenv("AUTOPAR_DAEMON_RETRY_S");
  // The background ones read the task's variables once per process.
  ASSERT_EQ(autopar_ckpt_heartbeat(25, err, sizeof(err)), 0) << err;
  ASSERT_EQ(autopar_ckpt_heartbeat_flush(5000, err, sizeof(err)), 0) << err;
  EXPECT_EQ(daemon.steps().back(), 25);
  unsetenv("SLURM_JOB_ID");
  RestartProcessHeartbeatSender();
  EXPECT_EQ(autopar_ckpt_heartbeat(26, err, sizeof(err)), -1);  // the first one reads them
  EXPECT_NE(std::string(err).find("SLURM_JOB_ID"), std::string::npos) << err;
}

TEST(CkptCApiHeartbeatTest, AForkedChildSendsWithAThreadOfItsOwn) {
  EchoDaemon daemon;
  StartClean(daemon);
  char err[256];
  ASSERT_EQ(autopar_ckpt_heartbeat(1, err, sizeof(err)), 0) << err;  // the parent's thread runs
  ASSERT_EQ(autopar_ckpt_heartbeat_flush(5000, err, sizeof(err)), 0) << err;
  pid_t child = fork();
  if (child == 0) {
    char e[256];
    int rc = autopar_ckpt_heartbeat(2, e, sizeof(e));
    rc |= autopar_ckpt_heartbeat_flush(5000, e, sizeof(e));
    _exit(rc == 0 ? 0 : 1);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_EQ(autopar_ckpt_heartbeat(3, err, sizeof(err)), 0) << err;
  ASSERT_EQ(autopar_ckpt_heartbeat_flush(5000, err, sizeof(err)), 0) << err;
  EXPECT_EQ(daemon.steps(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(daemon.pids(), (std::vector<pid_t>{getpid(), child, getpid()}));
}

}  // namespace
}  // namespace autopar
