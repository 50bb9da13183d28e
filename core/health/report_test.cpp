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

TEST(JobReport, AFaultTolerantGroupsRecoveriesStepsAndHeals) {
  std::vector<JournalEvent> evs = {
      Ev(0, "ft_quorum", 0, "epoch=0 step=0 members=0@0@a:1@0,1@1@b:2@0 heals="),
      Ev(10, "progress", 100, "steps=100 step_s=0.100"),
      Ev(10.50, "rank_exit", -1, "exit=137 signal=9 run_s=10"),
      Ev(10.55, "ft_quorum", 104, "epoch=1 step=104 members=0@0@a:1@104,1@1@b:2@-1 heals=1<0"),
      Ev(10.56, "ft_discarded", 104, "step=104 reason=group-changed epoch=1"),
      Ev(10.63, "ft_healed", 104, "step=104 epoch=1 from=0 bytes=30000 seconds=0.010"),
      Ev(12, "ft_discarded", 120, "step=120 reason=loss-not-finite members=1 attempt=1"),
      Ev(20, "heartbeat_missed", 170, "idle_s=10.0 limit_s=10.0"),
      Ev(20.1, "heartbeat_missed", 170, "idle_s=10.1 limit_s=10.0"),
      Ev(23.0, "rank_exit", -1, "exit=137 signal=9 run_s=12"),
      Ev(23.1, "ft_quorum", 170, "epoch=2 step=170 members=0@0@a:1@170,1@1@b:2@-1 heals=1<0"),
      Ev(23.2, "ft_healed", 170, "step=170 epoch=2 from=0 bytes=30000 seconds=0.010"),
      Ev(30, "progress", 200, "steps=100 step_s=0.120"),
      Ev(40, "progress", 300, "steps=100 step_s=0.100"),
      Ev(40, "finished", -1, "exit=0 run_s=40"),
  };
  for (auto& e : evs) e.time += 1000;  // 0 is "no time yet"
  JobReport r = BuildReport("7", evs);
  ASSERT_EQ(r.recoveries.size(), 2u);
  EXPECT_EQ(r.recoveries[0].failure_class, "rank-crash");
  EXPECT_EQ(r.recoveries[0].action, "ft-reform");
  EXPECT_NEAR(*r.recoveries[0].lost_s, 0.13, 1e-9);  // the exit to the newcomer healed
  EXPECT_EQ(r.recoveries[1].failure_class, "hang");
  EXPECT_NEAR(*r.recoveries[1].lost_s, 3.2, 1e-9);
  EXPECT_EQ(r.lost_steps, 2);
  EXPECT_EQ(r.healthy_restarts, 0);
  EXPECT_EQ(r.ft.reforms, 2);
  EXPECT_EQ(r.ft.heals, 2);
  EXPECT_EQ(r.ft.healed_bytes, 60000);
  ASSERT_TRUE(r.ettr);
  EXPECT_NEAR(*r.ettr, 300 * 0.1 / 40, 1e-9);
  const std::string text = ReportToText(r);
  EXPECT_NE(text.find("recoveries:  2 (2 by the fault-tolerant group, 0 in place, 0 requeued), 3.3 s "
                      "lost, 2 steps run again, 0 healthy programs restarted"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fault tolerance: 2 re-forms of the group, 2 members healed from a live peer "
                      "(60,000 bytes)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("effective training time ratio 75.0%"), std::string::npos) << text;
}

TEST(JobReport, ARestartFromACheckpointCountsItsHealthyProgramsAndStepsRunAgain) {
  std::vector<JournalEvent> evs = {
      Ev(0, "ckpt_committed", 20, ""),
      Ev(5, "progress", 34, "steps=34 step_s=0.100"),
      Ev(6, "rank_exit", -1, "exit=137 signal=9 run_s=6"),
      Ev(6.1, "failure", -1, "class=rank-crash exit=137 signal=9"),
      Ev(6.2, "recovery", -1, "action=restart-in-place generation=0 attempt=1 of=3"),
      Ev(7.0, "restarted", -1, "generation=1 culprit_rank=5 programs=8 failed=1"),
      Ev(7.2, "resumed", 20, "from_job=7"),
      Ev(7.5, "first_step", 21, "generation=1 since_failure_s=1.500"),
  };
  JobReport r = BuildReport("7", evs);
  EXPECT_EQ(r.healthy_restarts, 7);
  EXPECT_EQ(r.lost_steps, 14);  // at least: 34 reported, 20 resumed
  EXPECT_EQ(r.ft.reforms, 0);
  EXPECT_NE(ReportToText(r).find("14 steps run again, 7 healthy programs restarted"),
            std::string::npos)
      << ReportToText(r);
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
