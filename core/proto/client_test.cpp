#include "autopar/proto_client.h"

#include "autopar/ckpt_c.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>

namespace autopar {
namespace {

// A one-connection server on a temporary socket; `answer` decides what it sends back.
class FakeDaemon {
 public:
  explicit FakeDaemon(std::function<std::string(const std::string&)> answer) {
    char tmpl[] = "/tmp/autopar-client-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/s.sock";
    fd_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path_.c_str());
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 4), 0);
    thread_ = std::thread([this, answer] {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string in;
      char buf[4096];
      while (in.find('\n') == std::string::npos) {
        ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      received_ = in.substr(0, in.find('\n'));
      std::string out = answer(received_);
      if (!out.empty()) (void)!write(c, out.data(), out.size());
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      close(c);
    });
  }
  ~FakeDaemon() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }
  const std::string& received() const { return received_; }

 private:
  std::string dir_, path_, received_;
  int fd_ = -1;
  std::thread thread_;
};

TEST(ClientTest, CommitStepSendsTheJobsFieldsAndReadsTheReply) {
  FakeDaemon daemon([](const std::string&) {
    return std::string(R"({"ok":true,"commit_id":4,"files":2,"bytes":10,"duplicate":false})") + "\n";
  });
  std::map<std::string, std::string> env = {
      {"AUTOPAR_SOCKET", daemon.path()}, {"SLURM_JOB_ID", "42"}, {"AUTOPAR_CKPT_DIR", "/ck/42"},
      {"AUTOPAR_CKPT_UPLOAD", "file:///shared"}, {"RANK", "3"}, {"WORLD_SIZE", "4"},
      {"LOCAL_WORLD_SIZE", "2"}, {"AUTOPAR_CKPT_KEEP", "2"}, {"SLURMD_NODENAME", "node2"}};
  auto job = JobCkptEnvFrom([&](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  ASSERT_TRUE(job.ok()) << job.message();
  auto reply = CommitStep(*job, 7, 2000);
  ASSERT_TRUE(reply.ok()) << reply.message();
  EXPECT_EQ(reply->commit_id, 4);
  EXPECT_EQ(reply->files, 2);
  auto req = DecodeRequest(daemon.received());
  ASSERT_TRUE(req.ok()) << req.message();
  EXPECT_EQ(req->job_id, "42");
  EXPECT_EQ(req->step, 7);
  EXPECT_EQ(req->rank, 3);
  EXPECT_EQ(req->world_size, 4);
  EXPECT_EQ(req->local_world_size, 2);
  EXPECT_EQ(req->keep, 2);
  EXPECT_EQ(req->upload, "file:///shared");
  EXPECT_EQ(req->node, "node2");
}

// The C API's heartbeat passes the time-limit request on (reply field checkpoint_requested).
TEST(ClientTest, CApiHeartbeatReportsTheCheckpointRequest) {
  struct Case {
    const char* reply;
    int want;
  } cases[] = {{R"({"ok":true,"checkpoint_requested":true})", 1}, {R"({"ok":true})", 0}};
  for (const auto& c : cases) {
    FakeDaemon daemon([&c](const std::string&) { return std::string(c.reply) + "\n"; });
    setenv("AUTOPAR_SOCKET", daemon.path().c_str(), 1);
    setenv("SLURM_JOB_ID", "42", 1);
    setenv("AUTOPAR_CKPT_DIR", "/ck/42", 1);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    int requested = -1;
    char err[256] = {};
    ASSERT_EQ(autopar_ckpt_heartbeat_check(17, &requested, err, sizeof(err)), 0) << err;
    EXPECT_EQ(requested, c.want) << c.reply;
    auto req = DecodeRequest(daemon.received());
    ASSERT_TRUE(req.ok()) << req.message();
    EXPECT_EQ(req->op, Op::kHeartbeat);
    EXPECT_EQ(req->step, 17);
    EXPECT_EQ(req->rank, 1);
  }
  unsetenv("AUTOPAR_SOCKET");
}

TEST(ClientTest, RefusalIsAnErrorWithTheDaemonsMessage) {
  FakeDaemon daemon([](const std::string&) {
    return std::string(R"({"ok":false,"error":"commit: job 42 belongs to user alice"})") + "\n";
  });
  Request r;
  r.op = Op::kStatus;
  auto reply = CallDaemonOk(daemon.path(), r, 2000);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.message(), "commit: job 42 belongs to user alice");
}

TEST(ClientTest, SilentDaemonTimesOut) {
  FakeDaemon daemon([](const std::string&) { return std::string(); });
  Request r;
  r.op = Op::kStatus;
  auto start = std::chrono::steady_clock::now();
  auto reply = CallDaemon(daemon.path(), r, 100);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.message().find("no reply within 100 ms"), std::string::npos) << reply.message();
  EXPECT_LT(ms, 1000);
}

TEST(ClientTest, MissingDaemonAndEnvironmentAreNamed) {
  Request r;
  r.op = Op::kStatus;
  auto reply = CallDaemon("/nonexistent/autopard.sock", r, 100);
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.message().find("autopard (/nonexistent/autopard.sock): connect:"), std::string::npos);
  auto job = JobCkptEnvFrom([](const char* k) -> const char* {
    return std::string(k) == "SLURM_JOB_ID" ? "1" : nullptr;
  });
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.message().find("AUTOPAR_CKPT_DIR is not set"), std::string::npos);
  EXPECT_EQ(RankStepDir("/ck/", 5, 2), "/ck/step-5/rank-2");
}

}  // namespace
}  // namespace autopar
