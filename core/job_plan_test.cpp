#include "core/job_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

namespace autopar {
namespace {

JobOptions Opts(const char* pin = "auto") {
  JobOptions o;
  o.auto_parallel = *ParseParallelSpec(pin);
  o.model = "llama-2-7b";
  o.gpu_type = "a100-80gb";
  o.global_batch = 64;
  o.seq_len = 2048;
  return o;
}

TEST(JobPlan, NeedsTheOptionsItUses) {
  struct Case {
    void (*change)(JobOptions&);
    const char* want;
  } cases[] = {
      {[](JobOptions& o) { o.model.reset(); }, "--auto-parallel: needs --model"},
      {[](JobOptions& o) { o.gpu_type.reset(); }, "--auto-parallel: needs --gpu-type"},
      {[](JobOptions& o) { o.global_batch.reset(); }, "--auto-parallel: needs --global-batch"},
      {[](JobOptions& o) { o.auto_parallel.reset(); }, "--auto-parallel: not requested"},
  };
  for (const auto& c : cases) {
    JobOptions o = Opts();
    c.change(o);
    auto r = StepPlanRequest(o, 8, 2);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.message().rfind(c.want, 0), 0u) << r.message();
  }
}

TEST(JobPlan, PinnedSizesReachTheRequest) {
  auto r = StepPlanRequest(Opts("tp=2,pp=2"), 8, 2);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->tp, 2);
  EXPECT_EQ(r->pp, 2);
  EXPECT_FALSE(r->dp.has_value());
  EXPECT_EQ(r->pin_label, "--auto-parallel=tp=2,pp=2");
  EXPECT_EQ(r->seq_len, 2048);
}

TEST(JobPlan, FsdpPinsReachTheRequestAndThePlan) {
  auto r = StepPlanRequest(Opts("hsdp=2,2"), 8, 2);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->fsdp, true);
  EXPECT_EQ(r->fsdp_shard, 2);
  EXPECT_EQ(r->fsdp_replicate, 2);
  EXPECT_EQ(r->pin_label, "--auto-parallel=hsdp=2,2");
  auto plan = PlanStep(Opts("hsdp=2,2"), 8, 2);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->chosen.layout.fsdp_shard, 2);
  EXPECT_EQ(plan->chosen.layout.tp, 2);  // dp = 2 x 2 leaves tp = 2
  auto env = PlanEnvForTask(PlanToJson(*plan, false), 5, 8);
  ASSERT_TRUE(env.ok()) << env.message();
  std::map<std::string, std::string> m(env->begin(), env->end());
  EXPECT_EQ(m["AUTOPAR_FSDP_SHARD"], "2");
  EXPECT_EQ(m["AUTOPAR_FSDP_REPLICATE"], "2");
  EXPECT_EQ(m["AUTOPAR_FSDP_SHARD_RANK"], "0");  // rank 5: tp rank 1, dp rank 2
  EXPECT_EQ(m["AUTOPAR_FSDP_REPLICATE_RANK"], "1");
  // FSDP with a pipeline is refused where the option is read, before any plan.
  EXPECT_FALSE(ParseParallelSpec("fsdp,pp=2").ok());
}

TEST(JobPlan, PlansAStepAndEveryTaskGetsItsCoordinates) {
  auto plan = PlanStep(Opts("tp=2,pp=2"), 8, 2);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->chosen.layout.tp * plan->chosen.layout.pp * plan->chosen.layout.dp, 8);
  const std::string json = PlanToJson(*plan, false);
  std::set<std::tuple<std::string, std::string, std::string>> coords;
  for (int rank = 0; rank < 8; ++rank) {
    auto env = PlanEnvForTask(json, rank, 8);
    ASSERT_TRUE(env.ok()) << env.message();
    std::map<std::string, std::string> m(env->begin(), env->end());
    EXPECT_EQ(m["AUTOPAR_TP"], "2");
    EXPECT_EQ(m["AUTOPAR_PP"], "2");
    EXPECT_EQ(m["AUTOPAR_DP"], "2");
    coords.emplace(m["AUTOPAR_TP_RANK"], m["AUTOPAR_PP_RANK"], m["AUTOPAR_DP_RANK"]);
  }
  EXPECT_EQ(coords.size(), 8u);  // every rank its own place in the grid
  auto wrong = PlanEnvForTask(json, 0, 16);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("the plan is for 8 ranks, the step has 16"), std::string::npos);
  EXPECT_FALSE(PlanEnvForTask("{not json", 0, 8).ok());
}

TEST(JobPlan, AModelThatCannotFitIsRefusedInOneLine) {
  JobOptions o = Opts();
  o.model = "llama-3-405b";
  auto plan = PlanStep(o, 2, 2);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.message().rfind("--auto-parallel: ", 0), 0u) << plan.message();
  EXPECT_EQ(plan.message().find('\n'), std::string::npos);
  EXPECT_NE(plan.message().find("GiB"), std::string::npos) << plan.message();
}

