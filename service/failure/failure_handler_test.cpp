#include "failure_handler.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <tuple>
#include <string>

#include "core/failure/launch_events.h"
#include "core/failure/timeline.h"
#include "fake_proc_for_test.h"
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

  ProcAccess Proc() { return proc_.Access(); }

  // A task of job 42 with `pid` and the given restart count and options.
  void Task(int pid, int restart, const char* requeue = "3", const char* timeout = "60",
            const char* upload = "file:///shared/ck") {
    std::vector<std::string> env = {"SLURM_JOB_ID=42",
                                    "SLURM_RESTART_COUNT=" + std::to_string(restart), "HOME=/root"};
    if (upload) env.push_back(std::string("AUTOPAR_CKPT_UPLOAD=") + upload);
    if (requeue) env.push_back(std::string("AUTOPAR_REQUEUE_ON_FAILURE=") + requeue);
    if (timeout) env.push_back(std::string("AUTOPAR_HEARTBEAT_TIMEOUT=") + timeout);
    files_["/proc/" + std::to_string(pid) + "/environ"] = Environ(env);
    files_["/proc/" + std::to_string(pid) + "/status"] = "State:\tT (stopped)\n";
    files_["/proc/" + std::to_string(pid) + "/wchan"] = "do_signal_stop";
    Stat(pid, "python3", 1);
  }

  void Stat(int pid, const std::string& comm, int ppid, int start = 100) {
    proc_.Process(pid, comm, ppid, start);
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

  int Count(const std::string& kind) const {
    int n = 0;
    for (const auto& e : events_) n += e.kind == kind;
    return n;
  }

  const JournalEvent* Find(const std::string& kind) const {
    for (const auto& e : events_) {
      if (e.kind == kind) return &e;
    }
    return nullptr;
  }

  // The programs `pids` (ranks 0, 1, ... of job 42) report steps 0 and 1, then nothing for
  // longer than the 60 s timeout.
  void StallAfterTwoSteps(std::initializer_list<pid_t> pids) {
    for (int64_t step : {0, 1}) {
      if (step) now_ += 5;
      int rank = 0;
      for (pid_t pid : pids) handler_->OnHeartbeat("42", rank++, step, pid);
    }
    now_ += 61;
  }

  FakeSlurm slurm_;
  FakeProc proc_;
  std::map<std::string, std::string>& files_ = proc_.files;
  std::vector<JournalEvent> events_;
  double now_ = 1000;
  std::unique_ptr<FailureHandler> handler_;
};

TEST(JobContextTest, FromEnviron) {
  auto c = JobContextFromEnviron(Environ({"SLURM_JOB_ID=7", "SLURM_RESTART_COUNT=2",
                                          "AUTOPAR_REQUEUE_ON_FAILURE=3",
                                          "AUTOPAR_HEARTBEAT_TIMEOUT=45", "X=a=b",
                                          "AUTOPAR_CKPT_UPLOAD=s3://b/p"}));
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->job_id, "7");
  EXPECT_EQ(c->restart_count, 2);
  EXPECT_EQ(c->requeue_on_failure, 3);
  EXPECT_DOUBLE_EQ(c->heartbeat_timeout_s, 45);
  EXPECT_EQ(c->stack_dir, "/tmp/autopar-stacks/7");
  EXPECT_TRUE(c->ckpt_upload);

  auto bare = JobContextFromEnviron(Environ({"SLURM_JOB_ID=7", "AUTOPAR_STACK_DIR=/s"}));
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->requeue_on_failure.has_value());
  EXPECT_EQ(bare->restart_count, 0);
  EXPECT_EQ(bare->stack_dir, "/s");
  EXPECT_FALSE(bare->ckpt_upload);

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

TEST_F(FailureHandlerTest, ARequeueBudgetInTheEnvironmentIsKeptWithinTheSitesLimit) {
  // The job's owner wrote AUTOPAR_REQUEUE_ON_FAILURE=1000 into its environment after submit:
  // the plugin's max_requeue (10 by default, the handler's limits) still holds.
  Task(100, 0, "1000");
  handler_->OnEvent(RankExit(0, "exit=1 run_s=80"), 100);
  ASSERT_EQ(slurm_.requeues, 1);
  EXPECT_EQ(ParseEventFields(Find("requeue")->detail)[1],
            std::make_pair(std::string("of"), std::string("10")));
}

TEST(JobLimitsTest, ClampsWhatTheEnvironmentClaimsToTheSitesLimits) {
  SiteConfig site;
  site.max_requeue = 5;
  site.max_restarts_in_place = 2;
  site.max_rollbacks = 1;
  site.min_heartbeat_timeout = 30;
  site.max_heartbeat_timeout = 600;
  JobContext c;
  c.requeue_on_failure = 1000;
  c.restarts_in_place = 99;
  c.bad_loss.rollbacks = 7;
  c.heartbeat_timeout_s = 1;
  ClampToLimits(JobLimitsOf(site), &c);
  EXPECT_EQ(*c.requeue_on_failure, 5);
  EXPECT_EQ(c.restarts_in_place, 2);
  EXPECT_EQ(c.bad_loss.rollbacks, 1);
  EXPECT_EQ(c.heartbeat_timeout_s, 30);
  c.heartbeat_timeout_s = 1e6;
  ClampToLimits(JobLimitsOf(site), &c);
  EXPECT_EQ(c.heartbeat_timeout_s, 600);
  JobContext off;  // what the job did not ask for stays off
  ClampToLimits(JobLimitsOf(site), &off);
  EXPECT_FALSE(off.requeue_on_failure.has_value());
  EXPECT_EQ(off.heartbeat_timeout_s, 0);
  EXPECT_EQ(off.restarts_in_place, 0);
}

TEST(ElasticMinTasksTest, TheJobsMinimumNeverAsksForMoreTasksThanTheJobHas) {
  SlurmJob job;
  job.ntasks_per_node = 2;
  job.tasks = 8;  // -N4 --ntasks-per-node=2
  JobContext c;
  EXPECT_EQ(ElasticMinTasks(c, job), 0);  // not elastic
  c.min_nodes = 2;
  EXPECT_EQ(ElasticMinTasks(c, job), 4);
  c.min_nodes = 1000;  // AUTOPAR_MIN_NODES is the job's own word
  EXPECT_EQ(ElasticMinTasks(c, job), 8);
  job.ntasks_per_node = 0;  // no --ntasks-per-node: no count to give
  EXPECT_EQ(ElasticMinTasks(c, job), 0);
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
  EXPECT_EQ(events_[3].detail, "node=node2 result=DOWN evidence=\"slurmd refuses connections\"");
  EXPECT_NE(events_[2].detail.find("exclude=node2"), std::string::npos) << events_[2].detail;
}

