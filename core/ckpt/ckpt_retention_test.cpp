#include "core/ckpt/ckpt_retention.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

TEST(RetentionTest, Table) {
  using V = std::vector<int64_t>;
  struct Case {
    const char* name;
    std::vector<StepStatus> steps;
    int keep;
    V keep_expected;
    V remove_expected;
    std::optional<int64_t> latest;
  } cases[] = {
      {"nothing", {}, 2, {}, {}, std::nullopt},
      {"keep last two", {{10, true}, {20, true}, {30, true}}, 2, {30, 20}, {10}, 30},
      {"keep covers all", {{10, true}, {20, true}}, 5, {20, 10}, {}, 20},
      {"k=0 still keeps newest complete", {{10, true}, {20, true}}, 0, {20}, {10}, 20},
      {"negative k", {{10, true}}, -3, {10}, {}, 10},
      {"in-progress newer step kept", {{10, true}, {20, true}, {30, false}}, 1, {30, 20}, {10}, 20},
      {"stale incomplete older step removed once K complete steps are newer",
       {{5, false}, {10, true}, {15, false}, {20, true}},
       2,
       {20, 15, 10},
       {5},
       20},
      {"an older step still completing is kept while fewer than K complete are newer",
       {{3, true}, {7, false}, {11, true}},
       2,
       {11, 7, 3},
       {},
       11},
      {"... and removed once K are",
       {{3, false}, {7, true}, {11, true}},
       2,
       {11, 7},
       {3},
       11},
      {"no complete step: nothing removed",
       {{10, false}, {20, false}},
       1,
       {20, 10},
       {},
       std::nullopt},
      {"duplicates merge", {{10, false}, {10, true}, {20, false}}, 1, {20, 10}, {}, 10},
      {"unordered input",
       {{30, true}, {10, true}, {20, true}, {40, true}},
       3,
       {40, 30, 20},
       {10},
       40},
  };
  for (const auto& c : cases) {
    RetentionPlan p = PlanRetention(c.steps, c.keep);
    EXPECT_EQ(p.keep, c.keep_expected) << c.name;
    EXPECT_EQ(p.remove, c.remove_expected) << c.name;
    EXPECT_EQ(p.latest_complete, c.latest) << c.name;
  }
}

}  // namespace
}  // namespace autopar
