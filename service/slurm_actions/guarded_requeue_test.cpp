#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "service/slurm_actions/slurm_actions.h"
#include "fake_slurm_for_test.h"

namespace autopar {
namespace {

RequeueDecision Decision(int64_t restart_count, std::vector<std::string> exclude = {},
                         double delay = 0) {
  RequeueSettings s;
  s.max_restarts = 3;
  Failure f;
  f.kind = exclude.empty() ? FailureClass::kRankCrash : FailureClass::kNodeLoss;
  f.exit_code = 1;
  f.node = exclude.empty() ? "node1" : exclude.back();
  f.run_seconds = 100;
  RequeueDecision d = DecideRequeue(s, f, restart_count, std::nullopt, {});
  d.delay_s = delay;
  if (!exclude.empty()) d.exclude_nodes = exclude;
  return d;
}

TEST(GuardedRequeueTest, RequeuesOnceAndRecordsTheDecision) {
  FakeSlurm slurm;
  slurm.job.excluded_nodes = "node[7-8]";
  auto r = GuardedRequeue(slurm, "42", Decision(0, {"node2"}, 30), 1000);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->outcome, RequeueOutcome::kRequeued);
  EXPECT_EQ(r->restart_count_now, 1);
  EXPECT_TRUE(r->warnings.empty());
  EXPECT_EQ(slurm.requeues, 1);
  EXPECT_EQ(slurm.job.excluded_nodes, "node7,node8,node2");
  EXPECT_DOUBLE_EQ(slurm.job.eligible_time, 1030);
  EXPECT_NE(slurm.job.admin_comment.find("autopar: node node2 was lost"), std::string::npos);
  auto note = ParseFailureNote(slurm.job.admin_comment);
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(note->signature, "node-loss");
  EXPECT_NE(r->message.find("excluded node7,node8,node2"), std::string::npos) << r->message;

  // Every later report of the same failure (restart count 0) is a no-op.
  auto again = GuardedRequeue(slurm, "42", Decision(0, {"node2"}), 1001);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, RequeueOutcome::kAlreadyDone);
  EXPECT_EQ(slurm.requeues, 1);
}

TEST(GuardedRequeueTest, AnElasticJobMayStartOnItsFloorAndKeepsItsPreemptions) {
  FakeSlurm slurm;
  slurm.job.tasks = 8;  // Slurm kept the ended run's 4 nodes x 2 tasks
  slurm.job.admin_comment = "autopar-preempted count=1 last=0";
  RequeueDecision d = Decision(0);
  d.min_tasks = 4;  // --min-nodes=2 x 2 tasks per node
  d.preemption = true;
  ASSERT_TRUE(GuardedRequeue(slurm, "42", d, 1000).ok());
  EXPECT_EQ(slurm.job.tasks, 4);
  EXPECT_NE(slurm.job.admin_comment.find("autopar-preempted count=1 last=0"), std::string::npos)
      << slurm.job.admin_comment;  // the same run's preemption, counted once
}

TEST(GuardedRequeueTest, ShortDelayKeepsSlurmsOwnWait) {
  FakeSlurm slurm;
  auto r = GuardedRequeue(slurm, "42", Decision(0, {}, 5), 1000);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(slurm.job.eligible_time, 1011);  // 1005 would start it before cred_expire
  ASSERT_EQ(slurm.updates.size(), 1u);
  EXPECT_FALSE(slurm.updates[0].begin_time.has_value());
  EXPECT_FALSE(slurm.updates[0].excluded_nodes.has_value());
}

