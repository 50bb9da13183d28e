#include "core/failure/preemption.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

TEST(PreemptionTest, OnlyAPreemptTimeIsAPreemption) {
  EXPECT_FALSE(PreemptionOf(0, 1000).preempted);  // a SIGTERM of a scancel or a time limit
  Preemption p = PreemptionOf(1000, 1020);
  EXPECT_TRUE(p.preempted);
  EXPECT_EQ(p.preempt_time, 1000);
  EXPECT_EQ(p.grace_s, 20);
  EXPECT_EQ(PreemptionOf(1000, 900).grace_s, 0);  // no grace: ended at the notice
}

TEST(PreemptionTest, NoteRoundTripsInsideAnAdminComment) {
  std::string c = "autopar: rank 1 crashed; autopar-failure restart=0 early=0 sig=rank-crash exit=1";
  EXPECT_FALSE(ParsePreemptionNote(c));
  std::string with = WithPreemptionNote(c, {1, 0});
  EXPECT_EQ(with, c + "; autopar-preempted count=1 last=0");
  auto n = ParsePreemptionNote(with);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->count, 1);
  EXPECT_EQ(n->last_restart, 0);
  // Replaced in place, the rest kept.
  std::string again = WithPreemptionNote("x; autopar-preempted count=1 last=0; y", {2, 3});
  EXPECT_EQ(again, "x; autopar-preempted count=2 last=3; y");
  EXPECT_EQ(WithPreemptionNote("", {1, 0}), "autopar-preempted count=1 last=0");
  EXPECT_FALSE(ParsePreemptionNote("autopar-preempted count=x last=0"));
  EXPECT_FALSE(ParsePreemptionNote("autopar-preempted count=1"));
}

TEST(PreemptionTest, ARunIsCountedOnce) {
  PreemptionNote n = RecordPreemption(std::nullopt, 0);
  EXPECT_EQ(n.count, 1);
  n = RecordPreemption(n, 0);  // another node, the requeue
  EXPECT_EQ(n.count, 1);
  n = RecordPreemption(n, 2);
  EXPECT_EQ(n.count, 2);
  EXPECT_EQ(n.last_restart, 2);
}

TEST(PreemptionTest, PreemptionsDoNotSpendTheFailureBudget) {
  EXPECT_EQ(FailureRestarts(3, std::nullopt), 3);
  // Runs 0 and 1 preempted: run 2 has used no failure restart.
  EXPECT_EQ(FailureRestarts(2, PreemptionNote{2, 1}), 0);
  // Run 2 itself preempted (not restarted yet): still the two earlier ones only.
  EXPECT_EQ(FailureRestarts(2, PreemptionNote{3, 2}), 0);
  // Run 0 preempted, run 1 failed: run 2 has used one.
  EXPECT_EQ(FailureRestarts(2, PreemptionNote{1, 0}), 1);
}

}  // namespace
}  // namespace autopar
