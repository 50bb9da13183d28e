#include "failure_handler.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "autopar/timeline.h"
#include "fake_slurm_for_test.h"

namespace autopar {
namespace {

std::string Environ(const std::vector<std::string>& vars) {
  std::string out;
  for (const auto& v : vars) out += v + std::string(1, '\0');
  return out;
}

class FailureHandlerTest : public ::testing::Test {
 protected:
  FailureHandlerTest() {
    FailureHandlerConfig c;
    c.node = "node1";
    c.python_stack_wait_ms = 0;
    handler_ = std::make_unique<FailureHandler>(
        c, &slurm_, Proc(), [this](const JournalEvent& e) { events_.push_back(e); },
        [this] { return now_; });
  }

  ProcAccess Proc() {
    ProcAccess p;
    p.read_file = [this](const std::string& path) -> Result<std::string> {
      auto it = files_.find(path);
      if (it == files_.end()) return Status::Error(path + ": No such file or directory");
      return it->second;
    };
    p.send_signal = [](int, int) { return Status::Ok(); };
    p.sleep_ms = [](int) {};
    return p;
  }

  // A task of job 42 with `pid` and the given restart count and options.
  void Task(int pid, int restart, const char* requeue = "3", const char* timeout = "60") {
    std::vector<std::string> env = {"SLURM_JOB_ID=42",
                                    "SLURM_RESTART_COUNT=" + std::to_string(restart), "HOME=/root"};
    if (requeue) env.push_back(std::string("AUTOPAR_REQUEUE_ON_FAILURE=") + requeue);
    if (timeout) env.push_back(std::string("AUTOPAR_HEARTBEAT_TIMEOUT=") + timeout);
    files_["/proc/" + std::to_string(pid) + "/environ"] = Environ(env);
    files_["/proc/" + std::to_string(pid) + "/status"] = "State:\tT (stopped)\n";
    files_["/proc/" + std::to_string(pid) + "/wchan"] = "do_signal_stop";
    files_["/proc/" + std::to_string(pid) + "/stat"] = std::to_string(pid) + " (python3) T";
  }

  JournalEvent RankExit(int rank, const std::string& detail) {
    JournalEvent e;
    e.time = now_;
    e.node = "node1";
    e.job_id = "42";
    e.kind = "rank_exit";
    e.rank = rank;
    e.detail = detail;
    return e;
  }

  std::vector<std::string> Kinds() const {
    std::vector<std::string> k;
    for (const auto& e : events_) k.push_back(e.kind);
    return k;
  }

  const JournalEvent* Find(const std::string& kind) const {
    for (const auto& e : events_) {
      if (e.kind == kind) return &e;
    }
    return nullptr;
  }

  FakeSlurm slurm_;
  std::map<std::string, std::string> files_;
  std::vector<JournalEvent> events_;
  double now_ = 1000;
  std::unique_ptr<FailureHandler> handler_;
};

TEST(JobContextTest, FromEnviron) {
  auto c = JobContextFromEnviron(Environ({"SLURM_JOB_ID=7", "SLURM_RESTART_COUNT=2",
                                          "AUTOPAR_REQUEUE_ON_FAILURE=3",
                                          "AUTOPAR_HEARTBEAT_TIMEOUT=45", "X=a=b"}));
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->job_id, "7");
  EXPECT_EQ(c->restart_count, 2);
  EXPECT_EQ(c->requeue_on_failure, 3);
  EXPECT_DOUBLE_EQ(c->heartbeat_timeout_s, 45);
  EXPECT_EQ(c->stack_dir, "/tmp/autopar-stacks/7");

  auto bare = JobContextFromEnviron(Environ({"SLURM_JOB_ID=7", "AUTOPAR_STACK_DIR=/s"}));
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->requeue_on_failure.has_value());
  EXPECT_EQ(bare->restart_count, 0);
  EXPECT_EQ(bare->stack_dir, "/s");

  struct Case {
    std::vector<std::string> env;
    const char* error;
  } cases[] = {
      {{"HOME=/"}, "no SLURM_JOB_ID"},
      {{"SLURM_JOB_ID=7", "SLURM_RESTART_COUNT=x"}, "SLURM_RESTART_COUNT: not a count: 'x'"},
      {{"SLURM_JOB_ID=7", "AUTOPAR_REQUEUE_ON_FAILURE=-1"}, "AUTOPAR_REQUEUE_ON_FAILURE"},
      {{"SLURM_JOB_ID=7", "AUTOPAR_HEARTBEAT_TIMEOUT=0"}, "AUTOPAR_HEARTBEAT_TIMEOUT"},
  };
  for (const auto& cs : cases) {
    auto r = JobContextFromEnviron(Environ(cs.env));
    ASSERT_FALSE(r.ok()) << cs.error;
    EXPECT_NE(r.message().find(cs.error), std::string::npos) << r.message();
  }
}