TEST(JobPlan, TheGradientPrecisionPinReachesTheRequestAndThePlan) {
  auto r = StepPlanRequest(Opts("grad_reduce=bf16"), 8, 2);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_TRUE(r->grad_reduce.has_value());
  EXPECT_EQ(*r->grad_reduce, GradReduce::kBf16);
  EXPECT_FALSE(r->tp.has_value());  // the precision alone pins no size
  auto plan = PlanStep(Opts("tp=2,grad_reduce=bf16"), 8, 2);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->chosen.layout.grad_reduce, GradReduce::kBf16);
  EXPECT_EQ(plan->chosen.layout.tp, 2);
  auto searched = StepPlanRequest(Opts(), 8, 2);
  ASSERT_TRUE(searched.ok());
  EXPECT_FALSE(searched->grad_reduce.has_value());
}

TEST(JobPlan, TheZeroTwoPinReachesTheRequestAndThePlan) {
  auto r = StepPlanRequest(Opts("grad_sharding=on"), 8, 2);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_TRUE(r->grad_sharding.has_value());
  EXPECT_TRUE(*r->grad_sharding);
  EXPECT_FALSE(r->tp.has_value());  // it pins no size
  EXPECT_EQ(r->pin_label, "--auto-parallel=grad_sharding=on");
  auto plan = PlanStep(Opts("tp=2,grad_sharding=on"), 8, 2);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_TRUE(plan->chosen.layout.grad_sharding());
  EXPECT_EQ(plan->chosen.layout.tp, 2);
  auto off = PlanStep(Opts("grad_sharding=off"), 8, 2);
  ASSERT_TRUE(off.ok()) << off.message();
  EXPECT_FALSE(off->chosen.layout.grad_sharding());
  // Refused where it cannot be planned, naming the pin (tp=2 on 2 GPUs leaves one replica).
  auto alone = PlanStep(Opts("tp=2,grad_sharding=on"), 2, 2);
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.message(),
            "--auto-parallel=tp=2,grad_sharding=on: ZeRO-2 shards over the data-parallel ranks "
            "(dp*cp) and this layout has one" +
                alone.message().substr(alone.message().find("; without the pins")))
      << alone.message();
  JobOptions step = Opts("grad_sharding=on");
  step.fault_tolerance_step = true;
  EXPECT_EQ(PlanStep(step, 8, 2).message().rfind("--fault-tolerance: step heals only", 0), 0u);
}

TEST(JobPlan, FaultToleranceStepIsPlannedOnTheWholeStateOrRefused) {
  // A 1B model on 8 A100: plain data parallelism fits; the ranks each hold the whole state.
  JobOptions o = Opts();
  o.model = "1B";
  o.fault_tolerance_step = true;
  auto plan = PlanStep(o, 8, 2);
  ASSERT_TRUE(plan.ok()) << plan.message();
  const Layout& l = plan->chosen.layout;
  EXPECT_EQ(std::make_tuple(l.tp, l.pp, l.cp, l.ep, l.dp), std::make_tuple(1, 1, 1, 1, 8));
  EXPECT_FALSE(l.optimizer_sharding());
  EXPECT_FALSE(l.fsdp());
  // Without the option llama-2-7b is planned with its state sharded; with it, see below.
  auto free = PlanStep(Opts(), 8, 2);
  ASSERT_TRUE(free.ok()) << free.message();
  EXPECT_TRUE(free->chosen.layout.optimizer_sharding() || free->chosen.layout.fsdp() ||
              free->chosen.layout.tp > 1);
  // A pin that shards the state is refused, naming both options.
  for (const char* pin : {"tp=2", "pp=2", "fsdp", "hsdp=2,2", "grad_sharding=on"}) {
    JobOptions p = Opts(pin);
    p.fault_tolerance_step = true;
    auto r = PlanStep(p, 8, 2);
    ASSERT_FALSE(r.ok()) << pin;
    EXPECT_EQ(r.message().rfind("--fault-tolerance: step heals only a state every rank holds "
                                "whole, and --auto-parallel=", 0), 0u) << r.message();
    EXPECT_EQ(r.message().find('\n'), std::string::npos);
  }
  JobOptions dp = Opts("dp=8");
  dp.model = "1B";
  dp.fault_tolerance_step = true;
  EXPECT_TRUE(PlanStep(dp, 8, 2).ok());
  // A model whose whole state fits no GPU is refused for that reason, in one line, with the
  // layout that would plan without it.
  JobOptions big = Opts();  // llama-2-7b: 16 bytes a parameter unsharded, 112 GB
  big.fault_tolerance_step = true;
  auto r = PlanStep(big, 8, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message().rfind("--fault-tolerance=step (every rank holds the whole state", 0), 0u)
      << r.message();
  EXPECT_NE(r.message().find("without the pins it plans: "), std::string::npos) << r.message();
  EXPECT_EQ(r.message().find('\n'), std::string::npos);
}

}  // namespace
}  // namespace autopar
