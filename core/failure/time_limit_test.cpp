#include "core/failure/time_limit.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

TEST(TimeLimitTest, MarginTable) {
  TimeLimitSettings s;  // default_ckpt 60, safety 1.5, requeue 15, min 20, max_fraction 0.5, window 5
  struct Case {
    const char* name;
    TimeLimitInputs in;
    bool limited;
    double estimate, margin;
  } cases[] = {
      {"no end time", {0, 0, 1, {}}, false, 0, 0},
      {"nothing observed: default estimate", {0, 10000, 0, {}}, true, 60, 1.5 * 60 + 15},
      {"observed max of recent", {0, 10000, 2, {4, 10, 6}}, true, 10, 2 + 15 + 15},
      {"only the last 5 count", {0, 10000, 0, {100, 1, 2, 3, 4, 5}}, true, 5, 22.5},
      {"minimum margin", {0, 10000, 0, {1}}, true, 1, 20},
      {"at most half of the run", {0, 100, 5, {200}}, true, 200, 50},
  };
  for (const auto& c : cases) {
    TimeLimitPlan p = PlanTimeLimit(s, c.in);
    EXPECT_EQ(p.limited, c.limited) << c.name;
    if (!c.limited) {
      EXPECT_FALSE(CheckpointDue(p, 1e12)) << c.name;
      continue;
    }
    EXPECT_DOUBLE_EQ(p.ckpt_estimate_s, c.estimate) << c.name;
    EXPECT_DOUBLE_EQ(p.margin_s, c.margin) << c.name;
    EXPECT_DOUBLE_EQ(p.request_at, c.in.end_time - c.margin) << c.name;
  }
}

TEST(TimeLimitTest, DueWithInjectedClock) {
  TimeLimitSettings s;
  TimeLimitInputs in{1000, 1600, 1, {20}};  // margin 1 + 30 + 15 = 46 -> request at 1554
  TimeLimitPlan p = PlanTimeLimit(s, in);
  EXPECT_DOUBLE_EQ(p.request_at, 1554);
  EXPECT_FALSE(CheckpointDue(p, 1553.9));
  EXPECT_TRUE(CheckpointDue(p, 1554));
  EXPECT_TRUE(CheckpointDue(p, 1700));
  EXPECT_EQ(p.Describe(),
            "checkpoint estimate 20.0 s, margin 46.0 s: checkpoint requested at "
            "1970-01-01 00:25:54.000");
  // A slower checkpoint observed later moves the request earlier.
  in.ckpt_durations_s.push_back(40);
  EXPECT_DOUBLE_EQ(PlanTimeLimit(s, in).request_at, 1600 - (1 + 60 + 15));
}

}  // namespace
}  // namespace autopar