TEST_F(FailureHandlerTest, CrashedRankRequeuesOnceForManyReports) {
  Task(100, 0);
  Task(101, 0);
  handler_->OnEvent(RankExit(1, "exit=137 signal=9 run_s=80.5"), 100);
  handler_->OnEvent(RankExit(0, "exit=1 run_s=81"), 101);  // the others fail after it
  EXPECT_EQ(slurm_.requeues, 1);
  EXPECT_EQ(Kinds(), std::vector<std::string>({"failure", "requeue"}));
  EventFields f = ParseEventFields(Find("failure")->detail);
  EXPECT_EQ(f[0], std::make_pair(std::string("class"), std::string("rank-crash")));
  EXPECT_EQ(f[2], std::make_pair(std::string("signal"), std::string("9")));
  EXPECT_EQ(Find("failure")->rank, 1);
  EventFields r = ParseEventFields(Find("requeue")->detail);
  EXPECT_EQ(r[0].second, "1");  // attempt
  EXPECT_EQ(r[1].second, "3");  // of
  EXPECT_NE(Find("requeue")->detail.find("killed by SIGKILL after 80.5 s"), std::string::npos);
  auto d = handler_->LastDecision("42");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->action, RequeueAction::kRequeue);
}

TEST_F(FailureHandlerTest, CrashBecauseAPeerNodeDiedIsANodeLoss) {
  Task(100, 0);
  slurm_.job.nodes = "node[1-2]";
  slurm_.dead_nodes = {"node2"};
  handler_->OnHeartbeat("42", 0, 3, 100);
  handler_->OnEvent(RankExit(0, "exit=1 run_s=40"), 100);  // gloo: connection closed by peer
  EXPECT_EQ(slurm_.requeues, 1);
  EXPECT_EQ(slurm_.job.excluded_nodes, "node2");
  EXPECT_EQ(Kinds(), std::vector<std::string>({"failure", "failure", "requeue", "node_down"}));
  EXPECT_NE(events_[1].detail.find("class=node-loss lost=node2"), std::string::npos)
      << events_[1].detail;
  EXPECT_EQ(slurm_.downed, std::vector<std::string>({"node2"}));
  EXPECT_EQ(events_[3].detail, "node=node2 result=DOWN");
  EXPECT_NE(events_[2].detail.find("exclude=node2"), std::string::npos) << events_[2].detail;
}

TEST_F(FailureHandlerTest, ExitAtStartTwiceIsStoppedWithTheReason) {
  Task(100, 0);
  handler_->OnEvent(RankExit(0, "exit=1 run_s=1.2"), 100);
  ASSERT_EQ(slurm_.requeues, 1);
  // The next run (restart count 1) fails the same way: the note in the AdminComment tells.
  slurm_.job.state = "RUNNING";
  Task(200, 1);
  handler_->OnEvent(RankExit(0, "exit=1 run_s=1.1"), 200);
  EXPECT_EQ(slurm_.requeues, 1);
  EXPECT_EQ(slurm_.job.state, "CANCELLED");
  const JournalEvent* stopped = Find("stopped");
  ASSERT_NE(stopped, nullptr);
  EXPECT_NE(stopped->detail.find("same error (rank-crash exit=1) 2 times in a row"),
            std::string::npos)
      << stopped->detail;
  EXPECT_NE(slurm_.job.admin_comment.find("autopar: rank 0 on node1 exited with status 1"),
            std::string::npos);
}

TEST_F(FailureHandlerTest, CrashAfterProgressIsNotImmediate) {
  // Killed 5 s into a run that already trained (heartbeats), twice: requeued both times.
  for (int run = 0; run < 2; ++run) {
    slurm_.job.state = "RUNNING";
    Task(100 + run, run);
    handler_->OnHeartbeat("42", 0, 3, 100 + run);
    handler_->OnEvent(RankExit(0, "exit=137 signal=9 run_s=5"), 100 + run);
  }
  EXPECT_EQ(slurm_.requeues, 2);
  EXPECT_EQ(Find("stopped"), nullptr);
}

TEST_F(FailureHandlerTest, WithoutRequeueOptionOnlyJournals) {
  Task(100, 0, nullptr);
  handler_->OnEvent(RankExit(0, "exit=3 run_s=50"), 100);
  EXPECT_EQ(slurm_.requeues, 0);
  ASSERT_EQ(Kinds(), std::vector<std::string>({"failure"}));
  EXPECT_NE(events_[0].detail.find("requeue=off"), std::string::npos);
}