TEST(GuardedRequeueTest, RefusalsAndGuards) {
  struct Case {
    const char* name;
    std::function<void(FakeSlurm&)> setup;
    const char* job;
    int64_t restart_count;
    bool ok;
    RequeueOutcome outcome;
    const char* text;  // in the error or the message
  } cases[] = {
      {"slurm refuses", [](FakeSlurm& s) { s.refuse_requeue = "Access/permission denied"; }, "42",
       0, false, RequeueOutcome::kRequeued,
       "requeue of job 42 refused by Slurm: Access/permission denied"},
      {"unknown job", [](FakeSlurm&) {}, "43", 0, false, RequeueOutcome::kRequeued,
       "requeue of job 43: job 43: Invalid job id"},
      {"not a batch job", [](FakeSlurm& s) { s.job.batch = false; }, "42", 0, false,
       RequeueOutcome::kRequeued, "not a batch job"},
      {"--no-requeue", [](FakeSlurm& s) { s.job.requeue_allowed = false; }, "42", 0, false,
       RequeueOutcome::kRequeued, "may not be requeued"},
      {"restart count moved", [](FakeSlurm& s) { s.job.restart_count = 1; }, "42", 0, true,
       RequeueOutcome::kAlreadyDone, "restart count 1, decision for restart count 0"},
      {"job already pending", [](FakeSlurm& s) { s.job.state = "PENDING"; }, "42", 0, true,
       RequeueOutcome::kAlreadyDone, "state PENDING"},
      {"run ended FAILED: still requeued", [](FakeSlurm& s) { s.job.state = "FAILED"; }, "42", 0,
       true, RequeueOutcome::kRequeued, "requeued (attempt 1 of 3"},
      {"completed job is never requeued", [](FakeSlurm& s) { s.job.state = "COMPLETED"; }, "42",
       0, true, RequeueOutcome::kAlreadyDone, "state COMPLETED"},
      {"cancelled job is never requeued", [](FakeSlurm& s) { s.job.state = "CANCELLED"; }, "42",
       0, true, RequeueOutcome::kAlreadyDone, "state CANCELLED"},
      {"requeue under way", [](FakeSlurm& s) { s.job.requeue_flag = true; }, "42", 0, true,
       RequeueOutcome::kAlreadyDone, "was requeued already"},
      {"failed step, job completing: requeued",
       [](FakeSlurm& s) {
         s.job.state = "FAILED";
         s.job.completing = true;
       },
       "42", 0, true, RequeueOutcome::kRequeued, "requeued (attempt 1 of 3"},
  };
  for (const auto& c : cases) {
    FakeSlurm slurm;
    c.setup(slurm);
    auto r = GuardedRequeue(slurm, c.job, Decision(c.restart_count), 1000);
    ASSERT_EQ(r.ok(), c.ok) << c.name << ": " << (r.ok() ? r->message : r.message());
    std::string text = r.ok() ? r->message : r.message();
    EXPECT_NE(text.find(c.text), std::string::npos) << c.name << ": " << text;
    if (r.ok()) {
      EXPECT_EQ(r->outcome, c.outcome) << c.name;
    }
  }
}

TEST(GuardedRequeueTest, LostRaceIsRecognised) {
  // Another node requeues the job after our check and before our slurm_requeue: Slurm refuses
  // ours ("Job is pending execution"); that is success for the caller, not an error.
  class RacingSlurm : public FakeSlurm {
   public:
    Status Requeue(const std::string& id) override {
      if (!raced) {
        raced = true;
        EXPECT_TRUE(FakeSlurm::Requeue(id).ok());  // the other node
      }
      return FakeSlurm::Requeue(id);
    }
    bool raced = false;
  } slurm;
  auto r = GuardedRequeue(slurm, "42", Decision(0), 1000);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->outcome, RequeueOutcome::kAlreadyDone);
  EXPECT_NE(r->message.find("requeued by another caller (Job is pending execution)"),
            std::string::npos)
      << r->message;
  EXPECT_EQ(slurm.requeues, 1);
  EXPECT_EQ(r->restart_count_now, 1);
}

