#include "core/health/straggler.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

StragglerSettings Settings() {
  StragglerSettings s;
  s.margin = 0.25;
  s.windows = 2;
  s.window_s = 10;
  return s;
}

TEST(StragglerDetectorTest, ARankSlowerThanTheMedianForWindowsInARowIsFlaggedOnce) {
  StragglerDetector d(Settings());
  d.SetNodes({"node1", "node1", "node2", "node2"});
  std::vector<StragglerFlag> flags;
  for (int t = 0; t <= 40; ++t) {
    // Rank 2 is 1.5x slower from t = 10 on; the others jitter around 0.100 s.
    const double slow = t >= 10 ? 0.150 : 0.101;
    auto f = d.Add(1000 + t, {0.100, 0.102, slow, 0.099});
    flags.insert(flags.end(), f.begin(), f.end());
    if (t < 30) {
      EXPECT_TRUE(flags.empty()) << t;  // windows closing at 1010, 1020: one slow, then two
    }
  }
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_EQ(flags[0].rank, 2);
  EXPECT_EQ(flags[0].node, "node2");
  EXPECT_DOUBLE_EQ(flags[0].compute_s, 0.150);
  EXPECT_EQ(FormatEventFields(flags[0].Fields()),
            "node=node2 compute_s=0.1500 median_s=0.1010 ratio=1.49 windows=2");
}

TEST(StragglerDetectorTest, JitterWithinTheMarginAnInterruptedStreakOrNoWorkIsNot) {
  StragglerDetector d(Settings());
  for (int t = 0; t <= 60; ++t) {
    // Rank 1: 20% slower (within 25%); rank 3: slow in every other window only.
    const bool odd_window = (t / 10) % 2 == 1;
    EXPECT_TRUE(d.Add(1000 + t, {0.100, 0.120, 0.100, odd_window ? 0.2 : 0.1}).empty()) << t;
  }
  // Differences of a few milliseconds are timer and scheduler noise, whatever their ratio: a
  // loaded node's small model (7 ms a step) with one rank 4 ms slower in every window.
  StragglerDetector idle(Settings());
  for (int t = 0; t <= 40; ++t) EXPECT_TRUE(idle.Add(1000 + t, {0.0001, 0.0009, 0.0001}).empty());
  StragglerDetector loaded(Settings());
  for (int t = 0; t <= 40; ++t) {
    EXPECT_TRUE(loaded.Add(1000 + t, {0.007, 0.011, 0.007, 0.0069}).empty()) << t;
  }
}

TEST(StragglerDetectorTest, ASlowRankBesideSubMillisecondOnesIsFlagged) {
  // A small model: the others compute in well under a millisecond (the integration test's toy
  // model on this machine: 0.5-0.8 ms), rank 3 in 100 ms.
  StragglerDetector d(Settings());
  std::vector<StragglerFlag> flags;
  for (int t = 0; t <= 30; ++t) {
    auto f = d.Add(1000 + t, {0.0008, 0.0006, 0.0005, 0.1007});
    flags.insert(flags.end(), f.begin(), f.end());
  }
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_EQ(flags[0].rank, 3);
  EXPECT_EQ(FormatEventFields(flags[0].Fields()),
            "node=? compute_s=0.1007 median_s=0.0007 ratio=143.86 windows=2");
}

TEST(StragglerDetectorTest, AnotherWorldSizeStartsOver) {
  // Rank 1 is slow for one window of a world of 4, then stays slow after a restart on 3 ranks:
  // its streak starts over with the new world, so the first window of the new one does not
  // complete it (2 windows) and only the second flags it.
  StragglerDetector d(Settings());
  for (int t = 0; t <= 10; ++t) EXPECT_TRUE(d.Add(1000 + t, {0.1, 0.3, 0.1, 0.1}).empty()) << t;
  std::vector<StragglerFlag> flags;
  for (int t = 11; t <= 31; ++t) {
    auto f = d.Add(1000 + t, {0.1, 0.3, 0.1});
    if (t < 31) {
      EXPECT_TRUE(f.empty()) << t;  // windows closing at 1021 (1 slow), 1031 (2)
    }
    flags.insert(flags.end(), f.begin(), f.end());
  }
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_EQ(flags[0].rank, 1);
  EXPECT_EQ(flags[0].windows, 2);
}

}  // namespace
}  // namespace autopar