TEST_F(FailureHandlerTest, ANodeLossRequeueOutlastsTheOldRunsSrunUnderLinuxproc) {
  // Slurm's default KillWait: the old run's srun, lost to proctrack/linuxproc, waits 32 s for
  // the dead node's tasks and then cancels step 0 (the next run's): the next run begins later.
  slurm_.kill_wait_s = 30;
  Task(100, 0);
  slurm_.dead_nodes = {"node2"};
  handler_->OnHeartbeat("42", 0, 3, 100);
  handler_->OnEvent(RankExit(0, "exit=1 run_s=40"), 100);
  ASSERT_EQ(slurm_.requeues, 1);
  EXPECT_NE(events_[2].detail.find("delay_s=35.0"), std::string::npos) << events_[2].detail;
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
  EXPECT_EQ(Kinds(), std::vector<std::string>({"heartbeat_missed", "stack", "stack"}));
  EXPECT_EQ(events_[1].rank, 1);  // the suspect first
  EXPECT_NE(events_[1].detail.find("state=\"T (stopped)\" wchan=do_signal_stop"),
            std::string::npos)
      << events_[1].detail;
  EXPECT_NE(events_[0].detail.find("suspects: rank 1"), std::string::npos) << events_[0].detail;
  // The requeue waits for the grace, so that the other nodes capture their stacks first.
  now_ += 2;
  handler_->Tick();
  EXPECT_EQ(slurm_.requeues, 0);
  now_ += 1;
  handler_->Tick();
  EXPECT_EQ(Kinds(), std::vector<std::string>(
                         {"heartbeat_missed", "stack", "stack", "failure", "requeue"}));
  EXPECT_NE(events_[3].detail.find("class=hang"), std::string::npos) << events_[3].detail;
  EXPECT_EQ(events_[3].rank, 1);
  EXPECT_EQ(slurm_.requeues, 1);
  handler_->Tick();  // reported once
  EXPECT_EQ(events_.size(), 5u);
}

// In place: a rank's program (pid) under its autopar-launch (pid - 50) of job 42.
void InPlaceTask(FakeProc& proc, int pid, int generation, const char* in_place = "3",
                 const std::vector<std::string>& extra = {}) {
  std::vector<std::string> env = {"SLURM_JOB_ID=42", "SLURM_RESTART_COUNT=0",
                                  "AUTOPAR_REQUEUE_ON_FAILURE=3", "AUTOPAR_HEARTBEAT_TIMEOUT=60",
                                  std::string("AUTOPAR_RESTARTS_IN_PLACE=") + in_place};
  env.insert(env.end(), extra.begin(), extra.end());
  proc.files["/proc/" + std::to_string(pid - 50) + "/environ"] = Environ(env);
  proc.Process(pid - 50, "autopar-launch", 1);
  env.push_back("AUTOPAR_RESTART_GENERATION=" + std::to_string(generation));
  proc.files["/proc/" + std::to_string(pid) + "/environ"] = Environ(env);
  proc.files["/proc/" + std::to_string(pid) + "/status"] = "State:\tT (stopped)\n";
  proc.Process(pid, "python3", pid - 50);
}

TEST_F(FailureHandlerTest, InPlaceHangIsHandedToTheLaunchersNotRequeued) {
  InPlaceTask(proc_, 100, 0);
  InPlaceTask(proc_, 101, 0);
  StallAfterTwoSteps({100, 101});
  handler_->Tick();  // detected, stacks captured
  now_ += 3;
  handler_->Tick();  // after the grace: the launchers are told
  EXPECT_EQ(slurm_.requeues, 0);
  ASSERT_EQ(proc_.queued.size(), 2u);
  for (const auto& [pid, sig, value] : proc_.queued) {
    EXPECT_TRUE(pid == 50 || pid == 51) << pid;
    EXPECT_EQ(sig, HungProgramSignal());
    EXPECT_EQ(value, 0);  // the generation
  }
  EXPECT_NE(Find("hang_stop"), nullptr);
  EXPECT_EQ(Find("requeue"), nullptr);
}

TEST_F(FailureHandlerTest, AHangThatTheRunGetsPastIsWatchedAgain) {
  // --fault-tolerance=step: the hung member is replaced, the others never stop (the same run and
  // generation), and the run goes on: a second hang must be seen as the first was.
  InPlaceTask(proc_, 100, 0);
  InPlaceTask(proc_, 101, 0);
  StallAfterTwoSteps({100, 101});
  handler_->Tick();  // detected
  handler_->OnHeartbeat("42", 0, 1, 100);  // no progress: still the same hang
  now_ += 3;
  handler_->Tick();  // handed over
  ASSERT_EQ(proc_.queued.size(), 2u);
  handler_->OnHeartbeat("42", 0, 2, 100);  // the group goes on
  handler_->OnHeartbeat("42", 1, 2, 101);
  now_ += 59;
  handler_->Tick();
  EXPECT_EQ(Count("heartbeat_missed"), 1);  // a full timeout from the hand-over, not before
  now_ += 2;
  handler_->Tick();
  now_ += 3;
  handler_->Tick();
  EXPECT_EQ(proc_.queued.size(), 4u);
  EXPECT_EQ(Count("heartbeat_missed"), 2);
}

TEST_F(FailureHandlerTest, AFaultTolerantGroupsHangIsHandedOverAtOnce) {
  // Only the hung program is replaced (its launcher's call): no grace for the other nodes.
  InPlaceTask(proc_, 100, 0, "3", {"AUTOPAR_FAULT_TOLERANCE=step"});
  StallAfterTwoSteps({100});
  handler_->Tick();
  EXPECT_EQ(Count("heartbeat_missed"), 1);
  ASSERT_EQ(proc_.queued.size(), 1u);
  EXPECT_NE(Find("hang_stop"), nullptr);
}

TEST_F(FailureHandlerTest, AHangThatStaysAfterItsHandOverIsReportedAgain) {
  // What the launchers were told did not end it (a replacement that hangs as well): another full
  // timeout later, the launchers are told again.
  InPlaceTask(proc_, 100, 0);
  StallAfterTwoSteps({100});
  handler_->Tick();
  now_ += 3;
  handler_->Tick();
  ASSERT_EQ(proc_.queued.size(), 1u);
  now_ += 61;
  handler_->Tick();
  now_ += 3;
  handler_->Tick();
  EXPECT_EQ(proc_.queued.size(), 2u);
  EXPECT_EQ(Count("heartbeat_missed"), 2);
}

