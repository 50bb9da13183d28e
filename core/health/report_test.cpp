#include "core/health/report.h"

#include <gtest/gtest.h>
#include <json/json.h>

namespace autopar {
namespace {

JournalEvent Ev(double t, const char* kind, int64_t step, const std::string& detail) {
  return JournalEvent{t, "node1", "7", kind, 0, step, detail};
}

TEST(JobReport, PlannedAgainstMeasuredAndRecoveries) {
  std::vector<JournalEvent> evs = {
      Ev(1000, "submitted", -1,
         "model=llama-2-7b gpus=8 tp=1 cp=1 pp=2 dp=4 micro_batch=1 grad_accum=16 "
         "recompute=selective optimizer_sharding=1 mem_gib=60.1 step_s=2.000 mfu=0.4000"),
      Ev(1010, "progress", 10, "steps=10 step_s=2.500 tokens_per_s=26214.4 mfu=0.3200 loss=1.5"),
      Ev(1020, "failure", -1, "class=rank-crash exit=137 signal=9"),
      Ev(1020.1, "recovery", -1, "action=restart-in-place generation=0 attempt=1 of=3"),
      Ev(1020.2, "resumed", 9, "from_job=7"),  // the restarted program's restore: not the end
      Ev(1021.4, "first_step", 12, "generation=1 since_failure_s=1.300"),
      Ev(1040, "progress", 20, "steps=8 step_s=2.300 tokens_per_s=28000 mfu=0.3478 loss=1.2"),
      Ev(1050, "progress", 30, "steps=10 step_s=2.100 tokens_per_s=30000 mfu=0.3810 loss=1.1"),
      Ev(1060, "finished", -1, "exit=0 run_s=60.0"),
  };
  JobReport r = BuildReport("7", evs);
  EXPECT_EQ(r.model, "llama-2-7b");
  EXPECT_EQ(r.layout, "tp=1 cp=1 pp=2 dp=4 micro_batch=1 grad_accum=16 recompute=selective");
  ASSERT_TRUE(r.planned_step_s && r.planned_mfu);
  EXPECT_DOUBLE_EQ(*r.planned_step_s, 2.0);
  EXPECT_DOUBLE_EQ(*r.planned_mfu, 0.4);
  ASSERT_EQ(r.progress.size(), 3u);
  EXPECT_DOUBLE_EQ(*r.step_s, 2.3);  // medians
  EXPECT_DOUBLE_EQ(*r.mfu, 0.3478);
  EXPECT_DOUBLE_EQ(*r.tokens_per_s, 28000);
  ASSERT_EQ(r.recoveries.size(), 1u);
  EXPECT_EQ(r.recoveries[0].failure_class, "rank-crash");
  EXPECT_EQ(r.recoveries[0].action, "restart-in-place");
  EXPECT_DOUBLE_EQ(*r.recoveries[0].lost_s, 1.3);
  EXPECT_DOUBLE_EQ(r.lost_s, 1.3);
  EXPECT_EQ(r.end, "finished exit=0");
  const std::string text = ReportToText(r);
  EXPECT_NE(text.find("planned:     2.000 s/step, MFU 40.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("measured:    2.300 s/step (median of 3 windows), MFU 34.8%, 28,000 tokens/s; "
                      "1.15x the plan's step time"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("recoveries:  1 (1 in place, 0 requeued), 1.3 s lost"), std::string::npos) << text;
  EXPECT_NE(text.find("end:         finished exit=0 after 60.0 s"), std::string::npos) << text;
  Json::Value v;
  std::string errs;
  std::unique_ptr<Json::CharReader> reader(Json::CharReaderBuilder().newCharReader());
  const std::string json = ReportToJson(r);
  ASSERT_TRUE(reader->parse(json.data(), json.data() + json.size(), &v, &errs)) << errs;
  EXPECT_DOUBLE_EQ(v["measured"]["step_s"].asDouble(), 2.3);
  EXPECT_EQ(v["progress"].size(), 3u);
  EXPECT_EQ(v["recoveries"][0]["action"].asString(), "restart-in-place");
}

TEST(JobReport, ARequeueCostsUntilTheNextRunResumes) {
  std::vector<JournalEvent> evs = {
      Ev(0, "failure", -1, "class=hang"),
      Ev(1, "requeue", -1, "attempt=1 of=3"),
      Ev(21, "resumed", 30, "from_job=7"),
  };
  JobReport r = BuildReport("7", evs);
  ASSERT_EQ(r.recoveries.size(), 1u);
  EXPECT_EQ(r.recoveries[0].action, "requeue");
  EXPECT_DOUBLE_EQ(*r.recoveries[0].lost_s, 21);
  EXPECT_NE(ReportToText(r).find("no plan"), std::string::npos);
  EXPECT_NE(ReportToText(r).find("no progress reported"), std::string::npos);
}

}  // namespace
}  // namespace autopar
