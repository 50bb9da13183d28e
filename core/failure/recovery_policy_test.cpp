#include "core/failure/recovery_policy.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

Failure Crash(int exit_code, double run_s, bool progress) {
  Failure f;
  f.kind = FailureClass::kRankCrash;
  f.exit_code = exit_code;
  f.run_seconds = run_s;
  f.rank = 5;
  f.node = "node3";
  f.made_progress = progress;
  return f;
}

Failure Of(FailureClass kind) {
  Failure f;
  f.kind = kind;
  f.node = "node2";
  f.run_seconds = 100;
  f.made_progress = true;
  return f;
}

TEST(RecoveryPolicy, ProgramErrorsRestartInPlaceWithinTheBudget) {
  RequeueSettings s;
  struct {
    Failure failure;
    int64_t generation, budget;
    RecoveryAction want;
  } cases[] = {
      {Crash(1, 100, true), 0, 3, RecoveryAction::kRestartInPlace},
      {Crash(1, 100, true), 2, 3, RecoveryAction::kRestartInPlace},
      {Crash(1, 100, true), 3, 3, RecoveryAction::kRequeuePath},  // budget spent
      {Crash(1, 100, true), 0, 0, RecoveryAction::kRequeuePath},  // off
      {Of(FailureClass::kHang), 0, 1, RecoveryAction::kRestartInPlace},
      {Of(FailureClass::kNodeLoss), 0, 3, RecoveryAction::kRequeuePath},
      {Of(FailureClass::kTimeLimit), 0, 3, RecoveryAction::kRequeuePath},
  };
  for (const auto& c : cases) {
    RecoveryDecision d = DecideRecovery(s, c.failure, 0, c.generation, c.budget, std::nullopt);
    EXPECT_EQ(d.action, c.want) << c.failure.Signature() << " gen " << c.generation << ": "
                                << d.reason;
    EXPECT_EQ(d.generation, c.generation);
    if (d.action == RecoveryAction::kRestartInPlace) {
      EXPECT_EQ(d.attempt, c.generation + 1);
      ASSERT_TRUE(d.history.has_value());
      EXPECT_EQ(d.history->restart_count, c.generation);
    } else {
      EXPECT_FALSE(d.history.has_value());
    }
  }
}

TEST(RecoveryPolicy, ReasonsSayWhatHappensAndWhy) {
  RequeueSettings s;
  auto d = DecideRecovery(s, Crash(1, 100, true), 0, 1, 3, std::nullopt);
  EXPECT_EQ(d.reason, "rank 5 on node3 exited with status 1 after 100.0 s; in-place restart 2 of 3");
  d = DecideRecovery(s, Crash(1, 100, true), 0, 3, 3, std::nullopt);
  EXPECT_EQ(d.reason,
            "rank 5 on node3 exited with status 1 after 100.0 s; all 3 in-place restarts of "
            "--restarts-in-place=3 are used: the requeue path takes over");
  d = DecideRecovery(s, Of(FailureClass::kNodeLoss), 0, 0, 3, std::nullopt);
  EXPECT_NE(d.reason.find("no spare node"), std::string::npos) << d.reason;
  d = DecideRecovery(s, Crash(1, 100, true), 0, 0, 0, std::nullopt);
  EXPECT_NE(d.reason.find("--restarts-in-place=0"), std::string::npos) << d.reason;
}

TEST(RecoveryPolicy, ALostNodeRestartsInPlaceOnASpare) {
  RequeueSettings s;
  Failure lost = Of(FailureClass::kNodeLoss);
  lost.node = "node2";
  lost.run_seconds = 3;  // early, but a lost node says nothing about the program
  auto d = DecideRecovery(s, lost, 0, 0, 3, std::nullopt, NodeLoss{1, 1, 0, 0, ""});
  EXPECT_EQ(d.action, RecoveryAction::kRestartInPlace) << d.reason;
  EXPECT_NE(d.reason.find("in-place restart 1 of 3 on 1 of 1 spare node(s)"), std::string::npos)
      << d.reason;
  d = DecideRecovery(s, lost, 0, 1, 3, d.history, NodeLoss{1, 1, 0, 0, ""});  // again, at start
  EXPECT_EQ(d.action, RecoveryAction::kRestartInPlace) << d.reason;
  // More lost than spares, or none left: the requeue path.
  d = DecideRecovery(s, lost, 0, 0, 3, std::nullopt, NodeLoss{2, 1, 0, 0, ""});
  EXPECT_EQ(d.action, RecoveryAction::kRequeuePath);
  EXPECT_NE(d.reason.find("1 spare node(s) left for 2 lost"), std::string::npos) << d.reason;
  d = DecideRecovery(s, lost, 0, 0, 3, std::nullopt, NodeLoss{1, 0, 0, 0, ""});
  EXPECT_NE(d.reason.find("no spare node"), std::string::npos) << d.reason;
  // The in-place budget counts node losses too.
  d = DecideRecovery(s, lost, 0, 3, 3, std::nullopt, NodeLoss{1, 1, 0, 0, ""});
  EXPECT_EQ(d.action, RecoveryAction::kRequeuePath);
}