TEST_F(FailureHandlerTest, RecoverDecidesInPlaceThenHandsOverWhenTheBudgetIsSpent) {
  InPlaceTask(proc_, 100, 0, "1");
  handler_->OnHeartbeat("42", 0, 4, 100);  // progress in generation 0
  auto first = handler_->Recover("42", 1, "class=rank-crash exit=137 signal=9 run_s=40 node=node2 "
                                 "generation=0 detected=999.5", 50);
  ASSERT_TRUE(first.ok()) << first.message();
  EXPECT_EQ(first->action, "restart-in-place");
  EXPECT_EQ(slurm_.requeues, 0);
  const JournalEvent* failure = Find("failure");
  ASSERT_NE(failure, nullptr);
  EXPECT_EQ(failure->rank, 1);
  EXPECT_NE(failure->detail.find("generation=0"), std::string::npos) << failure->detail;
  EXPECT_NE(Find("recovery")->detail.find("action=restart-in-place"), std::string::npos);
  // The restarted generation's first step ends the recovery.
  InPlaceTask(proc_, 200, 1, "1");
  now_ += 4;
  handler_->OnHeartbeat("42", 0, 5, 200);
  const JournalEvent* first_step = Find("first_step");
  ASSERT_NE(first_step, nullptr);
  EXPECT_NE(first_step->detail.find("since_failure_s=4.500"), std::string::npos)
      << first_step->detail;
  // Generation 1 fails too: the budget of 1 is spent, the requeue path requeues the job.
  auto second = handler_->Recover("42", 0, "class=rank-crash exit=1 run_s=40 generation=1 " +
                                  std::string("history=\"") + first->history + "\"", 50);
  ASSERT_TRUE(second.ok()) << second.message();
  EXPECT_EQ(second->action, "requeue");
  EXPECT_EQ(slurm_.requeues, 1);
  EXPECT_NE(events_.back().detail.find("attempt=1"), std::string::npos) << events_.back().detail;
}

// A recover request's lost nodes are evidence: nodes outside the job's allocation, or whose
// slurmd still answers, are never marked DOWN nor excluded; each refusal is journaled.
// Job 42 running on node1 and node2, requeueable, with its rank 0 in place (InPlaceTask).
void RunningOnTwoNodes(FakeSlurm& slurm, FakeProc& proc) {
  slurm.job.job_id = "42";
  slurm.job.state = "RUNNING";
  slurm.job.batch = true;
  slurm.job.requeue_allowed = true;
  slurm.job.nodes = "node[1-2]";
  InPlaceTask(proc, 100, 0, "0");
}

TEST_F(FailureHandlerTest, LostNodesAreCheckedAgainstTheAllocationAndSlurm) {
  RunningOnTwoNodes(slurm_, proc_);
  slurm_.dead_nodes = {"node3", "node4"};  // gone, but not this job's
  auto r = handler_->Recover("42", 0, "class=node-loss lost=node[2-4],node9 spares=0 generation=0", 50);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(slurm_.downed.empty());
  EXPECT_EQ(slurm_.job.excluded_nodes, "");
  std::vector<std::string> refused;
  for (const auto& e : events_) {
    if (e.kind == "claim_refused") refused.push_back(e.detail);
  }
  ASSERT_EQ(refused.size(), 2u) << ::testing::PrintToString(Kinds());
  EXPECT_NE(refused[0].find("node=node3,node4,node9 count=3 reason=\"not a node of job 42 (node[1-2])\""),
            std::string::npos)
      << refused[0];
  EXPECT_NE(refused[1].find("node=node2 count=1 reason=\"its slurmd still answers\""), std::string::npos)
      << refused[1];
  // Nothing of the claim held: the job's own rank failed.
  EXPECT_NE(Find("failure")->detail.find("class=rank-crash"), std::string::npos) << Find("failure")->detail;
}

// A claim of 65,535 names is one journal row (and a linear de-duplication): the request is
// charged to the job as one event, not one per name.
TEST_F(FailureHandlerTest, AHugeLostListIsOneRefusalNotOneRowPerName) {
  RunningOnTwoNodes(slurm_, proc_);
  std::string lost = "x[1-65535],node2";
  auto r = handler_->Recover("42", 0, "class=node-loss lost=" + lost + " spares=0 generation=0", 50);
  ASSERT_TRUE(r.ok()) << r.message();
  std::vector<std::string> refused;
  for (const auto& e : events_) {
    if (e.kind == "claim_refused") refused.push_back(e.detail);
  }
  ASSERT_EQ(refused.size(), 2u);
  EXPECT_NE(refused[0].find("node=x1,x2,x3,x4,x5,x6,x7,x8,... count=65535 reason=\"not a node"),
            std::string::npos)
      << refused[0];
  EXPECT_TRUE(slurm_.downed.empty());
}

TEST_F(FailureHandlerTest, ALostNodeOfTheJobWhoseSlurmdIsGoneIsLost) {
  RunningOnTwoNodes(slurm_, proc_);
  slurm_.dead_nodes = {"node2", "node3"};
  auto lost = handler_->Recover("42", 0, "class=node-loss lost=node2,node3 spares=0 generation=0", 50);
  ASSERT_TRUE(lost.ok()) << lost.message();
  EXPECT_NE(Find("failure")->detail.find("class=node-loss"), std::string::npos) << Find("failure")->detail;
  EXPECT_NE(Find("failure")->detail.find("lost=node2 "), std::string::npos) << Find("failure")->detail;
  EXPECT_EQ(slurm_.downed, std::vector<std::string>({"node2"}));
}

// A lost node is taken out of the cluster (DOWN) only on evidence a user cannot fake (slurmd
// refuses connections, or slurmctld finds it not responding); a probe that only timed out, which
// a user who fills slurmd's accept queue causes, excludes the node from the job's own next run
// and leaves the node to slurmctld.
TEST_F(FailureHandlerTest, ANodeIsMarkedDownOnlyOnEvidenceAUserCannotFake) {
  RunningOnTwoNodes(slurm_, proc_);
  slurm_.dead_nodes = {"node2"};
  slurm_.weak_nodes = {"node2"};
  auto r = handler_->Recover("42", 0, "class=node-loss lost=node2 spares=0 generation=0", 50);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(slurm_.downed.empty());
  const JournalEvent* down = Find("node_down");
  ASSERT_NE(down, nullptr);
  EXPECT_NE(down->detail.find("result=\"not marked: its slurmd did not answer"), std::string::npos)
      << down->detail;
  EXPECT_NE(Find("failure")->detail.find("class=node-loss"), std::string::npos);  // still the job's
}

