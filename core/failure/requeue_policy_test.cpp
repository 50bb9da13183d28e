#include "core/failure/requeue_policy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace autopar {
namespace {

Failure Crash(int exit_code, double run_s, int rank = 0, const char* node = "node1") {
  Failure f;
  f.kind = FailureClass::kRankCrash;
  f.exit_code = exit_code;
  f.run_seconds = run_s;
  f.rank = rank;
  f.node = node;
  return f;
}

Failure Killed(int sig, double run_s) {
  Failure f = Crash(-1, run_s);
  f.signal = sig;
  return f;
}

Failure Progressed(Failure f) {
  f.made_progress = true;
  return f;
}

Failure NodeLoss(const char* node, double run_s = 100) {
  Failure f;
  f.kind = FailureClass::kNodeLoss;
  f.node = node;
  f.run_seconds = run_s;
  return f;
}

Failure Hang(double run_s) {
  Failure f;
  f.kind = FailureClass::kHang;
  f.node = "node2";
  f.rank = 3;
  f.run_seconds = run_s;
  return f;
}

Failure TimeLimit(bool progress) {
  Failure f;
  f.kind = FailureClass::kTimeLimit;
  f.ckpt_progress = progress;
  f.run_seconds = 600;
  return f;
}

TEST(FailureClassTest, NamesRoundTrip) {
  for (auto c : {FailureClass::kNodeLoss, FailureClass::kRankCrash, FailureClass::kHang,
                 FailureClass::kTimeLimit, FailureClass::kBadLoss, FailureClass::kOom}) {
    auto parsed = ParseFailureClass(FailureClassName(c));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, c);
  }
  auto bad = ParseFailureClass("segfault");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("'segfault'"), std::string::npos);
  Failure oom;
  oom.kind = FailureClass::kOom;
  oom.rank = 1;
  oom.node = "node2";
  oom.note = "MemoryError";
  EXPECT_EQ(oom.Describe(), "rank 1 on node2 ran out of memory (MemoryError)");
  EXPECT_EQ(oom.Signature(), "oom");
}