TEST_F(FailureHandlerTest, ReportsFromStrangersAndCleanExitsAreNotFailures) {
  handler_->OnEvent(RankExit(0, "exit=0 run_s=50"), 100);
  EXPECT_TRUE(events_.empty());
  handler_->OnEvent(RankExit(0, "exit=1 run_s=50"), 999);  // no such process
  EXPECT_EQ(slurm_.requeues, 0);
  ASSERT_EQ(Kinds(), std::vector<std::string>({"requeue_failed"}));
  JournalEvent other = RankExit(0, "exit=1");
  other.kind = "ckpt_complete";
  handler_->OnEvent(other, 100);
  EXPECT_EQ(events_.size(), 1u);
}

TEST_F(FailureHandlerTest, SlurmRefusalIsJournalled) {
  Task(100, 0);
  slurm_.refuse_requeue = "Access/permission denied";
  handler_->OnEvent(RankExit(0, "exit=1 run_s=50"), 100);
  ASSERT_EQ(Kinds(), std::vector<std::string>({"failure", "requeue_failed"}));
  EXPECT_NE(events_[1].detail.find("refused by Slurm: Access/permission denied"),
            std::string::npos);
}

TEST_F(FailureHandlerTest, HangIsDetectedStacksCapturedAndRequeued) {
  Task(100, 0);
  Task(101, 0);
  handler_->OnHeartbeat("42", 0, 0, 100);
  handler_->OnHeartbeat("42", 1, 0, 101);
  now_ += 5;
  handler_->OnHeartbeat("42", 0, 1, 100);  // progress; rank 1 stops here
  handler_->OnHeartbeat("42", 1, 1, 101);
  now_ += 1;
  handler_->OnHeartbeat("42", 0, 2, 100);
  now_ += 59;
  handler_->Tick();
  EXPECT_TRUE(events_.empty());  // 59 s idle < 60 s
  now_ += 2;
  handler_->Tick();
  EXPECT_EQ(Kinds(), std::vector<std::string>(
                         {"heartbeat_missed", "stack", "stack", "failure", "requeue"}));
  EXPECT_EQ(events_[1].rank, 1);  // the suspect first
  EXPECT_NE(events_[1].detail.find("state=\"T (stopped)\" wchan=do_signal_stop"),
            std::string::npos)
      << events_[1].detail;
  EXPECT_NE(events_[0].detail.find("suspects: rank 1"), std::string::npos) << events_[0].detail;
  EXPECT_EQ(slurm_.requeues, 1);
  handler_->Tick();  // reported once
  EXPECT_EQ(events_.size(), 5u);
}

TEST_F(FailureHandlerTest, NewRunResetsHangWatch) {
  Task(100, 0);
  handler_->OnHeartbeat("42", 0, 5, 100);
  handler_->OnHeartbeat("42", 0, 6, 100);
  Task(200, 1);  // the requeued run
  now_ += 50;
  handler_->OnHeartbeat("42", 0, 6, 200);
  now_ += 61;  // 111 s after the old run's progress, 61 s into the new run's first step
  handler_->Tick();
  EXPECT_TRUE(events_.empty());  // the first step has 3 x 60 s
  now_ += 120;
  handler_->Tick();
  ASSERT_FALSE(events_.empty());
  EXPECT_EQ(events_[0].kind, "heartbeat_missed");
  EXPECT_NE(events_[0].detail.find("first-step allowance"), std::string::npos);
}

TEST_F(FailureHandlerTest, RanksThatEndedCannotHang) {
  Task(100, 0);
  Task(101, 0);
  handler_->OnHeartbeat("42", 0, 59, 100);
  handler_->OnHeartbeat("42", 1, 59, 101);
  handler_->OnHeartbeat("42", 0, 60, 100);
  // Training is over: both processes exit cleanly (nobody reports a clean exit).
  files_.erase("/proc/100/stat");
  files_.erase("/proc/101/stat");
  now_ += 1000;
  handler_->Tick();
  EXPECT_TRUE(events_.empty());
  EXPECT_EQ(slurm_.requeues, 0);
}

TEST_F(FailureHandlerTest, NoHeartbeatTimeoutNoHangWatch) {
  Task(100, 0, "3", nullptr);
  handler_->OnHeartbeat("42", 0, 5, 100);
  now_ += 100000;
  handler_->Tick();
  EXPECT_TRUE(events_.empty());
}

}  // namespace
}  // namespace autopar