TEST_F(FailureHandlerTest, ABadLossRollsBackInPlaceOnItsOwnBudgetThenStops) {
  const std::vector<std::string> opts = {"AUTOPAR_CKPT_DIR=/ck", "AUTOPAR_ON_BAD_LOSS=rollback:1"};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  slurm_.job.job_id = "42";
  slurm_.job.state = "RUNNING";
  InPlaceTask(proc_, 100, 0, "1", opts);
  InPlaceTask(proc_, 101, 0, "1", opts);
  handler_->OnHeartbeat("42", 1, 10, 101, false, -1, -1, nan);  // only rank 0's loss counts
  handler_->OnHeartbeat("42", 0, 5, 100, false, 64, -1, 1.5);
  EXPECT_TRUE(proc_.queued.empty());
  handler_->OnHeartbeat("42", 0, 10, 100, false, 64, -1, nan);
  ASSERT_EQ(proc_.queued.size(), 1u);
  EXPECT_EQ(std::get<0>(proc_.queued[0]), 50);  // rank 0's launcher
  EXPECT_EQ(std::get<1>(proc_.queued[0]), BadLossSignal());
  EXPECT_EQ(std::get<2>(proc_.queued[0]), 0);  // the generation
  const JournalEvent* bad = Find("bad_loss");
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->step, 10);
  EXPECT_NE(bad->detail.find("kind=nan loss=nan action=rollback"), std::string::npos) << bad->detail;
  handler_->OnHeartbeat("42", 0, 11, 100, false, 64, -1, nan);  // the same streak, under way
  EXPECT_EQ(proc_.queued.size(), 1u);
  // Rank 0's launcher asks: restart in place, resuming no later than the last good loss's step.
  auto r = handler_->Recover("42", 0, "class=bad-loss exit=137 signal=9 run_s=40 generation=0", 50);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->action, "restart-in-place");
  EXPECT_EQ(r->resume_max_step, 5);
  EXPECT_NE(Find("failure")->detail.find("class=bad-loss"), std::string::npos);
  EXPECT_NE(Find("recovery")->detail.find("rollback=1 of=1 resume_max_step=5"), std::string::npos)
      << Find("recovery")->detail;
  // A second `recover` of the same generation has no rollback behind it.
  EXPECT_FALSE(handler_->Recover("42", 0, "class=bad-loss generation=0", 50).ok());
  // Generation 1 crashes: --restarts-in-place=1 is not spent by the rollback.
  InPlaceTask(proc_, 200, 1, "1", opts);
  handler_->OnHeartbeat("42", 0, 6, 200, false, 64, -1, 1.4);
  auto crash = handler_->Recover("42", 0, "class=rank-crash exit=1 run_s=40 generation=1", 150);
  ASSERT_TRUE(crash.ok()) << crash.message();
  EXPECT_EQ(crash->action, "restart-in-place");
  EXPECT_EQ(crash->resume_max_step, -1);
  // Generation 2's loss goes bad: the one rollback is used, the job is stopped.
  InPlaceTask(proc_, 300, 2, "1", opts);
  handler_->OnHeartbeat("42", 0, 7, 300, false, 64, -1, 1.3);
  handler_->OnHeartbeat("42", 0, 8, 300, false, 64, -1, nan);
  EXPECT_EQ(proc_.queued.size(), 1u);
  EXPECT_EQ(slurm_.job.state, "CANCELLED");
  EXPECT_NE(slurm_.job.admin_comment.find("all 1 rollbacks of --on-bad-loss=rollback:1 are used"),
            std::string::npos)
      << slurm_.job.admin_comment;
  EXPECT_EQ(Kinds().back(), "stopped");
}

TEST_F(FailureHandlerTest, AStragglerIsFlaggedWithItsNodeAndLeftOutOfTheNextRestart) {
  InPlaceTask(proc_, 100, 0, "3",
              {"AUTOPAR_EXCLUDE_STRAGGLERS=yes", "AUTOPAR_STRAGGLER_MARGIN=0.5",
               "AUTOPAR_STRAGGLER_WINDOWS=2"});
  const RanksReport first{{0.1, 0.1, 0.3, 0.1}, {"node1", "node1", "node2", "node2"}};
  handler_->OnHeartbeat("42", 0, 0, 100, false, -1, -1, std::nullopt, first);
  for (int step = 1; step <= 120; ++step) {
    now_ += 1;  // windows of progress_interval_s (30 s)
    handler_->OnHeartbeat("42", 0, step, 100, false, -1, -1, std::nullopt,
                          RanksReport{{0.1, 0.11, 0.3, 0.1}, {}});
  }
  std::vector<const JournalEvent*> flags;
  for (const auto& e : events_) {
    if (e.kind == "straggler") flags.push_back(&e);
  }
  ASSERT_EQ(flags.size(), 1u);  // once, after two slow windows
  EXPECT_EQ(flags[0]->rank, 2);
  EXPECT_NE(flags[0]->detail.find("node=node2 compute_s=0.3000"), std::string::npos) << flags[0]->detail;
  EXPECT_NE(flags[0]->detail.find("margin=0.50 excluded_next=yes"), std::string::npos) << flags[0]->detail;
  auto r = handler_->Recover("42", 1, "class=rank-crash exit=1 run_s=40 generation=0", 50);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->action, "restart-in-place");
  EXPECT_EQ(r->exclude_nodes, std::vector<std::string>{"node2"});
  EXPECT_NE(Find("recovery")->detail.find("exclude=node2"), std::string::npos);
}

TEST_F(FailureHandlerTest, TheRankThatLeadsInRankZerosPlaceReportsTheJobsProgress) {
  // A fault-tolerant group that lost rank 0's node: its lowest member's heartbeats say "leads"
  // (protocol.h) and carry the job's progress on its node, as rank 0's did; another rank's never.
  InPlaceTask(proc_, 100, 0);
  auto progress = [&] {
    int n = 0;
    for (const auto& e : events_) n += e.kind == "progress";
    return n;
  };
  for (int step = 0; step < 70; ++step) {
    now_ += 1;  // progress_interval_s is 30 s
    handler_->OnHeartbeat("42", 2, step, 100, false, 64, -1, 1.0);
  }
  EXPECT_EQ(progress(), 0);
  for (int step = 70; step < 140; ++step) {
    now_ += 1;
    handler_->OnHeartbeat("42", 2, step, 100, false, 64, -1, 1.0, RanksReport{{}, {}, true});
  }
  EXPECT_GE(progress(), 1);
  for (const auto& e : events_) {
    if (e.kind == "progress") {
      EXPECT_EQ(e.rank, 2) << e.detail;
    }
  }
}