TEST(FailureTest, SignatureAndDescription) {
  struct Case {
    Failure f;
    const char* signature;
    const char* description;
  } cases[] = {
      {Crash(1, 2.04, 0, "node1"), "rank-crash exit=1", "rank 0 on node1 exited with status 1 after 2.0 s"},
      {Killed(9, 50), "rank-crash signal=9", "rank 0 on node1 was killed by SIGKILL after 50.0 s"},
      {NodeLoss("node3"), "node-loss", "node node3 was lost after 100.0 s"},
      {Hang(70), "hang", "rank 3 on node2 made no progress (hang) after 70.0 s"},
      {TimeLimit(true), "time-limit", "the job reached its time limit after 600.0 s"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(c.f.Signature(), c.signature);
    EXPECT_EQ(c.f.Describe(), c.description);
  }
}

TEST(RequeuePolicyTest, DecisionTable) {
  RequeueSettings s;
  s.max_restarts = 3;
  s.backoff_initial_s = 5;
  s.backoff_multiplier = 2;
  s.backoff_max_s = 12;
  const PastFailure early_exit1{0, "rank-crash exit=1", 1};
  struct Case {
    const char* name;
    Failure failure;
    int64_t restart_count;
    std::optional<PastFailure> previous;
    std::vector<std::string> excluded;
    RequeueAction action;
    double delay_s;
    std::vector<std::string> exclude_after;
    const char* reason_part;
  } cases[] = {
      {"first crash requeues", Crash(1, 100), 0, std::nullopt, {}, RequeueAction::kRequeue, 5, {},
       "requeue 1 of 3 after 5.0 s"},
      {"backoff doubles", Crash(1, 100), 1, std::nullopt, {}, RequeueAction::kRequeue, 10, {},
       "requeue 2 of 3"},
      {"backoff capped", Crash(1, 100), 2, std::nullopt, {}, RequeueAction::kRequeue, 12, {},
       "requeue 3 of 3"},
      {"budget used", Crash(1, 100), 3, std::nullopt, {}, RequeueAction::kStop, 0, {},
       "all 3 restarts of --requeue-on-failure=3 are used"},
      {"node loss excludes the node", NodeLoss("node2"), 0, std::nullopt, {"node4"},
       RequeueAction::kRequeue, 15, {"node4", "node2"}, "excluding node4,node2"},
      {"node loss of an excluded node: no duplicate", NodeLoss("node4"), 1, std::nullopt,
       {"node4"}, RequeueAction::kRequeue, 15, {"node4"}, "excluding node4"},
      {"crash keeps the excluded list", Crash(1, 100), 1, std::nullopt, {"node3"},
       RequeueAction::kRequeue, 10, {"node3"}, "excluding node3"},
      {"immediate exit once: requeued", Crash(1, 2), 0, std::nullopt, {}, RequeueAction::kRequeue,
       5, {}, "requeue 1 of 3"},
      {"immediate exit twice, same error: stop", Crash(1, 2), 1, early_exit1, {},
       RequeueAction::kStop, 0, {}, "same error (rank-crash exit=1) 2 times in a row"},
      {"immediate exit twice, other code: requeued", Crash(2, 2), 1, early_exit1, {},
       RequeueAction::kRequeue, 10, {}, "requeue 2 of 3"},
      {"immediate, but previous was not the run before", Crash(1, 2), 2, early_exit1, {},
       RequeueAction::kRequeue, 12, {}, "requeue 3 of 3"},
      {"same error but late: requeued", Crash(1, 300), 1, early_exit1, {},
       RequeueAction::kRequeue, 10, {}, "requeue 2 of 3"},
      {"same error soon, but after training progress: requeued", Progressed(Crash(1, 2)), 1,
       early_exit1, {}, RequeueAction::kRequeue, 10, {}, "requeue 2 of 3"},
      {"node loss is never a program error", NodeLoss("node1", 2), 1,
       PastFailure{0, "node-loss", 0}, {}, RequeueAction::kRequeue, 15, {"node1"},
       "requeue 2 of 3"},
      {"immediate hang twice: stop", Hang(5), 1, PastFailure{0, "hang", 1}, {},
       RequeueAction::kStop, 0, {}, "2 times in a row"},
      {"time limit with progress: no delay", TimeLimit(true), 1, std::nullopt, {},
       RequeueAction::kRequeue, 0, {}, "requeue 2 of 3"},
      {"time limit without progress: stop", TimeLimit(false), 0, std::nullopt, {},
       RequeueAction::kStop, 0, {}, "no checkpoint became COMPLETE"},
      {"unknown run time is not immediate", Crash(1, -1), 1, early_exit1, {},
       RequeueAction::kRequeue, 10, {}, "requeue 2 of 3"},
  };
  for (const auto& c : cases) {
    RequeueDecision d = DecideRequeue(s, c.failure, c.restart_count, c.previous, c.excluded);
    EXPECT_EQ(RequeueActionName(d.action), std::string(RequeueActionName(c.action))) << c.name;
    EXPECT_EQ(d.restart_count, c.restart_count) << c.name;
    EXPECT_EQ(d.max_restarts, 3) << c.name;
    EXPECT_NE(d.reason.find(c.reason_part), std::string::npos) << c.name << ": " << d.reason;
    EXPECT_NE(d.reason.find(c.failure.Describe()), std::string::npos) << c.name;
    if (c.action == RequeueAction::kRequeue) {
      EXPECT_EQ(d.attempt, c.restart_count + 1) << c.name;
      EXPECT_DOUBLE_EQ(d.delay_s, c.delay_s) << c.name;
      EXPECT_EQ(d.exclude_nodes, c.exclude_after) << c.name;
      EXPECT_EQ(d.note.restart_count, c.restart_count) << c.name;
      EXPECT_EQ(d.note.signature, c.failure.Signature()) << c.name;
    }
  }
}

TEST(RequeuePolicyTest, ZeroRestartsNeverRequeues) {
  RequeueSettings s;
  s.max_restarts = 0;
  RequeueDecision d = DecideRequeue(s, Crash(1, 100), 0, std::nullopt, {});
  EXPECT_EQ(d.action, RequeueAction::kStop);
  EXPECT_NE(d.reason.find("--requeue-on-failure is 0"), std::string::npos) << d.reason;
}

TEST(RequeuePolicyTest, PreemptionsAreNotCounted) {
  RequeueSettings s;
  s.max_restarts = 1;
  // Restart 2 of the job, after two preemptions: the first failure, attempt 1 of 1.
  RequeueDecision d = DecideRequeue(s, Crash(1, 100), 2, std::nullopt, {}, 2);
  EXPECT_EQ(d.action, RequeueAction::kRequeue) << d.reason;
  EXPECT_EQ(d.attempt, 1);
  EXPECT_EQ(d.restart_count, 2);  // the guard stays Slurm's count
  // After one preemption only: the budget is used.
  EXPECT_EQ(DecideRequeue(s, Crash(1, 100), 2, std::nullopt, {}, 1).action, RequeueAction::kStop);
}

TEST(RequeuePolicyTest, ExitAtStartStopsAfterTheConfiguredRepeats) {
  // A script that exits 1 at start, run after run, with the note passed along as the daemon does
  // (through the job's AdminComment): stopped at the Kth immediate failure.
  for (int repeats_to_stop : {1, 2, 3}) {
    RequeueSettings s;
    s.max_restarts = 10;
    s.early_repeats_to_stop = repeats_to_stop;
    std::optional<PastFailure> previous;
    int64_t restart = 0;
    RequeueDecision d;
    for (;; ++restart) {
      d = DecideRequeue(s, Crash(1, 1.5), restart, previous, {});
      if (d.action != RequeueAction::kRequeue) break;
      previous = ParseFailureNote("x; " + EncodeFailureNote(d.note));
      ASSERT_TRUE(previous.has_value());
    }
    EXPECT_EQ(d.action, RequeueAction::kStop);
    EXPECT_EQ(restart, repeats_to_stop - 1) << "repeats_to_stop " << repeats_to_stop;
    EXPECT_NE(d.reason.find("not requeued"), std::string::npos);
  }
}

TEST(RequeuePolicyTest, BackoffSeconds) {
  RequeueSettings s;
  s.backoff_initial_s = 2;
  s.backoff_multiplier = 3;
  s.backoff_max_s = 50;
  EXPECT_DOUBLE_EQ(RequeueBackoffSeconds(s, 0), 0);
  EXPECT_DOUBLE_EQ(RequeueBackoffSeconds(s, 1), 2);
  EXPECT_DOUBLE_EQ(RequeueBackoffSeconds(s, 2), 6);
  EXPECT_DOUBLE_EQ(RequeueBackoffSeconds(s, 3), 18);
  EXPECT_DOUBLE_EQ(RequeueBackoffSeconds(s, 4), 50);
  EXPECT_DOUBLE_EQ(RequeueBackoffSeconds(s, 5000), 50);
}

TEST(RequeuePolicyTest, ValidateSettings) {
  struct Case {
    void (*mutate)(RequeueSettings&);
    const char* error;  // nullptr: valid
  } cases[] = {
      {[](RequeueSettings&) {}, nullptr},
      {[](RequeueSettings& s) { s.max_restarts = -1; }, "max_restarts"},
      {[](RequeueSettings& s) { s.backoff_initial_s = -1; }, "backoff_initial_s"},
      {[](RequeueSettings& s) { s.backoff_multiplier = 0.5; }, "backoff_multiplier"},
      {[](RequeueSettings& s) { s.backoff_max_s = -2; }, "backoff_max_s"},
      {[](RequeueSettings& s) { s.early_failure_s = -2; }, "early_failure_s"},
      {[](RequeueSettings& s) { s.node_loss_delay_s = -1; }, "node_loss_delay_s"},
      {[](RequeueSettings& s) { s.early_repeats_to_stop = 0; }, "early_repeats_to_stop"},
  };
  for (const auto& c : cases) {
    RequeueSettings s;
    c.mutate(s);
    Status st = ValidateRequeueSettings(s);
    if (!c.error) {
      EXPECT_TRUE(st.ok()) << st.message();
    } else {
      ASSERT_FALSE(st.ok()) << c.error;
      EXPECT_NE(st.message().find(c.error), std::string::npos) << st.message();
    }
  }
}

TEST(RequeuePolicyTest, NodeLossDelayOutlastsAnOrphanedSrun) {
  // Trackers that hold the job until its srun has gone keep the configured delay.
  EXPECT_EQ(NodeLossDelayForCluster(15, "proctrack/cgroup", 30), 15);
  EXPECT_EQ(NodeLossDelayForCluster(15, "proctrack/pgid", 30), 15);
  // linuxproc loses the srun: the delay outlasts KillWait + STEP_ABORT_TIME (2 s) + 3 s.
  EXPECT_EQ(NodeLossDelayForCluster(15, "proctrack/linuxproc", 30), 35);  // Slurm's default KillWait
  EXPECT_EQ(NodeLossDelayForCluster(15, "proctrack/linuxproc", 5), 15);   // the tuned test cluster
  EXPECT_EQ(NodeLossDelayForCluster(40, "proctrack/linuxproc", 30), 40);  // never shorter than set
  EXPECT_EQ(NodeLossDelayForCluster(15, "", 30), 35);                     // unknown: the worst case
}

TEST(FailureNoteTest, RoundTripAndGarbage) {
  PastFailure n{4, "rank-crash signal=9", 2};
  std::string text = EncodeFailureNote(n);
  EXPECT_EQ(text, "autopar-failure restart=4 early=2 sig=rank-crash signal=9");
  auto back = ParseFailureNote("autopar: requeue 5 of 5; " + text + "\nmore");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->restart_count, 4);
  EXPECT_EQ(back->early_repeats, 2);
  EXPECT_EQ(back->signature, "rank-crash signal=9");
  // The last note wins (an AdminComment rewritten over several requeues).
  auto last = ParseFailureNote(EncodeFailureNote({0, "hang", 0}) + "; " + text);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->restart_count, 4);
  for (const char* bad : {"", "nothing here", "autopar-failure restart=x early=0 sig=hang",
                          "autopar-failure restart=1 sig=hang", "autopar-failure restart=1 early=0 sig=",
                          "autopar-failure restart=1 early=-1 sig=hang"}) {
    EXPECT_FALSE(ParseFailureNote(bad).has_value()) << bad;
  }
}

