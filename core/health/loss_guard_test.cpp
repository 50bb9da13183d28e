#include "core/health/loss_guard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace autopar {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(LossGuardTest, NanAndInfAreBadWithoutASpikeFactorAndFromTheFirstStep) {
  LossGuard g(LossGuardSettings{});
  auto a = g.Add(0, kNaN);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, "nan");
  EXPECT_EQ(a->Describe(), "loss nan at step 0");
  EXPECT_FALSE(g.Add(1, 1.0));
  auto b = g.Add(2, -kInf);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->kind, "inf");
  EXPECT_EQ(a->last_good_step, -1);
  EXPECT_EQ(b->last_good_step, 1);
  EXPECT_EQ(FormatEventFields(b->Fields()), "kind=inf loss=-inf");
  // Without a factor, no value is a spike.
  for (int i = 3; i < 30; ++i) EXPECT_FALSE(g.Add(i, 1.0));
  EXPECT_FALSE(g.Add(30, 1e9));
}

TEST(LossGuardTest, AStreakOfBadLossesIsToldOnceUntilAGoodOneComesBetween) {
  LossGuard g(LossGuardSettings{});
  EXPECT_TRUE(g.Add(5, kNaN));
  EXPECT_FALSE(g.Add(6, kNaN));
  EXPECT_FALSE(g.Add(7, kInf));
  EXPECT_FALSE(g.Add(8, 2.0));
  auto again = g.Add(9, kNaN);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->step, 9);
}

TEST(LossGuardTest, ASpikeIsMeasuredAgainstTheRecentGoodLossesOnly) {
  LossGuardSettings s;
  s.spike_factor = 3;
  s.window = 4;
  s.min_history = 4;
  LossGuard g(s);
  // Not before min_history good losses: a falling start is never a spike.
  EXPECT_FALSE(g.Add(0, 10.0));
  EXPECT_FALSE(g.Add(1, 1.0));
  EXPECT_FALSE(g.Add(2, 1.0));
  EXPECT_FALSE(g.Add(3, 1.0));  // 4 good; window 10,1,1,1 -> mean 3.25
  EXPECT_FALSE(g.Add(4, 9.0));  // 9 < 3 * 3.25; window 1,1,1,9 -> mean 3
  EXPECT_FALSE(g.Add(5, 1.0));  // window 1,1,9,1 -> mean 3
  auto a = g.Add(6, 9.5);       // 9.5 > 3 * 3
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, "spike");
  ASSERT_TRUE(a->mean);
  EXPECT_DOUBLE_EQ(*a->mean, 3.0);
  EXPECT_EQ(a->Describe(), "loss 9.5 at step 6 is 3.2x its recent mean 3 (--loss-spike=3)");
  EXPECT_EQ(FormatEventFields(a->Fields()), "kind=spike loss=9.5 mean=3 factor=3");
  // The spike did not enter the mean: the same value stays a spike after a good loss.
  EXPECT_FALSE(g.Add(7, 1.0));  // window 1,9,1,1 -> 3
  EXPECT_TRUE(g.Add(8, 9.5));
}

TEST(LossGuardTest, ANonPositiveMeanHasNoSpikes) {
  LossGuardSettings s;
  s.spike_factor = 2;
  s.min_history = 2;
  LossGuard g(s);
  EXPECT_FALSE(g.Add(0, -1.0));
  EXPECT_FALSE(g.Add(1, -1.0));
  EXPECT_FALSE(g.Add(2, 100.0));
}

TEST(DecideBadLossTest, WarnStopAndRollbackWithinItsBudget) {
  LossAnomaly a;
  a.kind = "nan";
  a.step = 35;
  a.loss = kNaN;
  a.last_good_step = 30;  // the loss is sent every 5 steps
  BadLossPolicy warn;
  auto w = DecideBadLoss(warn, a, 0, true);
  EXPECT_EQ(w.action, BadLossAction::kWarn);
  EXPECT_EQ(w.reason, "loss nan at step 35; the run goes on (--on-bad-loss=warn)");
  BadLossPolicy stop{BadLossAction::kStop, 0};
  EXPECT_EQ(DecideBadLoss(stop, a, 0, true).reason,
            "loss nan at step 35; the job is stopped (--on-bad-loss=stop)");
  BadLossPolicy rollback{BadLossAction::kRollback, 2};
  auto r = DecideBadLoss(rollback, a, 1, true);
  EXPECT_EQ(r.action, BadLossAction::kRollback);
  EXPECT_EQ(r.resume_max_step, 30);
  EXPECT_EQ(r.attempt, 2);
  EXPECT_EQ(r.reason,
            "loss nan at step 35; rollback 2 of 2 to the last COMPLETE checkpoint at or before step 30 "
            "(the last good loss)");
  auto spent = DecideBadLoss(rollback, a, 2, true);
  EXPECT_EQ(spent.action, BadLossAction::kStop);
  EXPECT_EQ(spent.reason,
            "loss nan at step 35; all 2 rollbacks of --on-bad-loss=rollback:2 are used: the job is stopped");
  auto cannot = DecideBadLoss(rollback, a, 0, false);
  EXPECT_EQ(cannot.action, BadLossAction::kStop);
  EXPECT_NE(cannot.reason.find("needs the program under autopar-launch"), std::string::npos);
  EXPECT_STREQ(BadLossActionName(BadLossAction::kRollback), "rollback");
  // A run whose very first loss is bad resumed a bad checkpoint: nothing known-good to go back to.
  a.last_good_step = -1;
  auto none = DecideBadLoss(rollback, a, 0, true);
  EXPECT_EQ(none.action, BadLossAction::kStop);
  EXPECT_NE(none.reason.find("no loss of this run was good"), std::string::npos);
}

}  // namespace
}  // namespace autopar