TEST_F(FailureHandlerTest, ABadLossIsOnlyJournalledByDefault) {
  InPlaceTask(proc_, 100, 0, "1", {"AUTOPAR_LOSS_SPIKE=3"});
  for (int step = 0; step < 12; ++step) handler_->OnHeartbeat("42", 0, step, 100, false, -1, -1, 1.0);
  handler_->OnHeartbeat("42", 0, 12, 100, false, -1, -1, 3.5);
  const JournalEvent* bad = Find("bad_loss");
  ASSERT_NE(bad, nullptr);
  EXPECT_NE(bad->detail.find("kind=spike loss=3.5 mean=1 factor=3 action=warn"), std::string::npos)
      << bad->detail;
  EXPECT_TRUE(proc_.queued.empty());
  EXPECT_EQ(slurm_.requeues, 0);
}

TEST_F(FailureHandlerTest, RecoverIsRefusedForAnotherJobsProcess) {
  Task(300, 0);
  files_["/proc/300/environ"] = Environ({"SLURM_JOB_ID=43"});
  auto r = handler_->Recover("42", 0, "class=rank-crash exit=1 generation=0", 300);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("did not come from a task of job 42"), std::string::npos);
  InPlaceTask(proc_, 100, 0);
  EXPECT_FALSE(handler_->Recover("42", 0, "class=bogus generation=0", 50).ok());
  EXPECT_FALSE(handler_->Recover("42", 0, "class=hang", 50).ok());  // no generation
}

TEST_F(FailureHandlerTest, AWatchResumedAfterARestartFindsARankThatHungMeanwhile) {
  // autopard restarted: a new handler knows nothing but the state database's last heartbeats
  // (rank 0 at step 7 at t=1000, rank 1 at step 7 at t=1001), and no heartbeat comes any more.
  Task(100, 0);
  Task(101, 0);
  now_ = 1010;
  EXPECT_TRUE(handler_->ResumeWatch("42", 0, 7, 100, 1000));
  EXPECT_TRUE(handler_->ResumeWatch("42", 1, 7, 101, 1001));
  EXPECT_FALSE(handler_->ResumeWatch("42", 2, 7, 555, 1001));  // its process is gone
  EXPECT_FALSE(handler_->ResumeWatch("43", 0, 7, 100, 1001));  // pid 100 is job 42's
  EXPECT_EQ(handler_->RankProcessOf("42", 1), 101);
  // The first-step allowance (3 x 60 s) from the recorded heartbeats: not hung before 1180.
  now_ = 1179;
  handler_->Tick();
  EXPECT_TRUE(events_.empty());
  now_ = 1182;
  handler_->Tick();
  ASSERT_FALSE(events_.empty());
  EXPECT_EQ(events_[0].kind, "heartbeat_missed");
}