TEST(DecisionLedgerTest, OneDecisionPerRestartCount) {
  DecisionLedger ledger;
  EXPECT_TRUE(ledger.Claim("42", 0));
  EXPECT_FALSE(ledger.Claim("42", 0));  // a second report of the same failure
  EXPECT_TRUE(ledger.Claim("7", 0));    // another job
  EXPECT_TRUE(ledger.Claim("42", 1));   // the next run's failure
  EXPECT_FALSE(ledger.Claim("42", 0));  // a late report of the first run: stale
  RequeueDecision d;
  d.restart_count = 1;
  d.action = RequeueAction::kRequeue;
  ledger.Record("42", d);
  ASSERT_TRUE(ledger.Recorded("42", 1).has_value());
  EXPECT_EQ(ledger.Recorded("42", 1)->action, RequeueAction::kRequeue);
  EXPECT_FALSE(ledger.Recorded("42", 0).has_value());
  ledger.Forget("42");
  EXPECT_FALSE(ledger.Recorded("42", 1).has_value());
  EXPECT_TRUE(ledger.Claim("42", 0));
}

TEST(DecisionLedgerTest, ConcurrentClaimsGiveExactlyOneWinner) {
  // Eight reporters of each failure race for its restart count: one wins each count.
  DecisionLedger ledger;
  std::atomic<int> winners[50] = {};
  for (int64_t rc = 0; rc < 50; ++rc) {
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, rc] {
        while (!go.load()) std::this_thread::yield();
        if (ledger.Claim("job", rc)) winners[rc].fetch_add(1);
      });
    }
    go = true;
    for (auto& t : threads) t.join();
  }
  for (int64_t rc = 0; rc < 50; ++rc) EXPECT_EQ(winners[rc].load(), 1) << rc;
}

}  // namespace
}  // namespace autopar
