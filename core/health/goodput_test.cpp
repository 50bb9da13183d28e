#include "core/health/goodput.h"

#include <gtest/gtest.h>
#include <json/json.h>

namespace autopar {
namespace {

JournalEvent Ev(double t, const char* kind, int64_t step, const std::string& detail,
                int rank = 0) {
  return JournalEvent{t, "node1", "7", kind, rank, step, detail};
}

double Use(const JobGoodput& j, GoodputUse u) { return j.gpu_s[static_cast<int>(u)]; }

SlurmRun MakeRun(double start, double end, const char* state, int gpus = 0) {
  SlurmRun r;
  r.job_id = "7";
  r.user = "alice";
  r.partition = "scavenger";
  r.start = start;
  r.end = end;
  r.state = state;
  r.nodes = 2;
  r.cpus = 16;
  r.gpus = gpus;
  return r;
}

TEST(Goodput, ParsesSacctRunsOfBothSources) {
  // sacct -c (the job completion log) writes the user with its uid and no AllocTRES; slurmdbd's
  // sacct gives gres/gpu and the steps.
  auto runs = ParseSacctRuns(
      "113|root(0)|scavenger|1796652798|1796652812|PENDING|2|4|\n"
      "113|alice|scavenger|1796652827|Unknown|RUNNING|2|64|billing=64,cpu=64,gres/gpu=16,node=2\n"
      "113.batch|||1796652827|Unknown|RUNNING|1|32|\n"
      "114|bob|debug|Unknown|Unknown|PENDING|0|0|\n"
      "115|bob|debug|1796652900|1796652960|COMPLETED|1|8|cpu=8,gres/gpu:a100=4,gres/gpu:h100=4\n");
  ASSERT_TRUE(runs) << runs.message();
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ((*runs)[0].user, "root");
  EXPECT_EQ((*runs)[0].cpus, 4);
  EXPECT_EQ((*runs)[0].gpus, 0);
  EXPECT_DOUBLE_EQ((*runs)[0].end, 1796652812);
  EXPECT_EQ((*runs)[1].gpus, 16);
  EXPECT_DOUBLE_EQ((*runs)[1].end, 0);  // still running
  EXPECT_EQ((*runs)[2].gpus, 8);
  auto bad = ParseSacctRuns("113|root|debug\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("expected 9 fields"), std::string::npos) << bad.message();
}

// A job preempted once (the termination checkpoint at step 13) and resumed from it: the shape of
// tests/integration/test_preemption.py's job.
std::vector<JournalEvent> PreemptedOnce() {
  return {
      Ev(1000, "submitted", -1, "plan=none"),
      Ev(1001, "step_started", -1, "step=0 nodes=node[1-2] ranks=4 restart=0"),
      Ev(1001, "fresh_start", -1, "no complete checkpoint"),
      Ev(1012, "progress", 8, "steps=8 step_s=0.250"),
      Ev(1013, "termination_checkpoint", 12, "the task got SIGTERM: checkpointing"),
      Ev(1013.5, "ckpt_committed", 12, "save_s=0.5 7936 bytes -> file:///s"),
      Ev(1013.6, "ckpt_complete", 12, ""),
      Ev(1013.7, "preempted", 12, "preempt_time=\"1970-01-01 00:16:52.000\" grace_s=20"),
      Ev(1013.7, "requeue", -1, "class=preemption"),
      // run 2: 1030 .. 1060
      Ev(1031, "step_started", -1, "step=0 nodes=node[1-2] ranks=4 restart=1"),
      Ev(1031.1, "resumed", 12, "from_job=7"),
      Ev(1040, "progress", 20, "steps=8 step_s=0.250"),
      Ev(1050, "progress", 60, "steps=40 step_s=0.250"),
      Ev(1051, "ckpt_committed", 64, "save_s=1 7936 bytes -> file:///s"),
      Ev(1051.5, "finished", -1, "exit=0"),
  };
}

TEST(Goodput, SplitsAPreemptedJobAndAddsUpToTheAllocation) {
  JobGoodput j = SplitJob({MakeRun(1000, 1014, "PENDING"), MakeRun(1030, 1052, "COMPLETED")},
                          PreemptedOnce(), 2000);
  ASSERT_EQ(j.runs.size(), 2u);
  EXPECT_EQ(j.runs[0].gpus, 4);  // the launch's ranks: no gres/gpu in the record
  EXPECT_EQ(j.runs[0].gpus_from, "ranks");
  EXPECT_DOUBLE_EQ(j.allocated_gpu_s, (14 + 22) * 4);
  EXPECT_NEAR(Total(j.gpu_s), j.allocated_gpu_s, 1e-9);
  EXPECT_EQ(j.preemptions, 1);
  EXPECT_EQ(j.steps_kept, 64);
  EXPECT_EQ(j.steps_redone, 0);
  // Run 1: start-up 1000..1010 (8 steps of 0.25 s before 1012), steps to 1013.5 (the
  // termination checkpoint's commit), its save 1013.0..1013.5; preempted 1013.5..1014.
  // Run 2: recovery 1030..1038 (the resume at 12, 8 steps before 1040), steps to 1051 with a
  // 1 s save, then the end of the run.
  EXPECT_NEAR(Use(j, GoodputUse::kPreempted), 0.5 * 4, 1e-9);
  EXPECT_NEAR(Use(j, GoodputUse::kCkptStall), (0.5 + 1) * 4, 1e-9);
  EXPECT_NEAR(Use(j, GoodputUse::kRecovery), (1038 - 1030) * 4, 1e-9);
  EXPECT_NEAR(Use(j, GoodputUse::kStepsKept), ((1013 - 1010) + (1050 - 1038)) * 4, 1e-9);
  EXPECT_NEAR(Use(j, GoodputUse::kNoProgress), (10 + 1) * 4, 1e-9);  // start-up, the end
  EXPECT_DOUBLE_EQ(Use(j, GoodputUse::kStepsRedone), 0);
}

TEST(Goodput, StepsPastTheResumedCheckpointAreRedone) {
  std::vector<JournalEvent> evs = {
      Ev(0, "step_started", -1, "ranks=8"),
      Ev(0, "fresh_start", -1, ""),
      Ev(10, "progress", 10, "steps=10 step_s=1.0"),
      Ev(20.5, "ckpt_committed", 20, "7936 bytes"),
      Ev(30, "progress", 30, "steps=20 step_s=1.0"),
      Ev(35, "failure", -1, "class=rank-crash"),
      Ev(36, "requeue", -1, "class=rank-crash"),
      Ev(50, "step_started", -1, "ranks=8"),
      Ev(51, "resumed", 20, ""),
      Ev(70, "progress", 30, "steps=10 step_s=1.0"),
      Ev(70.5, "finished", -1, "exit=0"),
  };
  JobGoodput j = SplitJob({MakeRun(0, 37, "REQUEUED"), MakeRun(50, 71, "COMPLETED")}, evs, 100);
  EXPECT_EQ(j.steps_redone, 10);
  EXPECT_EQ(j.steps_kept, 30);
  // Step 20 was reached at 20.5 (its checkpoint); the program stepped on, reporting step 30 at
  // 30, until it crashed at 35: 14.5 s redone on 8 GPUs.
  EXPECT_NEAR(j.gpu_s[static_cast<int>(GoodputUse::kStepsRedone)], 14.5 * 8, 1e-9);
  // The failure to the requeue's end of run 1, and run 2's start-up to its first step (60).
  EXPECT_NEAR(j.gpu_s[static_cast<int>(GoodputUse::kRecovery)], (2 + 10) * 8, 1e-9);
  EXPECT_NEAR(Total(j.gpu_s), (37 + 21) * 8, 1e-9);
}

TEST(Goodput, InPlaceRecoveryAndGresGpus) {
  std::vector<JournalEvent> evs = {
      Ev(0, "fresh_start", -1, ""),
      Ev(10, "progress", 10, "steps=10 step_s=1.0"),
      Ev(12, "failure", -1, "class=rank-crash"),
      Ev(12.1, "recovery", -1, "action=restart-in-place"),
      Ev(13, "resumed", 9, ""),
      Ev(14, "first_step", 10, "generation=1 since_failure_s=2"),
      Ev(24, "progress", 20, "steps=10 step_s=1.0"),
  };
  JobGoodput j = SplitJob({MakeRun(0, 0, "RUNNING", 16)}, evs, 25);
  ASSERT_EQ(j.runs.size(), 1u);
  EXPECT_EQ(j.runs[0].gpus_from, "gres/gpu");
  EXPECT_DOUBLE_EQ(j.runs[0].end, 25);  // running: counted to now
  EXPECT_NEAR(j.gpu_s[static_cast<int>(GoodputUse::kRecovery)], 2 * 16, 1e-9);
  EXPECT_EQ(j.steps_redone, 1);
  // Step 9 at 9 s, to the crash at 12.
  EXPECT_NEAR(j.gpu_s[static_cast<int>(GoodputUse::kStepsRedone)], 3 * 16, 1e-9);
  EXPECT_NEAR(Total(j.gpu_s), 25 * 16, 1e-9);
}

TEST(Goodput, SumsByUserPartitionAndDayCuttingAtMidnight) {
  const double midnight = 1796688000;  // 2026-12-08 00:00:00 UTC
  std::vector<JournalEvent> evs = {Ev(midnight - 100, "fresh_start", -1, ""),
                                   Ev(midnight + 100, "progress", 200, "steps=200 step_s=1.0")};
  JobGoodput a = SplitJob({MakeRun(midnight - 100, midnight + 100, "COMPLETED", 2)}, evs, 0);
  SlurmRun other = MakeRun(midnight + 10, midnight + 20, "COMPLETED", 1);
  other.job_id = "8";
  other.user = "bob";
  JobGoodput b = SplitJob({other}, {}, 0);
  auto by_day = SumGoodput({a, b}, {false, false, true});
  ASSERT_EQ(by_day.size(), 2u);
  EXPECT_EQ(by_day[0].day, "2026-12-07");
  EXPECT_EQ(by_day[0].jobs, 1);
  EXPECT_NEAR(Total(by_day[0].gpu_s), 200, 1e-6);
  EXPECT_EQ(by_day[1].day, "2026-12-08");
  EXPECT_EQ(by_day[1].jobs, 2);
  EXPECT_NEAR(Total(by_day[1].gpu_s), 200 + 10, 1e-6);
  auto by_user = SumGoodput({a, b}, {true, false, false});
  ASSERT_EQ(by_user.size(), 2u);
  EXPECT_EQ(by_user[1].user, "bob");
  EXPECT_NEAR(by_user[1].gpu_s[static_cast<int>(GoodputUse::kNoProgress)], 10, 1e-9);

  JobGoodput clipped = ClipJob(a, midnight, midnight + 50);
  EXPECT_NEAR(clipped.allocated_gpu_s, 100, 1e-9);

  const std::string prom = GoodputToPrometheus(by_user);
  EXPECT_NE(prom.find("autopar_goodput_gpu_seconds{user=\"bob\",use=\"no_progress\"} 10"),
            std::string::npos)
      << prom;
  Json::Value v;
  ASSERT_TRUE(Json::Reader().parse(GoodputToJson({a, b}, by_user), v));
  EXPECT_DOUBLE_EQ(v["jobs"][0]["allocated"].asDouble(), 400);
  EXPECT_EQ(v["jobs"][0]["runs"][0]["segments"][0][2].asString(), "steps_kept");
  EXPECT_NE(GoodputJobsToText({a}).find("steps_kept"), std::string::npos);
  const std::string html = GoodputToHtml(a);  // the report's section: one bar per run
  EXPECT_NE(html.find("<rect x=\"0.0\" y=\"2\" width=\"960.0\""), std::string::npos) << html;
  EXPECT_NE(html.find("<title>steps_kept 200.0 s</title>"), std::string::npos) << html;
}

}  // namespace
}  // namespace autopar