TEST_F(FailureHandlerTest, AJobIsForgottenOnlyOnceNothingOfItRunsOrHappenedForSixHours) {
  Task(100, 0);
  handler_->OnHeartbeat("42", 0, 5, 100);
  // Six hours and more of no news, but its rank still runs (a hang is reported, not forgotten).
  now_ += 6 * 3600 + 1;
  handler_->Tick();
  EXPECT_EQ(handler_->RankProcessOf("42", 0), 100);
  // The rank ended: the record goes at the next tick after six idle hours, not before.
  files_.erase("/proc/100/stat");
  handler_->OnHeartbeat("42", 0, 6, 100);  // refused (the process is gone): no news
  handler_->Tick();
  EXPECT_EQ(handler_->RankProcessOf("42", 0), 0);
  // Seen again (a new record): its rank ended an hour ago, and it is kept.
  Task(200, 0);
  handler_->OnHeartbeat("42", 0, 1, 200);
  files_.erase("/proc/200/stat");
  now_ += 3600;
  handler_->Tick();
  EXPECT_EQ(handler_->RankProcessOf("42", 0), 200);
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

// Past its training loop a program says it is finishing (autopar's Python module, at exit): its
// exit has the first-step allowance, 3 x 60 s, not the plain 60 s; an exit that never ends is a
// hang all the same. A notice from a process outside the job changes nothing.
TEST_F(FailureHandlerTest, AFinishingRankHasTheAllowanceToExit) {
  Task(100, 0);
  Task(101, 0);
  handler_->OnHeartbeat("42", 0, 1, 100);
  handler_->OnHeartbeat("42", 1, 1, 101);
  handler_->OnHeartbeat("42", 0, 2, 100);
  handler_->OnFinishing("42", 100);
  now_ += 61;
  handler_->Tick();
  EXPECT_TRUE(events_.empty());
  now_ += 118;
  handler_->Tick();
  EXPECT_TRUE(events_.empty());
  now_ += 2;
  handler_->Tick();
  ASSERT_FALSE(events_.empty());
  EXPECT_EQ(events_[0].kind, "heartbeat_missed");
  EXPECT_NE(events_[0].detail.find("a rank finishing"), std::string::npos) << events_[0].detail;
}

TEST_F(FailureHandlerTest, AFinishingNoticeFromOutsideTheJobChangesNothing) {
  Task(100, 0);
  Task(101, 0);
  Stat(200, "python3", 1);  // not a task of job 42
  handler_->OnHeartbeat("42", 0, 1, 100);
  handler_->OnHeartbeat("42", 1, 1, 101);
  handler_->OnHeartbeat("42", 0, 2, 100);
  handler_->OnFinishing("42", 200);
  handler_->OnFinishing("43", 100);  // a task of another job than it names
  now_ += 61;
  handler_->Tick();
  EXPECT_EQ(Kinds(), std::vector<std::string>({"heartbeat_missed", "stack", "stack"}));
}

// `autopar heartbeat` in a shell loop: every heartbeat comes from a new process that is gone
// by the next tick. The rank lives as long as its task (the shell below autopar-launch); a shell
// that stops heartbeating is a hang, and one that ends is not.
TEST_F(FailureHandlerTest, ShortLivedSendersCountAsTheirTask) {
  Stat(10, "slurmstepd", 1);
  Stat(20, "autopar-launch", 10);
  Task(30, 0);  // the task's shell
  Stat(30, "bash", 20);
  int sender = 1000;
  auto beat = [&](int64_t step) {
    Task(sender, 0);
    Stat(sender, "autopar", 30);
    handler_->OnHeartbeat("42", 0, step, sender, /*short_lived=*/true);
    files_.erase("/proc/" + std::to_string(sender) + "/stat");  // the command has exited
    ++sender;
  };
  for (int64_t step = 0; step < 5; ++step) {
    beat(step);
    now_ += 1;
    handler_->Tick();
  }
  EXPECT_TRUE(events_.empty());
  now_ += 61;  // the shell stops heartbeating (e.g. SIGSTOP) but its task lives
  handler_->Tick();
  ASSERT_FALSE(events_.empty());
  EXPECT_EQ(events_[0].kind, "heartbeat_missed");
  ASSERT_EQ(Kinds(), std::vector<std::string>({"heartbeat_missed", "stack"}));
  EXPECT_NE(events_[1].detail.find("pid=30"), std::string::npos) << events_[1].detail;

  // The same without short_lived: the gone sender is taken for an ended rank, so no hang.
  events_.clear();
  Task(300, 1);
  Stat(300, "bash", 20);
  Task(301, 1);
  Stat(301, "autopar", 300);
  handler_->OnHeartbeat("42", 0, 0, 301);
  handler_->OnHeartbeat("42", 0, 1, 301);
  files_.erase("/proc/301/stat");
  now_ += 1000;
  handler_->Tick();
  EXPECT_TRUE(events_.empty());
}

// A rank's pid taken by another process after the rank ended is not the rank.
TEST_F(FailureHandlerTest, AReusedPidIsNotTheRank) {
  Task(100, 0);
  handler_->OnHeartbeat("42", 0, 1, 100);
  handler_->OnHeartbeat("42", 0, 2, 100);
  Stat(100, "sshd", 1, /*start=*/999);  // rank 0 ended; its pid now belongs to someone else
  now_ += 1000;
  handler_->Tick();
  EXPECT_TRUE(events_.empty());
}

TEST_F(FailureHandlerTest, NoHeartbeatTimeoutNoHangWatch) {
  Task(100, 0, "3", nullptr);
  handler_->OnHeartbeat("42", 0, 5, 100);
  now_ += 100000;
  handler_->Tick();
  EXPECT_TRUE(events_.empty());
}

// Time limits: job 42 started at 1000 with a 2-minute limit (end 1120).
class TimeLimitTest : public FailureHandlerTest {
 protected:
  TimeLimitTest() {
    slurm_.job.start_time = 1000;
    slurm_.job.end_time = 1120;
    slurm_.job.time_limit_min = 2;
  }
  JournalEvent Ckpt(const char* kind, int64_t step, int rank = -1) {
    JournalEvent e;
    e.time = now_;
    e.node = "node1";
    e.job_id = "42";
    e.kind = kind;
    e.rank = rank;
    e.step = step;
    return e;
  }
  // Heartbeats of ranks 0 and 1 (pids 100, 101) at `step`, one second per step from 1000; ticks.
  bool Step(int64_t step) {
    now_ = 1000 + static_cast<double>(step);
    bool a = handler_->OnHeartbeat("42", 0, step, 100);
    bool b = handler_->OnHeartbeat("42", 1, step, 101);
    EXPECT_EQ(a, b);
    handler_->Tick();
    return a;
  }
  int Count(const std::string& kind) const {
    int n = 0;
    for (const auto& e : events_) n += e.kind == kind;
    return n;
  }
};

TEST_F(TimeLimitTest, RequestsAtTheMarginThenRequeuesOnceTheStepIsComplete) {
  Task(100, 0);
  Task(101, 0);
  // No checkpoint observed yet: estimate 60 s -> margin 1 + 90 + 15 = 106 s, capped at half the
  // 120 s run: request at 1060.
  for (int64_t s = 0; s < 60; ++s) ASSERT_FALSE(Step(s)) << s;
  EXPECT_EQ(Count("time_limit_request"), 0);
  EXPECT_LE(slurm_.loads, 3);  // about once per 30 s, never per heartbeat
  EXPECT_FALSE(Step(60));      // the tick after this heartbeat asks
  const JournalEvent* req = Find("time_limit_request");
  ASSERT_NE(req, nullptr);
  EventFields f = ParseEventFields(req->detail);
  EXPECT_EQ(f[2], std::make_pair(std::string("margin_s"), std::string("60.0")));
  EXPECT_EQ(f[3], std::make_pair(std::string("ckpt_estimate_s"), std::string("60.0")));
  EXPECT_EQ(f[5], std::make_pair(std::string("step_s"), std::string("1.0")));
  EXPECT_TRUE(Step(61));  // delivered with this heartbeat
  EXPECT_EQ(slurm_.requeues, 0);
  handler_->OnEvent(Ckpt("time_limit_checkpoint", 61, 0), 100);
  handler_->OnEvent(Ckpt("ckpt_committed", 61, 0), 0);
  handler_->OnEvent(Ckpt("ckpt_committed", 61, 1), 0);
  EXPECT_EQ(slurm_.requeues, 0);
  now_ += 2;
  handler_->OnEvent(Ckpt("ckpt_complete", 61), 0);
  EXPECT_EQ(slurm_.requeues, 1);
  EXPECT_EQ(slurm_.job.restart_count, 1);
  const JournalEvent* rq = Find("requeue");
  ASSERT_NE(rq, nullptr);
  EXPECT_EQ(rq->step, 61);
  EXPECT_NE(rq->detail.find("class=time-limit attempt=1 of=3 delay_s=0.0"), std::string::npos)
      << rq->detail;
  EXPECT_NE(rq->detail.find("step 61 is COMPLETE; requeue 1 of 3"), std::string::npos);
  // A second report of the completion (another node's view) changes nothing.
  handler_->OnEvent(Ckpt("ckpt_complete", 61), 0);
  EXPECT_EQ(slurm_.requeues, 1);
  EXPECT_EQ(Count("time_limit_missed"), 0);
}

TEST_F(TimeLimitTest, ObservedCheckpointsSetTheMarginAndTimeLimitUpdatesAreRead) {
  Task(100, 0);
  Task(101, 0);
  for (int64_t s = 0; s < 10; ++s) Step(s);
  handler_->OnEvent(Ckpt("ckpt_committed", 9, 0), 0);
  now_ += 2;  // 2 s from commit to upload: estimate 2 s -> margin max(20, 1 + 3 + 15) = 20 s
  handler_->OnEvent(Ckpt("ckpt_uploaded", 9, 0), 0);
  // `scontrol update TimeLimit=3`: read at the next refresh (30 s after the last).
  slurm_.job.end_time = 1180;
  slurm_.job.time_limit_min = 3;
  for (int64_t s = 10; s < 200; ++s) {
    if (Step(s)) break;
  }
  const JournalEvent* req = Find("time_limit_request");
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->time, 1160);  // 1180 - 20
  EXPECT_NE(req->detail.find("margin_s=20.0 ckpt_estimate_s=2.0 ckpt_observed=1"),
            std::string::npos)
      << req->detail;
}

