// The memory choices beside the layout: the gradient precision (fp32 or bf16 reduction), ZeRO-2,
// and the refusal that names the setting which would fit (docs/planner.md, "Memory per GPU").
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>

#include "core/plan/plan_request_for_test.h"
#include "core/plan/planner.h"

namespace autopar {
namespace {

std::string FormatGib(double gib) {
  char buf[32];
  (void)std::snprintf(buf, sizeof(buf), "%.1f", gib);
  return buf;
}

TEST(ModelStateBytesPerParam, Bf16GradientsKeepTwoBytes) {
  // Megatron-LM's distributed optimizer guide: bf16 parameters with bf16 gradients
  // (--grad-reduce-in-bf16) keep 16 bytes per parameter, 4 + 12/d with the distributed optimizer.
  EXPECT_DOUBLE_EQ(ModelStateBytesPerParam(DataParallelSharding::kNone, 64, GradReduce::kBf16),
                   16.0);
  EXPECT_DOUBLE_EQ(
      ModelStateBytesPerParam(DataParallelSharding::kOptimizer, 64, GradReduce::kBf16),
      4.0 + 12.0 / 64);
  EXPECT_DOUBLE_EQ(FsdpStateBytesPerParam(64, GradReduce::kBf16), 16.0 / 64);
}

TEST(EvaluateLayout, Bf16GradientsHalveTheirMemoryAndReduction) {
  PlanRequest r = PlanRequestFor("llama-2-7b", 64, "a100-80gb", 512);
  Layout l;
  l.dp = 64;
  l.grad_accum = 8;
  const PlanCandidate fp32 = EvaluateLayout(r, l);
  l.grad_reduce = GradReduce::kBf16;
  const PlanCandidate bf16 = EvaluateLayout(r, l);
  EXPECT_NEAR(bf16.memory.grads_gib, fp32.memory.grads_gib / 2, 1e-9);
  EXPECT_NEAR(fp32.memory.total_gib - bf16.memory.total_gib, bf16.memory.grads_gib, 1e-9);
  // The all-reduce moves half the bytes (its latency term, 2(n-1) hops, is the same).
  EXPECT_NEAR(bf16.time.dp_comm_s, fp32.time.dp_comm_s / 2, 0.01 * fp32.time.dp_comm_s);
  EXPECT_LT(bf16.step_time_s, fp32.step_time_s);
}

TEST(PlanJob, ReducesInBf16OnlyWhereNothingFitsWithFp32) {
  // bf16 reduction changes the numerics: a job that fits with fp32 gradients keeps them although
  // bf16 would be faster.
  PlanRequest r = PlanRequestFor("llama-2-7b", 64, "a100-80gb", 512);
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->chosen.layout.grad_reduce, GradReduce::kFp32);
  EXPECT_FALSE(plan->grad_reduce_fallback);
  for (const PlanCandidate& a : plan->alternatives) {
    EXPECT_EQ(a.layout.grad_reduce, GradReduce::kFp32);
  }
  // Pinned, bf16 is what it plans.
  r.grad_reduce = GradReduce::kBf16;
  auto pinned = PlanJob(r);
  ASSERT_TRUE(pinned.ok()) << pinned.message();
  EXPECT_EQ(pinned->chosen.layout.grad_reduce, GradReduce::kBf16);
  EXPECT_FALSE(pinned->grad_reduce_fallback);
  EXPECT_NE(PlanToText(*pinned).find("gradients:   accumulated and reduced in bf16"),
            std::string::npos);
}

// NVIDIA's published Llama 3.1 layouts on DGX-H100 in BF16 (Megatron-Bridge,
// scripts/performance/configs/llama/llama3_workload_base_configs.py, LLAMA3_8B_PRETRAIN_CONFIG_
// H100_BF16_V1: 8 GPUs, global batch 128, CP2; llama31_workload_base_configs.py, LLAMA31_405B_
// PRETRAIN_CONFIG_H100_BF16_V2: 1024 GPUs, TP8 PP8 CP2 VP8, global batch 512; micro-batch 1,
// 8192 tokens, no activation recompute in either BF16 preset): with fp32 gradients neither fits
// the 8% headroom, by 1.8 and 3.8 GiB; with bf16 reduction both do.
struct PublishedLayout {
  const char* model;
  int64_t gpus, batch, tp, cp, pp, dp, vpp;
  double fp32_gib, bf16_gib;  // per GPU, as the planner counts them
};
const PublishedLayout kNvidiaLlama31[] = {
    {"llama-3-8b", 8, 128, 1, 2, 1, 4, 1, 75.0, 60.1},
    {"llama-3-405b", 1024, 512, 8, 2, 8, 8, 8, 77.0, 64.6},
};

// Pinned as published: NVIDIA's presets run Megatron's distributed optimizer (ZeRO-1), not ZeRO-2.
PlanRequest Published(const PublishedLayout& p) {
  PlanRequest r = PlanRequestFor(p.model, p.gpus, "h100-80gb", p.batch, 8192);
  r.grad_sharding = false;
  r.tp = p.tp;
  r.cp = p.cp;
  r.pp = p.pp;
  r.dp = p.dp;
  r.vpp = p.vpp;
  r.micro_batch = 1;
  r.recompute = Recompute::kNone;
  return r;
}

TEST(PlanJob, NvidiaLlama31LayoutsFitWithBf16Reduction) {
  for (const PublishedLayout& p : kNvidiaLlama31) {
    PlanRequest r = Published(p);
    r.grad_reduce = GradReduce::kFp32;
    auto fp32 = PlanJob(r);
    ASSERT_FALSE(fp32.ok()) << p.model;
    EXPECT_NE(fp32.message().find("needs " + FormatGib(p.fp32_gib) +
                                  " GiB per GPU, 73.2 GiB usable"),
              std::string::npos)
        << fp32.message();
    // The refusal names the settings that fit it, planned before they are named: ZeRO-2 first
    // where it can be planned (pp = 1; it keeps the numerics), then bf16 reduction.
    const std::string zero2 =
        "; it plans with ZeRO-2 (--auto-parallel=...,grad_sharding=on, autopar plan "
        "--grad-sharding on) or with bf16 gradient reduction";
    EXPECT_EQ(fp32.message().find(zero2) != std::string::npos, p.pp == 1) << fp32.message();
    EXPECT_NE(fp32.message().find("bf16 gradient reduction (--auto-parallel=...,"
                                  "grad_reduce=bf16, autopar plan --grad-reduce bf16)"),
              std::string::npos)
        << fp32.message();
    EXPECT_EQ(fp32.message().find('\n'), std::string::npos);
    // Unpinned, the search falls back to bf16 reduction, and says why.
    r.grad_reduce.reset();
    auto plan = PlanJob(r);
    ASSERT_TRUE(plan.ok()) << p.model << ": " << plan.message();
    EXPECT_EQ(plan->chosen.layout.grad_reduce, GradReduce::kBf16) << p.model;
    EXPECT_TRUE(plan->grad_reduce_fallback);
    EXPECT_NEAR(plan->chosen.memory.total_gib, p.bf16_gib, 0.05) << p.model;
    EXPECT_NE(PlanToText(*plan).find("no layout fits with fp32"), std::string::npos);
    EXPECT_NE(MegatronArgs(*plan).find(" --grad-reduce-in-bf16"), std::string::npos);
  }
}

// Context parallelism is searched where every rank keeps at least kContextParallelMinTokens:
// NVIDIA's Llama 3.1 8B layout (cp=2 at 8K, 4K tokens per rank) is what a free search of its GPUs
// and batch chooses where FSDP is not planned (NVIDIA's stack is Megatron's: ZeRO-1, no FSDP);
// with FSDP, FSDP over the 8 GPUs without context parallelism (fused attention stores no scores:
// 8K tokens a GPU fit) is chosen, and cp=2 is among the layouts weighed. At 4K, where cp=2 would
// leave 2K tokens per rank, no layout uses it.
TEST(PlanJob, ContextParallelSearchedFromFourThousandTokensPerRank) {
  const PublishedLayout& p = kNvidiaLlama31[0];
  PlanRequest r = PlanRequestFor(p.model, p.gpus, "h100-80gb", p.batch, 8192);
  r.top_k = 30;
  auto with_fsdp = PlanJob(r);
  ASSERT_TRUE(with_fsdp.ok()) << with_fsdp.message();
  EXPECT_GT(with_fsdp->chosen.layout.fsdp_shard, 1) << PlanToText(*with_fsdp);
  EXPECT_EQ(with_fsdp->chosen.layout.cp, 1) << PlanToText(*with_fsdp);
  EXPECT_TRUE(std::any_of(with_fsdp->alternatives.begin(), with_fsdp->alternatives.end(),
                          [](const PlanCandidate& c) { return c.layout.cp == 2; }))
      << PlanToText(*with_fsdp);
  r.fsdp = false;
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  const Layout& l = plan->chosen.layout;
  EXPECT_EQ(std::make_tuple(l.tp, l.cp, l.pp, l.dp), std::make_tuple(p.tp, p.cp, p.pp, p.dp))
      << PlanToText(*plan);
  // Chosen over plain data parallelism only as the simplest within the model's error of the
  // fastest (tp=2 dp=4, which fits now that fused attention stores no scores, is as simple).
  const double fastest =
      plan->set_aside ? plan->set_aside->step_time_s : plan->chosen.step_time_s;
  for (const PlanCandidate& alt : plan->alternatives) {
    if (alt.fits && alt.layout.cp == 1 && alt.layout.pp == 1 && alt.layout.tp == 1) {
      EXPECT_GT(alt.step_time_s, fastest * (1.0 + kTimeModelError)) << alt.reason;
    }
  }
  r.seq_len = 4096;
  auto short_seq = PlanJob(r);
  ASSERT_TRUE(short_seq.ok()) << short_seq.message();
  EXPECT_EQ(short_seq->chosen.layout.cp, 1);
  for (const PlanCandidate& alt : short_seq->alternatives) EXPECT_EQ(alt.layout.cp, 1);
  if (short_seq->set_aside) {
    EXPECT_EQ(short_seq->set_aside->layout.cp, 1);
  }
}

TEST(PlanJob, RefusalNamesASmallerHeadroomThatFits) {
  // The 8B layout misses by 1.8 GiB with fp32 gradients: a headroom of 5% (75.6 GiB usable)
  // holds it, 6% (74.8) does not; the 405B one misses by 3.8 GiB, more than 4% would give back.
  PlanRequest r = Published(kNvidiaLlama31[0]);
  r.grad_reduce = GradReduce::kFp32;
  const std::string msg = PlanJob(r).message();
  EXPECT_NE(msg.find(" or with a headroom of 5% (plugstack.conf plan_headroom=0.05, autopar plan "
                     "--headroom 0.05)"),
            std::string::npos)
      << msg;
  r.headroom_fraction = 0.05;
  EXPECT_TRUE(PlanJob(r).ok());
  r.headroom_fraction = 0.06;
  EXPECT_FALSE(PlanJob(r).ok());
  PlanRequest big = Published(kNvidiaLlama31[1]);
  big.grad_reduce = GradReduce::kFp32;
  const std::string big_msg = PlanJob(big).message();
  EXPECT_EQ(big_msg.find("headroom of"), std::string::npos) << big_msg;
  // Unpinned, a model that fits nowhere says what it tried.
  PlanRequest none = PlanRequestFor("llama-3-405b", 8, "a100-80gb", 64);
  none.grad_reduce = GradReduce::kFp32;
  none.gpus_per_node = 8;
  const std::string refused = PlanJob(none).message();
  EXPECT_EQ(refused.find("it plans with bf16"), std::string::npos) << refused;
}

// --- ZeRO-2 (docs/planner.md, "ZeRO-2") ---------------------------------------------------

Layout DataParallelLayout(int64_t dp, DataParallelSharding sharding) {
  Layout l;
  l.dp = dp;
  l.dp_sharding = sharding;
  return l;
}

TEST(ModelStateBytesPerParam, ZeroTwoShardsTheGradientsToo) {
  // Rajbhandari et al. 2020, P_os+g: 2 + (4 + 12)/d with fp32 gradients, 2 + (2 + 12)/d with bf16.
  EXPECT_DOUBLE_EQ(ModelStateBytesPerParam(DataParallelSharding::kOptimizerGrads, 64),
                   2.0 + 16.0 / 64);
  EXPECT_DOUBLE_EQ(
      ModelStateBytesPerParam(DataParallelSharding::kOptimizerGrads, 64, GradReduce::kBf16),
      2.0 + 14.0 / 64);
  EXPECT_DOUBLE_EQ(ModelStateBytesPerParam(DataParallelSharding::kOptimizerGrads, 1), 18.0);
}

TEST(EvaluateLayout, ZeroTwoHoldsAGradientShardAndOneUnsharedBucket) {
  PlanRequest r = PlanRequestFor("llama-2-7b", 64, "a100-80gb", 512);
  for (GradReduce g : {GradReduce::kFp32, GradReduce::kBf16}) {
    Layout one = DataParallelLayout(64, DataParallelSharding::kOptimizer);
    Layout two = DataParallelLayout(64, DataParallelSharding::kOptimizerGrads);
    one.grad_reduce = two.grad_reduce = g;
    const MemoryBreakdown z1 = EvaluateLayout(r, one).memory;
    const MemoryBreakdown z2 = EvaluateLayout(r, two).memory;
    EXPECT_NEAR(z2.weights_gib, z1.weights_gib, 1e-9);  // whole
    EXPECT_NEAR(z2.optimizer_gib, z1.optimizer_gib, 1e-9);
    EXPECT_NEAR(z2.grads_gib, z1.grads_gib / 64, 1e-9);
    // The bucket: the largest unit's gradients (here the embedding and output layer, 262M
    // parameters, against 202M of a layer), in bf16 and, with fp32 reduction, in fp32 too.
    const ParamCount pc = CountParams(r.model);
    const double unit = std::max(pc.per_layer, pc.embedding + pc.output);
    const double bucket = (g == GradReduce::kFp32 ? 6.0 : 2.0) * unit;
    EXPECT_DOUBLE_EQ(GradBucketBytes(r.model, 1, g), bucket);
    const double gib = 1024.0 * 1024.0 * 1024.0;
    EXPECT_NEAR(z2.transient_gib - z1.transient_gib, bucket / gib, 1e-9);
    EXPECT_NEAR(z1.total_gib - z2.total_gib, z1.grads_gib - z2.grads_gib - bucket / gib, 1e-9);
  }
}

TEST(EvaluateLayout, ZeroTwoReduceScattersEveryMicroBatch) {
  // Without overlap every byte is exposed. ZeRO-1 reduce-scatters once per step, ZeRO-2 once
  // per micro-batch: with k micro-batches it moves k - 1 reduce-scatters more.
  auto extra = [](int64_t batch) {
    PlanRequest r = PlanRequestFor("llama-2-7b", 64, "a100-80gb", batch);
    r.dp_comm_overlap = false;
    const PlanCandidate z1 = EvaluateLayout(r, DataParallelLayout(64, DataParallelSharding::kOptimizer));
    const PlanCandidate z2 =
        EvaluateLayout(r, DataParallelLayout(64, DataParallelSharding::kOptimizerGrads));
    EXPECT_EQ(z2.layout.grad_accum, batch / 64);
    EXPECT_DOUBLE_EQ(z2.time.dp_comm_exposed_s, z2.time.dp_comm_s);
    EXPECT_DOUBLE_EQ(z2.time.optimizer_s, z1.time.optimizer_s);  // the same shard to update
    return z2.time.dp_comm_s - z1.time.dp_comm_s;
  };
  const double reduce_scatter = extra(512) / 7;
  EXPECT_GT(reduce_scatter, 0.0);
  EXPECT_NEAR(extra(256) / 3, reduce_scatter, 1e-9 * reduce_scatter);
  // One micro-batch a step: the same collectives, the same time (a tie the search breaks for
  // the distributed optimizer).
  PlanRequest r = PlanRequestFor("llama-2-7b", 64, "a100-80gb", 64);
  const PlanCandidate z1 = EvaluateLayout(r, DataParallelLayout(64, DataParallelSharding::kOptimizer));
  const PlanCandidate z2 =
      EvaluateLayout(r, DataParallelLayout(64, DataParallelSharding::kOptimizerGrads));
  EXPECT_EQ(z2.step_time_s, z1.step_time_s);
  EXPECT_LT(z2.memory.total_gib, z1.memory.total_gib);
}

TEST(PlanJob, ZeroTwoWhereOnlyItFitsWithoutFsdp) {
  // NVIDIA's Llama 3.1 8B layout (tp=1 cp=2 pp=1 dp=4) with fp32 gradients needs 75.0 GiB with
  // the distributed optimizer, 73.2 usable; with ZeRO-2 54.7 GiB: the search plans it there, in
  // fp32, without falling back to bf16 reduction.
  PlanRequest r = Published(kNvidiaLlama31[0]);
  r.grad_sharding.reset();
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_TRUE(plan->chosen.layout.grad_sharding());
  EXPECT_EQ(plan->chosen.layout.grad_reduce, GradReduce::kFp32);
  EXPECT_FALSE(plan->grad_reduce_fallback);
  EXPECT_NEAR(plan->chosen.memory.total_gib, 54.7, 0.05);
  EXPECT_NE(PlanToText(*plan).find("zero-2:      optimizer states and gradients sharded over the "
                                   "8 data-parallel ranks"),
            std::string::npos)
      << PlanToText(*plan);
}

TEST(PlanJob, ZeroTwoWinsWhereItLetsLessRecomputeFitAndLosesTies) {
  // llama-2-7b on 64 A100, batch 64, one GPU a replica without FSDP, attention that stores its
  // scores (unfused): ZeRO-1 needs selective recompute to fit, ZeRO-2 fits without any and is
  // faster. (With fused attention both fit without recompute, and tie.)
  PlanRequest r = PlanRequestFor("llama-2-7b", 64, "a100-80gb", 64);
  r.unfused_attention = true;
  r.tp = 1;
  r.pp = 1;
  r.fsdp = false;
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_TRUE(plan->chosen.layout.grad_sharding());
  EXPECT_EQ(plan->chosen.layout.recompute, Recompute::kNone);
  r.grad_sharding = false;
  auto zero1 = PlanJob(r);
  ASSERT_TRUE(zero1.ok()) << zero1.message();
  EXPECT_NE(zero1->chosen.layout.recompute, Recompute::kNone);
  EXPECT_LT(plan->chosen.step_time_s, zero1->chosen.step_time_s);
  // A 1B model on 8 GPUs, one micro-batch a step: both fit, equally fast: the distributed
  // optimizer is chosen.
  auto small = PlanJob(PlanRequestFor("1B", 8, "a100-80gb", 8, 2048));
  ASSERT_TRUE(small.ok()) << small.message();
  EXPECT_EQ(small->chosen.layout.grad_accum, 1);
  EXPECT_EQ(small->chosen.layout.dp_sharding, DataParallelSharding::kOptimizer);
}

TEST(PlanJob, ZeroTwoIsPlannedWithoutPipelineForDenseModels) {
  // Never searched with a pipeline or for a mixture of experts.
  for (PlanRequest r : {Published(kNvidiaLlama31[1]), PlanRequestFor("mixtral-8x7b", 64,
                                                                      "h100-80gb", 256)}) {
    r.grad_sharding.reset();
    r.grad_reduce.reset();
    auto plan = PlanJob(r);
    ASSERT_TRUE(plan.ok()) << plan.message();
    for (const PlanCandidate& c : plan->alternatives) EXPECT_FALSE(c.layout.grad_sharding());
    EXPECT_FALSE(plan->chosen.layout.grad_sharding());
  }
  // Pinned where it cannot work: one line naming the pin and why.
  struct Case {
    PlanRequest r;
    const char* message;
  };
  PlanRequest piped = PlanRequestFor("llama-2-7b", 64, "a100-80gb", 512);
  piped.pp = 2;
  PlanRequest moe = PlanRequestFor("mixtral-8x7b", 64, "h100-80gb", 256);
  PlanRequest alone = PlanRequestFor("llama-2-7b", 8, "a100-80gb", 64);
  alone.tp = 8;
  PlanRequest fsdp = PlanRequestFor("llama-2-7b", 64, "a100-80gb", 512);
  fsdp.fsdp = true;
  PlanRequest whole = PlanRequestFor("llama-2-7b", 64, "a100-80gb", 512);
  whole.optimizer_sharding = false;
  const Case cases[] = {
      {piped, "--auto-parallel=pp=2,grad_sharding=on: ZeRO-2 is planned without pipeline "
              "parallelism (pp=2; DeepSpeed's pipeline engine refuses ZeRO stage 2)"},
      {moe, "--auto-parallel=grad_sharding=on: ZeRO-2 is planned for dense models, without "
            "experts"},
      {alone, "--auto-parallel=tp=8,grad_sharding=on: ZeRO-2 shards over the data-parallel ranks "
              "(dp*cp) and this layout has one"},
      {fsdp, "--auto-parallel=fsdp,grad_sharding=on: ZeRO-2 keeps the weights whole and FSDP "
             "shards them"},
      {whole, "--auto-parallel=grad_sharding=on: ZeRO-2 shards the optimizer states too "
              "(optimizer sharding is pinned off)"},
  };
  for (Case c : cases) {
    c.r.grad_sharding = true;
    auto plan = PlanJob(c.r);
    ASSERT_FALSE(plan.ok()) << c.message;
    EXPECT_EQ(plan.message().rfind(c.message, 0), 0u) << plan.message();
    EXPECT_EQ(plan.message().find('\n'), std::string::npos);
  }
  // Pinned where it works, it is what the plan is.
  PlanRequest ok = PlanRequestFor("llama-2-7b", 64, "a100-80gb", 512);
  ok.grad_sharding = true;
  auto plan = PlanJob(ok);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_TRUE(plan->chosen.layout.grad_sharding());
  for (const PlanCandidate& c : plan->alternatives) EXPECT_TRUE(c.layout.grad_sharding() || !c.fits);
}

}  // namespace
}  // namespace autopar
