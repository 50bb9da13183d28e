#include "core/health/progress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/plan/planner.h"

namespace autopar {
namespace {

std::map<std::string, std::string> AsMap(const EventFields& f) { return {f.begin(), f.end()}; }

ProgressSample At(double t, int64_t step, int64_t tokens = -1, std::optional<double> loss = {}) {
  ProgressSample s;
  s.time = t;
  s.step = step;
  s.tokens = tokens;
  s.loss = loss;
  return s;
}

TEST(ProgressTracker, OneEventPerIntervalWithStepTimeThroughputAndMfu) {
  ProgressTracker tracker(10);
  PlanTarget plan{2.0, 0.40, 64, 1024};  // 2 s per step of 64 x 1024 tokens at 40% MFU
  EXPECT_FALSE(tracker.Add(At(100, 0, 65536, 3.0), plan));  // the window starts
  for (int step = 1; step < 4; ++step) {
    EXPECT_FALSE(tracker.Add(At(100 + 2.5 * step, step, 65536, 2.0), plan)) << step;
  }
  auto f = tracker.Add(At(110, 4, 65536, 1.0), plan);  // 10 s for 4 steps
  ASSERT_TRUE(f);
  auto m = AsMap(*f);
  EXPECT_EQ(m["steps"], "4");
  EXPECT_EQ(m["step_s"], "2.500");
  EXPECT_EQ(m["tokens_per_s"], "26214.4");  // 4 x 65536 tokens in 10 s
  EXPECT_EQ(m["loss"], "1.750000");         // (2 + 2 + 2 + 1) / 4
  EXPECT_EQ(m["loss_last"], "1.000000");
  EXPECT_EQ(m["planned_step_s"], "2.000");
  EXPECT_EQ(m["mfu"], "0.3200");  // 40% x 2 / 2.5, the plan's work per step
  EXPECT_EQ(m["vs_plan"], "1.250");
  // The next window starts where this one ended.
  EXPECT_FALSE(tracker.Add(At(115, 6, 65536), plan));
  EXPECT_TRUE(tracker.Add(At(120, 8, 65536), plan));
}

TEST(ProgressTracker, AHeartbeatEveryFewStepsCountsTheWorkOfEveryStep) {
  ProgressTracker tracker(10);
  PlanTarget plan{2.0, 0.40, 64, 1024};
  EXPECT_FALSE(tracker.Add(At(100, 0, 65536), plan));
  EXPECT_FALSE(tracker.Add(At(105, 2, 65536), plan));
  auto f = tracker.Add(At(110, 4, 65536), plan);  // heartbeats at steps 0, 2, 4: 4 steps in 10 s
  ASSERT_TRUE(f);
  auto m = AsMap(*f);
  EXPECT_EQ(m["tokens_per_s"], "26214.4");  // 4 x 65536 tokens in 10 s, as with every step's
  EXPECT_EQ(m["mfu"], "0.3200");
}

TEST(ProgressTracker, ReportedWorkScalesTheMfuAndNoPlanNoMfu) {
  ProgressTracker tracker(1);
  PlanTarget plan{1.0, 0.5, 64, 1024};
  tracker.Add(At(0, 0, 32768), plan);
  auto f = tracker.Add(At(1, 1, 32768), plan);  // half the plan's tokens in the plan's time
  ASSERT_TRUE(f);
  EXPECT_EQ(AsMap(*f)["mfu"], "0.2500");
  ProgressTracker bare(1);
  bare.Add(At(0, 0), std::nullopt);
  auto g = bare.Add(At(2, 1), std::nullopt);
  ASSERT_TRUE(g);
  EXPECT_EQ(AsMap(*g).count("mfu"), 0u);
  EXPECT_EQ(AsMap(*g).count("tokens_per_s"), 0u);
  EXPECT_EQ(AsMap(*g)["step_s"], "2.000");
}

TEST(ProgressTracker, NoMfuAbove100Percent) {
  // A toy program under a 7B plan (the README's demo): its steps are far faster than the plan's.
  ProgressTracker tracker(1);
  PlanTarget plan{20.0, 0.5, 64, 4096};
  tracker.Add(At(0, 0), plan);
  auto f = tracker.Add(At(1, 4), plan);
  ASSERT_TRUE(f);
  auto m = AsMap(*f);
  EXPECT_EQ(m.count("mfu"), 0u);
  EXPECT_EQ(m["note"], "steps run faster than the planned model can: no MFU");
  EXPECT_EQ(m["vs_plan"], "0.013");
}

TEST(ProgressTracker, ARestartThatGoesBackStartsANewWindowAndNanIsKept) {
  ProgressTracker tracker(5);
  tracker.Add(At(0, 10), std::nullopt);
  tracker.Add(At(4, 14), std::nullopt);
  // Resumed from step 9 after a failure: no window spans the downtime.
  EXPECT_FALSE(tracker.Add(At(30, 9), std::nullopt));
  auto f = tracker.Add(At(36, 12, -1, std::nan("")), std::nullopt);
  ASSERT_TRUE(f);
  auto m = AsMap(*f);
  EXPECT_EQ(m["step_s"], "2.000");
  EXPECT_EQ(m["loss_last"], "nan");
  EXPECT_EQ(m.count("loss"), 0u);  // no finite loss to average
}

TEST(PlanTargetFromJson, ReadsThePlansPrediction) {
  PlanRequest r;
  r.model = *ResolveModel("llama-2-7b");
  r.gpu = *ResolveGpuType("a100-80gb");
  r.gpus = 8;
  r.global_batch = 64;
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok());
  auto t = PlanTargetFromJson(PlanToJson(*plan, false));
  ASSERT_TRUE(t);
  EXPECT_NEAR(t->step_s, plan->chosen.step_time_s, 1e-9);  // JSON keeps 17 digits at most
  EXPECT_EQ(t->global_batch, 64);
  EXPECT_EQ(t->seq_len, 4096);
  EXPECT_FALSE(PlanTargetFromJson(""));
  EXPECT_FALSE(PlanTargetFromJson("{"));
}

}  // namespace
}  // namespace autopar