TEST_F(TimeLimitTest, AnIgnoredRequestIsJournalledAsMissedWhenTheJobTimesOut) {
  Task(100, 0);
  Task(101, 0);
  for (int64_t s = 0; s <= 61; ++s) Step(s);
  ASSERT_EQ(Count("time_limit_request"), 1);
  for (int64_t s = 62; s < 120; ++s) EXPECT_TRUE(Step(s));
  slurm_.job.state = "TIMEOUT";
  now_ = 1125;
  handler_->Tick();
  now_ = 1160;
  handler_->Tick();
  handler_->Tick();
  EXPECT_EQ(Count("time_limit_missed"), 1);
  EXPECT_EQ(slurm_.requeues, 0);
  EXPECT_EQ(Count("heartbeat_missed"), 0);
}

TEST_F(TimeLimitTest, NoProgressOrNoRestartLeftIsNotRequeuedAndNotCancelled) {
  struct Case {
    int restart;
    int64_t first_step;     // first heartbeat step of the run (resumed from first_step - 1)
    int64_t complete_step;  // the step announced, committed and COMPLETE
    const char* reason;
  } cases[] = {
      {0, 50, 49, "no checkpoint became COMPLETE during this run"},  // the resumed step again
      {3, 0, 61, "all 3 restarts of --requeue-on-failure=3 are used"},
  };
  for (const auto& c : cases) {
    FakeSlurm slurm;
    slurm.job.start_time = 1000;
    slurm.job.end_time = 1120;
    slurm.job.time_limit_min = 2;
    slurm.job.restart_count = c.restart;
    events_.clear();
    FailureHandlerConfig cfg;
    cfg.node = "node1";
    FailureHandler h(cfg, &slurm, Proc(), [this](const JournalEvent& e) { events_.push_back(e); },
                     [this] { return now_; });
    Task(200, c.restart);
    bool asked = false;
    for (int64_t s = c.first_step; s < 200 && !asked; ++s) {
      now_ = 1000 + static_cast<double>(s - c.first_step);
      asked = h.OnHeartbeat("42", 0, s, 200);
      h.Tick();
    }
    ASSERT_TRUE(asked);
    h.OnEvent(Ckpt("time_limit_checkpoint", c.complete_step, 0), 200);
    h.OnEvent(Ckpt("ckpt_committed", c.complete_step, 0), 0);
    h.OnEvent(Ckpt("ckpt_complete", c.complete_step), 0);
    EXPECT_EQ(slurm.requeues, 0) << c.reason;
    EXPECT_EQ(slurm.job.state, "RUNNING") << c.reason;  // runs into its limit: TIMEOUT
    const JournalEvent* n = Find("time_limit_not_requeued");
    ASSERT_NE(n, nullptr) << c.reason;
    EXPECT_NE(n->detail.find(c.reason), std::string::npos) << n->detail;
  }
}

TEST_F(TimeLimitTest, WaitingForTheRequeueIsNotAHang) {
  Task(100, 0, "3", "10");
  Task(101, 0, "3", "10");
  for (int64_t s = 0; s <= 61; ++s) Step(s);
  handler_->OnEvent(Ckpt("time_limit_checkpoint", 61, 0), 100);
  handler_->OnEvent(Ckpt("ckpt_committed", 61, 0), 0);
  for (int i = 0; i < 40; ++i) {  // the upload is slow: no heartbeats meanwhile
    now_ += 1;
    handler_->Tick();
  }
  EXPECT_EQ(Count("heartbeat_missed"), 0);
  EXPECT_EQ(slurm_.requeues, 0);
}

TEST_F(TimeLimitTest, RanksThatEndedAreNotAsked) {
  Task(100, 0);
  Task(101, 0);
  for (int64_t s = 0; s < 50; ++s) Step(s);
  files_.erase("/proc/100/stat");  // the training finished before the margin
  files_.erase("/proc/101/stat");
  for (int i = 0; i < 60; ++i) {
    now_ += 1;
    handler_->Tick();
  }
  EXPECT_EQ(Count("time_limit_request"), 0);
}

TEST_F(TimeLimitTest, JobsWithoutRequeueOnFailureOrUploadAreNotAskedOrLoaded) {
  struct Case {
    const char* requeue;
    const char* upload;
  } cases[] = {{nullptr, "file:///shared/ck"}, {"3", nullptr}};
  for (const auto& c : cases) {
    FakeSlurm slurm;
    slurm.job.end_time = 1120;
    slurm.job.time_limit_min = 2;
    FailureHandlerConfig cfg;
    cfg.node = "node1";
    FailureHandler h(cfg, &slurm, Proc(), [this](const JournalEvent& e) { events_.push_back(e); },
                     [this] { return now_; });
    Task(300, 0, c.requeue, "60", c.upload);
    for (int64_t s = 0; s < 119; ++s) {
      now_ = 1000 + static_cast<double>(s);
      EXPECT_FALSE(h.OnHeartbeat("42", 0, s, 300));
      h.Tick();
    }
    EXPECT_EQ(slurm.loads, 0);
    EXPECT_EQ(Count("time_limit_request"), 0);
  }
}

TEST_F(TimeLimitTest, NoTimeLimitNoRequest) {
  slurm_.job.end_time = 0;
  slurm_.job.time_limit_min = -1;
  Task(100, 0);
  Task(101, 0);
  for (int64_t s = 0; s < 200; ++s) EXPECT_FALSE(Step(s));
  EXPECT_EQ(Count("time_limit_request"), 0);
}

}  // namespace
}  // namespace autopar

