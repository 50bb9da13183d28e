#include "core/failure/hang_detector.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

HangSettings Settings(double timeout, double factor = 3) {
  HangSettings s;
  s.timeout_s = timeout;
  s.first_step_factor = factor;
  return s;
}

// A program past its training loop exits (a last save, the interpreter's teardown); on a loaded
// node that took 14 s with --heartbeat-timeout=10 and was stopped as a hang at its exit (the
// fresh-clone CI of 18c8238). The notice gives the exit the first-step allowance from then on; an
// exit that never ends is still a hang.
TEST(HangDetectorTest, AFinishingRankHasTheAllowanceToExit) {
  HangDetector d(Settings(10), 1000, {0, 1});
  d.Heartbeat(0, 1, 1000);
  d.Heartbeat(1, 1, 1000);
  d.Heartbeat(0, 80, 1050);
  d.Heartbeat(1, 80, 1050);
  EXPECT_TRUE(d.Check(1061).hung);
  d.Finishing(1052);  // 30 s from the notice
  HangVerdict v = d.Check(1061);
  EXPECT_FALSE(v.hung);
  EXPECT_TRUE(v.finishing);
  EXPECT_DOUBLE_EQ(v.limit_s, 32);
  EXPECT_DOUBLE_EQ(d.SecondsUntilDue(1061), 21);
  EXPECT_FALSE(d.Check(1081.5).hung);
  v = d.Check(1082.5);
  EXPECT_TRUE(v.hung);
  EXPECT_EQ(v.Describe(), "no progress for 32.5 s (limit 32 s, a rank finishing); last step 80; "
                          "suspects: ranks 0,1");
  // A later notice (another rank) extends it; an earlier one never shortens it.
  d.Finishing(1060);
  d.Finishing(1040);
  EXPECT_FALSE(d.Check(1089).hung);
  EXPECT_TRUE(d.Check(1090.5).hung);
}

TEST(HangDetectorTest, FirstStepAllowanceThenTimeout) {
  HangDetector d(Settings(60), 1000, {0, 1});
  // Before any progress: 3 x 60 s from the start.
  EXPECT_FALSE(d.Check(1000 + 179).hung);
  EXPECT_TRUE(d.Check(1000 + 181).first_step);
  EXPECT_DOUBLE_EQ(d.Check(1000 + 181).limit_s, 180);
  EXPECT_TRUE(d.Check(1000 + 181).hung);
  EXPECT_DOUBLE_EQ(d.SecondsUntilDue(1000), 180);

  // Heartbeats that repeat a rank's first step are not progress.
  d.Heartbeat(0, 0, 1100);
  d.Heartbeat(1, 0, 1100);
  d.Heartbeat(0, 0, 1150);
  EXPECT_TRUE(d.Check(1181).hung);

  // Progress switches to the plain timeout, counted from the last progress.
  d.Heartbeat(0, 1, 1170);
  HangVerdict v = d.Check(1200);
  EXPECT_FALSE(v.hung);
  EXPECT_FALSE(v.first_step);
  EXPECT_DOUBLE_EQ(v.limit_s, 60);
  EXPECT_DOUBLE_EQ(v.idle_s, 30);
  EXPECT_DOUBLE_EQ(d.SecondsUntilDue(1200), 30);
  EXPECT_FALSE(d.Check(1230).hung);
  EXPECT_TRUE(d.Check(1230.5).hung);
}

TEST(HangDetectorTest, AnyRankProgressingIsNotAHang) {
  HangDetector d(Settings(10), 0, {});
  d.Heartbeat(0, 5, 1);
  d.Heartbeat(1, 5, 1);
  for (int t = 2; t < 100; ++t) d.Heartbeat(0, 5 + t, t);  // rank 1 silent, rank 0 advancing
  EXPECT_FALSE(d.Check(100).hung);
  HangVerdict v = d.Check(111);
  EXPECT_TRUE(v.hung);
  EXPECT_EQ(v.last_step, 5 + 99);
  EXPECT_EQ(v.suspects, std::vector<int>({1}));  // the rank the others wait for
}

TEST(HangDetectorTest, SuspectsAndDescription) {
  struct Case {
    const char* name;
    std::vector<std::tuple<int, int64_t, double>> beats;  // rank, step, time
    std::vector<int> exited;
    std::vector<int> suspects;
    const char* describe_part;
  } cases[] = {
      {"stopped rank lags", {{0, 1, 1}, {1, 1, 1}, {2, 1, 1}, {0, 2, 2}, {2, 2, 2}}, {}, {1},
       "suspects: rank 1"},
      {"all at the same step", {{0, 1, 1}, {1, 1, 1}, {0, 2, 2}, {1, 2, 2}}, {}, {0, 1},
       "suspects: ranks 0,1"},
      {"exited ranks are not suspects", {{0, 1, 1}, {1, 1, 1}, {0, 2, 2}}, {1}, {0},
       "last step 2"},
      {"never reported", {}, {}, {}, "no step reported"},
  };
  for (const auto& c : cases) {
    HangDetector d(Settings(10), 0, {});
    for (const auto& [rank, step, t] : c.beats) d.Heartbeat(rank, step, t);
    for (int r : c.exited) d.RankExited(r);
    HangVerdict v = d.Check(1000);
    EXPECT_TRUE(v.hung) << c.name;
    EXPECT_EQ(v.suspects, c.suspects) << c.name;
    EXPECT_NE(v.Describe().find(c.describe_part), std::string::npos) << c.name << ": "
                                                                      << v.Describe();
  }
}

TEST(HangDetectorTest, AllRanksExitedIsNeverAHang) {
  HangDetector d(Settings(10), 0, {0, 1});
  d.Heartbeat(0, 3, 1);
  d.RankExited(0);
  EXPECT_TRUE(d.Check(100).hung);  // rank 1 never reported and has not exited
  d.RankExited(1);
  EXPECT_FALSE(d.Check(100).hung);
}

TEST(HangDetectorTest, RestartedRankLowerStepIsNotProgress) {
  HangDetector d(Settings(10, 1), 0, {});
  d.Heartbeat(0, 50, 1);
  d.Heartbeat(0, 51, 2);  // progress at t=2
  d.Heartbeat(0, 10, 5);  // went back (a restarted rank): no progress
  EXPECT_TRUE(d.Check(12.5).hung);
  d.Heartbeat(0, 11, 13);  // advancing again from the new step
  EXPECT_FALSE(d.Check(14).hung);
}

TEST(HangDetectorTest, DescribeFormat) {
  HangDetector d(Settings(60), 0, {});
  d.Heartbeat(0, 40, 1);
  d.Heartbeat(0, 41, 2);
  EXPECT_EQ(d.Check(63).Describe(),
            "no progress for 61.0 s (limit 60 s); last step 41; suspects: rank 0");
}

}  // namespace
}  // namespace autopar