TEST(RecoveryPolicy, AnElasticRunShrinksOntoTheNodesLeft) {
  RequeueSettings s;
  Failure lost = Of(FailureClass::kNodeLoss);
  lost.node = "node2";
  // 4 nodes in use, one lost, no spare, --min-nodes=2: in place on the 3 left.
  auto d = DecideRecovery(s, lost, 0, 0, 3, std::nullopt, NodeLoss{1, 0, 3, 2, ""});
  EXPECT_EQ(d.action, RecoveryAction::kRestartInPlace) << d.reason;
  EXPECT_TRUE(d.shrink);
  EXPECT_NE(d.reason.find("in-place restart 1 of 3 on the 3 node(s) left (--min-nodes=2)"),
            std::string::npos)
      << d.reason;
  // Spares first: a spare takes the place, nothing shrinks.
  d = DecideRecovery(s, lost, 0, 0, 3, std::nullopt, NodeLoss{1, 1, 3, 2, ""});
  EXPECT_EQ(d.action, RecoveryAction::kRestartInPlace);
  EXPECT_FALSE(d.shrink);
  // Below the floor, or no plan for what is left, or not elastic: the requeue path.
  d = DecideRecovery(s, lost, 0, 0, 3, std::nullopt, NodeLoss{2, 0, 1, 2, ""});
  EXPECT_EQ(d.action, RecoveryAction::kRequeuePath);
  EXPECT_NE(d.reason.find("1 node(s) left, --min-nodes=2"), std::string::npos) << d.reason;
  d = DecideRecovery(s, lost, 0, 0, 3, std::nullopt, NodeLoss{1, 0, 3, 2, "needs 90 GiB per GPU"});
  EXPECT_EQ(d.action, RecoveryAction::kRequeuePath);
  EXPECT_NE(d.reason.find("no plan on the 3 node(s) left (needs 90 GiB per GPU)"),
            std::string::npos)
      << d.reason;
  d = DecideRecovery(s, lost, 0, 0, 3, std::nullopt, NodeLoss{1, 0, 3, 0, ""});
  EXPECT_EQ(d.action, RecoveryAction::kRequeuePath);
  EXPECT_NE(d.reason.find("no spare node"), std::string::npos) << d.reason;
  // The budget holds for shrinking too.
  d = DecideRecovery(s, lost, 0, 3, 3, std::nullopt, NodeLoss{1, 0, 3, 2, ""});
  EXPECT_EQ(d.action, RecoveryAction::kRequeuePath);
}

TEST(RecoveryPolicy, AnEarlyFailureRepeatedGoesToTheRequeuePathWhichStopsIt) {
  RequeueSettings s;  // early_failure_s 30, early_repeats_to_stop 2
  const Failure early = Crash(1, 2, false);
  RecoveryDecision first = DecideRecovery(s, early, 0, 0, 3, std::nullopt);
  ASSERT_EQ(first.action, RecoveryAction::kRestartInPlace);
  EXPECT_EQ(first.history->early_repeats, 1);
  RecoveryDecision second = DecideRecovery(s, early, 0, 1, 3, first.history);
  ASSERT_EQ(second.action, RecoveryAction::kRequeuePath) << second.reason;
  ASSERT_TRUE(second.history.has_value());
  // Handed over as the previous run's failure, RequeuePolicy stops the job (its rule 3).
  s.max_restarts = 3;
  RequeueDecision r = DecideRequeue(s, early, 0, second.history, {});
  EXPECT_EQ(r.action, RequeueAction::kStop) << r.reason;
  // ... also in a later run of the job (restart count 2).
  RecoveryDecision later = DecideRecovery(s, early, 2, 1, 3, first.history);
  EXPECT_EQ(DecideRequeue(s, early, 2, later.history, {}).action, RequeueAction::kStop);
}

TEST(RecoveryPolicy, EarlyFailuresThatDifferOrProgressedKeepRestartingInPlace) {
  RequeueSettings s;
  RecoveryDecision first = DecideRecovery(s, Crash(1, 2, false), 0, 0, 5, std::nullopt);
  // Another exit status: not the same error.
  RecoveryDecision other = DecideRecovery(s, Crash(2, 2, false), 0, 1, 5, first.history);
  EXPECT_EQ(other.action, RecoveryAction::kRestartInPlace);
  EXPECT_EQ(other.history->early_repeats, 1);
  // The same error after training progressed: not a failure at start.
  RecoveryDecision late = DecideRecovery(s, Crash(1, 2, true), 0, 1, 5, first.history);
  EXPECT_EQ(late.action, RecoveryAction::kRestartInPlace);
  EXPECT_EQ(late.history->early_repeats, 0);
  // A history from two generations back does not count.
  RecoveryDecision gap = DecideRecovery(s, Crash(1, 2, false), 0, 2, 5, first.history);
  EXPECT_EQ(gap.action, RecoveryAction::kRestartInPlace);
}

}  // namespace
}  // namespace autopar