namespace autopar {
namespace {

TEST_F(TimeLimitTest, APreemptionIsRequeuedOnceItsStepIsCompleteAndNotCounted) {
  Task(100, 0);
  Task(101, 0);
  slurm_.job.batch_host = "node1";
  for (int64_t s = 0; s < 10; ++s) Step(s);
  // A scancel's SIGTERM (no preempt_time in Slurm's record): nothing to do.
  handler_->OnEvent(Ckpt("termination_checkpoint", 10, 0), 100);
  handler_->OnEvent(Ckpt("ckpt_complete", 10), 0);
  EXPECT_EQ(slurm_.requeues, 0);
  EXPECT_EQ(Count("preempted"), 0);
  // Preempted with a 20 s grace: journalled once, recorded in the AdminComment; the step's
  // COMPLETE requeues the job at once.
  now_ += 3;
  slurm_.job.preempt_time = now_;
  slurm_.job.end_time = now_ + 20;
  slurm_.job.partition = "scavenger";
  handler_->OnEvent(Ckpt("termination_checkpoint", 12, 0), 100);
  handler_->OnEvent(Ckpt("termination_checkpoint", 12, 1), 101);
  EXPECT_EQ(slurm_.requeues, 0);
  // Recorded at once (Slurm's own requeue at the grace's end must not count it either).
  EXPECT_NE(slurm_.job.admin_comment.find("autopar-preempted count=1 last=0"), std::string::npos)
      << slurm_.job.admin_comment;
  handler_->OnEvent(Ckpt("ckpt_complete", 12), 0);
  EXPECT_EQ(slurm_.requeues, 1);
  EXPECT_EQ(Count("preempted"), 1);  // journalled with the requeue, by the node that made it
  const JournalEvent* p = Find("preempted");
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p->detail.find("grace_s=20 partition=scavenger preemptions=1"), std::string::npos) << p->detail;
  const JournalEvent* rq = Find("requeue");
  ASSERT_NE(rq, nullptr);
  EXPECT_NE(rq->detail.find("class=preemption"), std::string::npos) << rq->detail;
  EXPECT_NE(slurm_.job.admin_comment.find("autopar-preempted count=1 last=0"), std::string::npos)
      << slurm_.job.admin_comment;
  // The preempted run is never taken for hung.
  now_ += 200;
  handler_->Tick();
  EXPECT_EQ(Count("heartbeat_missed"), 0);
}

TEST_F(TimeLimitTest, AProgramThatEndedAtThePreemptionIsRequeuedAtOnce) {
  Task(100, 0);
  Task(200, 0);  // its launcher
  slurm_.job.batch_host = "node1";
  for (int64_t s = 0; s < 10; ++s) Step(s);
  JournalEvent t = Ckpt("terminated", -1, 0);
  t.detail = "exit=143";
  handler_->OnEvent(t, 200);  // a scancel: nothing
  EXPECT_EQ(slurm_.requeues, 0);
  slurm_.job.preempt_time = now_;
  slurm_.job.end_time = now_ + 20;
  Task(201, 0);
  handler_->OnEvent(t, 201);  // once per run and node: the scancel's was this run's
  EXPECT_EQ(slurm_.requeues, 0);
}

TEST_F(TimeLimitTest, AProgramThatEndedAtThePreemptionIsRequeuedWithoutACheckpoint) {
  Task(100, 0);
  Task(200, 0);
  slurm_.job.batch_host = "node1";
  for (int64_t s = 0; s < 10; ++s) Step(s);
  slurm_.job.preempt_time = now_;
  slurm_.job.end_time = now_ + 20;
  JournalEvent t = Ckpt("terminated", -1, 0);
  t.detail = "exit=143";
  handler_->OnEvent(t, 200);
  EXPECT_EQ(Count("preempted"), 1);
  ASSERT_EQ(slurm_.requeues, 1);
  const JournalEvent* rq = Find("requeue");
  ASSERT_NE(rq, nullptr);
  EXPECT_NE(rq->detail.find("without a checkpoint of its own"), std::string::npos) << rq->detail;
}

TEST_F(TimeLimitTest, ARunPreemptedBeforeItsFirstHeartbeatIsRequeuedAtOnce) {
  // Run 0 trained; run 1 is preempted while it restores its checkpoint: its program never sent
  // a heartbeat, only its launchers say they ended at the notice.
  Task(100, 0);
  for (int64_t s = 0; s < 10; ++s) Step(s);
  slurm_.job.batch_host = "node1";
  slurm_.job.restart_count = 1;
  slurm_.job.preempt_time = now_;
  slurm_.job.end_time = now_ + 20;
  Task(300, 1);  // run 1's launcher
  JournalEvent t = Ckpt("terminated", -1, 0);
  t.detail = "exit=143";
  handler_->OnEvent(t, 300);
  EXPECT_EQ(Count("preempted"), 1);
  ASSERT_EQ(slurm_.requeues, 1);
  const JournalEvent* rq = Find("requeue");
  ASSERT_NE(rq, nullptr);
  EXPECT_NE(rq->detail.find("without a checkpoint of its own"), std::string::npos) << rq->detail;
}

TEST_F(TimeLimitTest, ARunRequeuedBySlurmAtTheNoticeSaysSo) {
  Task(100, 0);
  Task(200, 0);
  for (int64_t s = 0; s < 10; ++s) Step(s);
  // No grace: Slurm requeued the job at the notice; the record has no preempt time any more.
  slurm_.job.restart_count = 1;
  slurm_.job.state = "PENDING";
  JournalEvent t = Ckpt("terminated", -1, 0);
  t.detail = "exit=143";
  handler_->OnEvent(t, 200);
  EXPECT_EQ(slurm_.requeues, 0);
  const JournalEvent* r = Find("requeued_by_slurm");
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r->detail.find("resumes from the last complete checkpoint"), std::string::npos);
}

TEST_F(TimeLimitTest, ARunRequeuedBySlurmAfterItsProgramCheckpointedSaysSoOnce) {
  // No grace: the SIGTERM is Slurm's requeue. The program still checkpoints its step in
  // KillWait and says so; rank 1's word comes first and asks Slurm, rank 0's a moment later.
  Task(100, 0);
  Task(101, 0);
  Task(200, 0);  // rank 0's launcher
  for (int64_t s = 0; s < 10; ++s) Step(s);
  slurm_.job.restart_count = 1;
  slurm_.job.state = "PENDING";
  handler_->OnEvent(Ckpt("termination_checkpoint", 9, 1), 101);
  EXPECT_EQ(Count("requeued_by_slurm"), 0);
  handler_->OnEvent(Ckpt("termination_checkpoint", 9, 0), 100);
  JournalEvent t = Ckpt("terminated", -1, 0);
  t.detail = "exit=143";
  handler_->OnEvent(t, 200);
  EXPECT_EQ(slurm_.requeues, 0);
  EXPECT_EQ(Count("requeued_by_slurm"), 1);
}

TEST_F(FailureHandlerTest, AFailureAfterPreemptionsHasTheWholeBudget) {
  // Run 2 after two preemptions, --requeue-on-failure=1: its crash is attempt 1 of 1.
  slurm_.job.restart_count = 2;
  slurm_.job.admin_comment = "autopar: preempted; autopar-preempted count=2 last=1";
  Task(100, 2, "1");
  handler_->OnEvent(RankExit(0, "exit=1 run_s=100"), 100);
  const JournalEvent* rq = Find("requeue");
  ASSERT_NE(rq, nullptr) << (events_.empty() ? "" : events_.back().detail);
  EXPECT_NE(rq->detail.find("attempt=1 of=1"), std::string::npos) << rq->detail;
  EXPECT_NE(slurm_.job.admin_comment.find("autopar-preempted count=2 last=1"), std::string::npos)
      << slurm_.job.admin_comment;
}

}  // namespace
}  // namespace autopar
