#include "core/failure/launch_events.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/plan/hardware.h"
#include "core/plan/model.h"
#include "core/plan/planner.h"
#include "core/failure/timeline.h"

namespace autopar {
namespace {

TEST(RankExitTest, Request) {
  std::map<std::string, std::string> env = {{"AUTOPAR_SOCKET", "/run/a.sock"},
                                            {"SLURM_JOB_ID", "42"}};
  GetEnv get = [&env](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  struct Case {
    int status;
    const char* detail;
  } cases[] = {
      {1, "exit=1 run_s=2.5"},
      {137, "exit=137 signal=9 run_s=2.5"},
      {255, "exit=255 run_s=2.5"},
  };
  for (const auto& c : cases) {
    auto r = RankExitRequest(get, 3, "node2", RankExit{c.status, 2.5, -1, ""});
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->op, Op::kEvent);
    EXPECT_EQ(r->kind, "rank_exit");
    EXPECT_EQ(r->job_id, "42");
    EXPECT_EQ(r->rank, 3);
    EXPECT_EQ(r->node, "node2");
    EXPECT_EQ(r->detail, c.detail);
    EXPECT_TRUE(ValidateRequest(*r).ok()) << ValidateRequest(*r).message();
  }
  env.erase("AUTOPAR_SOCKET");
  EXPECT_FALSE(RankExitRequest(get, 0, "n", RankExit{1, 0, -1, ""}).has_value());
  EXPECT_TRUE(ReportRankExit(get, 0, "n", RankExit{1, 0, -1, ""}).ok());  // nobody to tell
  env["AUTOPAR_SOCKET"] = "/nonexistent/autopard.sock";
  env["AUTOPAR_DAEMON_RETRY_S"] = "0";  // no autopard to wait for
  Status s = ReportRankExit(get, 0, "n", RankExit{1, 0, -1, ""}, 200);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/autopard.sock"), std::string::npos) << s.message();
}

TEST(LaunchEventsTest, ARankExitIsParsedBackAsItWasSentAndBadFieldsAreNamed) {
  RankExit sent{137, 12.5, 3, "killed by the kernel's OOM killer"};
  auto back = RankExit::Parse(sent.Fields());
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->exit_status, 137);
  EXPECT_EQ(back->Signal(), 9);
  EXPECT_DOUBLE_EQ(back->run_s, 12.5);
  EXPECT_EQ(back->generation, 3);
  EXPECT_EQ(back->oom, sent.oom);
  EXPECT_FALSE(back->Clean());
  auto plain = RankExit::Parse(ParseEventFields("exit=0"));
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->Clean());
  EXPECT_EQ(plain->generation, -1);
  EXPECT_EQ(plain->Signal(), 0);
  for (const auto& [detail, error] : std::vector<std::pair<std::string, std::string>>{
           {"run_s=1", "rank_exit: exit: missing"},
           {"exit=256", "rank_exit: exit: not a status in [0, 255]: '256'"},
           {"exit=1 run_s=x", "rank_exit: run_s: not seconds: 'x'"},
           {"exit=1 generation=-1", "rank_exit: generation: not a count: '-1'"},
           {"exit=137 signal=15", "rank_exit: signal: 15 is not the exit status's (137)"},
           {"exit=1 signal=9", "rank_exit: signal: 9 is not the exit status's (1)"}}) {
    auto r = RankExit::Parse(ParseEventFields(detail));
    ASSERT_FALSE(r.ok()) << detail;
    EXPECT_EQ(r.message(), error) << detail;
  }
}

TEST(LaunchEventsTest, ARecoverDetailIsParsedBackAsItWasSentAndBadFieldsAreNamed) {
  RecoverDetail sent;
  sent.kind = "node-loss";
  sent.generation = 2;
  sent.exit_status = 134;
  sent.run_s = 61.25;
  sent.node = "node3";
  sent.detected = 1700000000.5;
  sent.lost = "node2,node4";
  sent.spares = 1;
  sent.remaining = 3;
  sent.min_nodes = 2;
  sent.plan_refusal = "no plan for 6 ranks";
  sent.history = "rank-crash@1:1700000000";
  sent.unreachable = "4,5";
  auto back = RecoverDetail::Parse(sent.Fields());
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(FormatEventFields(back->Fields()), FormatEventFields(sent.Fields()));
  EXPECT_EQ(back->Signal(), 6);
  EXPECT_EQ(back->lost, "node2,node4");
  EXPECT_EQ(back->min_nodes, 2);
  for (const auto& [detail, error] : std::vector<std::pair<std::string, std::string>>{
           {"class=hang", "recover: detail: generation: missing"},
           {"class=bogus generation=0",
            "recover: detail: failure class: unknown 'bogus' (node-loss, rank-crash, hang, "
            "time-limit, bad-loss, oom)"},
           {"class=hang generation=-1",
            "recover: detail: generation: not a number in [0, 2147483647]: '-1'"},
           {"class=hang generation=0 run_s=soon", "recover: detail: run_s: not seconds: 'soon'"},
           {"class=node-loss generation=0", "recover: detail: node-loss without lost=NODES"}}) {
    auto r = RecoverDetail::Parse(ParseEventFields(detail));
    ASSERT_FALSE(r.ok()) << detail;
    EXPECT_EQ(r.message(), error) << detail;
  }
}