TEST(GuardedRequeueTest, ConcurrentCallersWithALockRequeueOnce) {
  FakeSlurm slurm;
  char dir[] = "/tmp/autopar-guard-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string lock = std::string(dir) + "/job-42.lock";
  std::atomic<int> requeued{0}, already{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      auto r = GuardedRequeue(slurm, "42", Decision(0), 1000, lock);
      ASSERT_TRUE(r.ok()) << r.message();
      (r->outcome == RequeueOutcome::kRequeued ? requeued : already).fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(requeued.load(), 1);
  EXPECT_EQ(already.load(), 7);
  EXPECT_EQ(slurm.requeues, 1);
  unlink(lock.c_str());
  rmdir(dir);
}

TEST(GuardedRequeueTest, FollowUpRefusalIsAWarning) {
  FakeSlurm slurm;
  slurm.refuse_update = "Access/permission denied";
  auto r = GuardedRequeue(slurm, "42", Decision(0, {"node2"}, 60), 1000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, RequeueOutcome::kRequeued);
  EXPECT_EQ(slurm.requeues, 1);
  ASSERT_EQ(r->warnings.size(), 4u);  // the combined update, then each of the three fields
  EXPECT_NE(r->warnings[0].find("update after requeue: Access/permission denied"),
            std::string::npos);
}

TEST(GuardedRequeueTest, OnlyRequeueDecisionsAreCarriedOut) {
  FakeSlurm slurm;
  RequeueDecision stop;
  stop.action = RequeueAction::kStop;
  auto r = GuardedRequeue(slurm, "42", stop, 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("the decision is 'stop'"), std::string::npos);
  EXPECT_EQ(slurm.loads, 0);
}

TEST(SlurmActionsTest, AddExcludedNodes) {
  FakeSlurm slurm;
  Status running = AddExcludedNodes(slurm, "42", {"node3"});
  ASSERT_FALSE(running.ok());
  EXPECT_NE(running.message().find("the job is RUNNING; Slurm changes the excluded nodes of "
                                   "pending jobs only"),
            std::string::npos);
  slurm.job.state = "PENDING";
  slurm.job.excluded_nodes = "node1";
  ASSERT_TRUE(AddExcludedNodes(slurm, "42", {"node3", "node1"}).ok());
  EXPECT_EQ(slurm.job.excluded_nodes, "node1,node3");
  slurm.job.excluded_nodes = "node[";
  Status bad = AddExcludedNodes(slurm, "42", {"node3"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("exclude nodes of job 42: "), std::string::npos);
}

TEST(SlurmActionsTest, CancelWithReason) {
  FakeSlurm slurm;
  ASSERT_TRUE(CancelWithReason(slurm, "42", "stopped after 2 immediate failures").ok());
  EXPECT_EQ(slurm.job.state, "CANCELLED");
  EXPECT_EQ(slurm.job.admin_comment, "autopar: stopped after 2 immediate failures");

  FakeSlurm refusing;
  refusing.refuse_cancel = "Access/permission denied";
  Status s = CancelWithReason(refusing, "42", "x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "cancel of job 42: Access/permission denied");

  FakeSlurm no_comment;
  no_comment.refuse_update = "Access/permission denied";
  Status c = CancelWithReason(no_comment, "42", "x");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(no_comment.job.state, "CANCELLED");
  EXPECT_NE(c.message().find("cancelled, but its reason was not recorded"), std::string::npos);
}

TEST(SlurmActionsTest, StopOnce) {
  FakeSlurm slurm;
  auto first = StopOnce(slurm, "42", 0, "stopped: x");
  ASSERT_TRUE(first.ok()) << first.message();
  EXPECT_TRUE(*first);
  EXPECT_EQ(slurm.job.state, "CANCELLED");
  EXPECT_EQ(slurm.job.admin_comment, "autopar: stopped: x; autopar-stopped restart=0");
  auto second = StopOnce(slurm, "42", 0, "stopped: other rank");  // another node, same run
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);

  FakeSlurm ended;
  ended.job.state = "FAILED";
  auto r = StopOnce(ended, "42", 0, "stopped: y");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*r);
  EXPECT_EQ(ended.job.state, "FAILED");
  EXPECT_EQ(ended.job.admin_comment, "autopar: stopped: y; autopar-stopped restart=0");
  // A node that decided "requeue" for the same run (it did not know the previous failure)
  // must not requeue the stopped job.
  auto late = GuardedRequeue(ended, "42", Decision(0), 1000);
  ASSERT_TRUE(late.ok()) << late.message();
  EXPECT_EQ(late->outcome, RequeueOutcome::kAlreadyDone);
  EXPECT_EQ(ended.requeues, 0);

  FakeSlurm moved;
  moved.job.restart_count = 2;
  auto m = StopOnce(moved, "42", 1, "stopped: z");
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(*m);
  EXPECT_EQ(moved.job.state, "RUNNING");
}

}  // namespace
}  // namespace autopar
