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

TEST(JobReport, UtilisationPerNodeAndIdleStretches) {
  std::vector<JournalEvent> evs = {
      Ev(1000, "usage", -1, "node=node2 ranks=2 cpu_cores=1.80 cpu_cores_min=0.80 cpu_cores_max=1.00 rss_gib=1.20 heartbeats=9"),
      Ev(1000, "usage", -1, "node=node1 ranks=2 cpu_cores=0.02 cpu_cores_min=0.01 cpu_cores_max=0.01 rss_gib=0.30 gpu_util=3.0 gpu_mem_gib=1.00 heartbeats=0"),
      Ev(1010, "usage", -1, "node=node2 ranks=2 cpu_cores=2.00 cpu_cores_min=1.00 cpu_cores_max=1.00 rss_gib=1.40 heartbeats=9"),
      Ev(1012, "idle", -1, "node=node1 idle_s=600.0 cpu_cores=0.02 reason=x"),
  };
  JobReport r = BuildReport("7", evs);
  ASSERT_EQ(r.utilisation.size(), 2u);
  EXPECT_EQ(r.utilisation[0].node, "node1");
  EXPECT_DOUBLE_EQ(*r.utilisation[0].gpu_util, 3.0);
  EXPECT_EQ(r.utilisation[1].node, "node2");
  EXPECT_EQ(r.utilisation[1].ranks, 2);
  EXPECT_DOUBLE_EQ(r.utilisation[1].cpu_cores, 1.9);  // the mean of its summaries
  EXPECT_DOUBLE_EQ(r.utilisation[1].rss_gib, 1.4);    // the largest
  EXPECT_FALSE(r.utilisation[1].gpu_util);
  ASSERT_EQ(r.idle.size(), 1u);
  EXPECT_EQ(r.idle[0].node, "node1");
  EXPECT_DOUBLE_EQ(r.idle[0].idle_s, 600);
  const std::string text = ReportToText(r);
  EXPECT_NE(text.find("  node2  2 ranks  1.90 CPU cores  1.40 GiB\n"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU 3.0%, 1.0 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("idle:        node1 at"), std::string::npos) << text;
  Json::Value v;
  ASSERT_TRUE(Json::Reader().parse(ReportToJson(r), v));
  EXPECT_EQ(v["utilisation"][1]["node"].asString(), "node2");
  EXPECT_TRUE(v["utilisation"][1]["gpu_util"].isNull());
  EXPECT_EQ(v["idle"][0]["idle_s"].asDouble(), 600);
}

TEST(JobReport, GpuUtilisationWithoutMemoryPrintsNoMemory) {
  JobReport r = BuildReport(
      "7", {Ev(1000, "usage", -1, "node=node1 ranks=2 cpu_cores=0.5 rss_gib=0.30 gpu_util=40.0 heartbeats=3")});
  ASSERT_EQ(r.utilisation.size(), 1u);
  EXPECT_FALSE(r.utilisation[0].gpu_mem_gib);
  const std::string text = ReportToText(r);
  EXPECT_NE(text.find("GPU 40.0%\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace autopar