GetEnv Lookup(const std::map<std::string, std::string>& env) {
  return [&env](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

TEST(LaunchEventsTest, StepStoryFields) {
  std::map<std::string, std::string> env = {
      {"AUTOPAR_SOCKET", "/run/a.sock"}, {"SLURM_JOB_ID", "42"}, {"SLURM_STEP_ID", "0"},
      {"SLURM_STEP_NODELIST", "node[1-2]"}, {"SLURM_JOB_NODELIST", "node[1-3]"},
      {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_NTASKS", "6"}};
  GetEnv get = Lookup(env);
  EXPECT_TRUE(FirstStepOfJob(get));
  EXPECT_EQ(FormatEventFields(StepStartedFields(get)), "step=0 nodes=node[1-2] ranks=4 restart=0");
  auto r = JobEventRequest(get, event_kind::kStepStarted, 0, -1, "node1", StepStartedFields(get));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->kind, "step_started");
  EXPECT_EQ(r->step, -1);
  EXPECT_TRUE(ValidateRequest(*r).ok()) << ValidateRequest(*r).message();
  EXPECT_EQ(FormatEventFields(SubmittedFields(get)), "plan=none");

  env["SLURM_RESTART_COUNT"] = "1";  // a requeued run: not submitted again
  EXPECT_FALSE(FirstStepOfJob(get));
  env["SLURM_RESTART_COUNT"] = "0";
  env["SLURM_STEP_ID"] = "3";        // a later srun of the batch script
  EXPECT_FALSE(FirstStepOfJob(get));
  env.erase("SLURM_STEP_NODELIST");
  env.erase("SLURM_STEP_NUM_TASKS");
  EXPECT_EQ(FormatEventFields(StepStartedFields(get)), "step=3 nodes=node[1-3] ranks=6 restart=0");

  env["AUTOPAR_PLAN_JSON"] = "{not json";
  EXPECT_EQ(SubmittedFields(get).at(0).first, "plan_error");
}

TEST(LaunchEventsTest, SubmittedCarriesThePlan) {
  PlanRequest req;
  auto model = ResolveModel("llama-2-7b");
  auto gpu = ResolveGpuType("a100-80gb");
  ASSERT_TRUE(model.ok() && gpu.ok());
  req.model = *model;
  req.gpu = *gpu;
  req.gpus = 8;
  req.gpus_per_node = 8;
  req.global_batch = 64;
  req.seq_len = 2048;
  auto plan = PlanJob(req);
  ASSERT_TRUE(plan.ok()) << plan.message();
  std::map<std::string, std::string> env = {{"AUTOPAR_PLAN_JSON", PlanToJson(*plan, false)}};
  EventFields f = SubmittedFields(Lookup(env));
  std::map<std::string, std::string> m(f.begin(), f.end());
  EXPECT_EQ(m["model"], "llama-2-7b");
  EXPECT_EQ(m["gpus"], "8");
  const Layout& l = plan->chosen.layout;
  EXPECT_EQ(m["tp"], std::to_string(l.tp));
  EXPECT_EQ(m["pp"], std::to_string(l.pp));
  EXPECT_EQ(m["dp"], std::to_string(l.dp));
  EXPECT_EQ(m["recompute"], RecomputeName(l.recompute));
  EXPECT_EQ(m["optimizer_sharding"], l.optimizer_sharding() ? "1" : "0");
  EXPECT_EQ(m["grad_sharding"], l.grad_sharding() ? "1" : "0");
  EXPECT_EQ(m["grad_reduce"], GradReduceName(l.grad_reduce));
  EXPECT_FALSE(m["mem_gib"].empty());
}

}  // namespace
}  // namespace autopar
