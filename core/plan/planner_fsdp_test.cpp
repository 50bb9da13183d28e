// FSDP, HSDP and FSDP x TP in the planner: the memory and time model, the pins and what a plan
// hands each framework (docs/planner.md, "FSDP").
#include <gtest/gtest.h>

#include <string>

#include "core/plan/plan_request_for_test.h"
#include "core/plan/planner.h"

namespace autopar {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Layout Fsdp(int64_t tp, int64_t dp, int64_t shard, int64_t micro_batch, Recompute rc) {
  Layout l;
  l.tp = tp;
  l.dp = dp;
  l.fsdp_shard = shard;
  l.micro_batch = micro_batch;
  l.recompute = rc;
  return l;
}

TEST(FsdpStateBytesPerParam, EveryStateShardedOverTheShardGroup) {
  // ZeRO-3 (Rajbhandari et al. 2020, P_os+g+p): the 18 bytes of bf16 weights, fp32 gradients and
  // fp32 master weights and Adam moments, all divided over the shard group.
  EXPECT_DOUBLE_EQ(FsdpStateBytesPerParam(1), 18.0);
  EXPECT_DOUBLE_EQ(FsdpStateBytesPerParam(64), 18.0 / 64);
}

TEST(EvaluateLayout, FsdpShardsTheStatesAndGathersTwoLayers) {
  PlanRequest r = PlanRequestFor("llama-3-8b", 64, "a100-80gb", 64, 8192);
  const ParamCount pc = CountParams(r.model);
  const PlanCandidate c = EvaluateLayout(r, Fsdp(1, 64, 64, 1, Recompute::kSelective));
  const MemoryBreakdown& m = c.memory;
  EXPECT_NEAR(m.weights_gib, pc.total * 2 / 64 / kGiB, 1e-9);
  EXPECT_NEAR(m.grads_gib, pc.total * 4 / 64 / kGiB, 1e-9);
  EXPECT_NEAR(m.optimizer_gib, pc.total * 12 / 64 / kGiB, 1e-9);
  // Two layers and the root unit (embedding, output) gathered in bf16, one unit's gradients in
  // bf16 and fp32, besides the logits.
  const double root = pc.embedding + pc.output;
  const double gathered = (2 * (2 * pc.per_layer + root) + 6 * root) / kGiB;
  EXPECT_GT(m.transient_gib, gathered);
  EXPECT_NEAR(m.total_gib,
              m.weights_gib + m.grads_gib + m.optimizer_gib + m.activations_gib + m.transient_gib,
              1e-9);
  // The same layout with plain data parallelism keeps 18 bytes per parameter.
  Layout ddp = Fsdp(1, 64, 0, 1, Recompute::kSelective);
  EXPECT_NEAR(EvaluateLayout(r, ddp).memory.weights_gib, 64 * m.weights_gib, 1e-6);
}

TEST(EvaluateLayout, FsdpCommunicationIsMostlyHidden) {
  // Per micro-batch: every layer gathered twice in bf16 (2 bytes) and reduce-scattered in fp32
  // (4 bytes): 8 bytes per parameter over the ring's (n-1)/n, at the bandwidth of the node's 8
  // NICs (the shard group has 8 ranks in every node); exposed: the first gather and the last
  // reduce-scatter, whatever the compute does not cover, and half of what it hides.
  PlanRequest r = PlanRequestFor("llama-3-8b", 64, "a100-80gb", 64, 8192);
  const PlanCandidate c = EvaluateLayout(r, Fsdp(1, 64, 64, 1, Recompute::kSelective));
  const ParamCount pc = CountParams(r.model);
  const double bytes = 8.0 * pc.total * 63 / 64;
  const double seconds = bytes / (8 * r.gpu.net_gbps * 1e9 * 0.8);
  EXPECT_NEAR(c.time.dp_comm_s / seconds, 1.0, 0.15);  // and the latency of 63 ring steps
  EXPECT_LT(c.time.dp_comm_exposed_s, 0.75 * c.time.dp_comm_s);
  EXPECT_GE(c.time.dp_comm_exposed_s, 0.5 * c.time.dp_comm_s);
  // Without the overlap every byte waits.
  r.dp_comm_overlap = false;
  const PlanCandidate serial = EvaluateLayout(r, Fsdp(1, 64, 64, 1, Recompute::kSelective));
  EXPECT_DOUBLE_EQ(serial.time.dp_comm_exposed_s, serial.time.dp_comm_s);
  // Accumulating over micro-batches gathers again for each: twice the traffic for two.
  PlanRequest twice = PlanRequestFor("llama-3-8b", 64, "a100-80gb", 128, 8192);
  const PlanCandidate two = EvaluateLayout(twice, Fsdp(1, 64, 64, 1, Recompute::kSelective));
  EXPECT_EQ(two.layout.grad_accum, 2);
  EXPECT_NEAR(two.time.dp_comm_s, 2 * c.time.dp_comm_s, 1e-9);
}

TEST(EvaluateLayout, HsdpShardsInANodeAndAllReducesAcrossReplicas) {
  PlanRequest r = PlanRequestFor("llama-2-13b", 64, "a100-80gb", 128, 4096);
  const PlanCandidate fsdp = EvaluateLayout(r, Fsdp(1, 64, 64, 2, Recompute::kNone));
  const PlanCandidate hsdp = EvaluateLayout(r, Fsdp(1, 64, 8, 2, Recompute::kNone));
  EXPECT_EQ(hsdp.layout.fsdp_replicate(), 8);
  // Shards over 8 GPUs instead of 64: 8x the state per GPU.
  EXPECT_NEAR(hsdp.memory.optimizer_gib, 8 * fsdp.memory.optimizer_gib, 1e-6);
  // Gathers on NVLink, but the shard's all-reduce crosses the network with one rank of each
  // replica group per node (one NIC each), where FSDP over all 64 drives a node's 8 NICs: HSDP
  // saves no time here, only the gathers' reach.
  EXPECT_GT(hsdp.time.dp_comm_s, fsdp.time.dp_comm_s);
  EXPECT_EQ(FsdpPhrase(hsdp.layout), "HSDP 8 x 8");
  EXPECT_EQ(FsdpPhrase(fsdp.layout), "FSDP over 64");
}

TEST(PlanJob, SearchesFsdpBesideMegatronLayouts) {
  // A 70B model on 64 A100: FSDP is among the layouts ranked, with its shard group in the
  // alternatives' text; a pin restricts the search to it.
  PlanRequest r = PlanRequestFor("llama-2-70b", 64, "a100-80gb", 128, 4096);
  r.top_k = 20;
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  bool any_fsdp = plan->chosen.layout.fsdp();
  for (const auto& a : plan->alternatives) any_fsdp = any_fsdp || a.layout.fsdp();
  EXPECT_TRUE(any_fsdp) << PlanToText(*plan);
  r.fsdp = true;
  auto fsdp = PlanJob(r);
  ASSERT_TRUE(fsdp.ok()) << fsdp.message();
  const Layout& l = fsdp->chosen.layout;
  EXPECT_TRUE(l.fsdp());
  EXPECT_EQ(l.pp, 1);
  EXPECT_EQ(l.tp * l.dp, 64);
  EXPECT_EQ(l.dp % l.fsdp_shard, 0);
  ASSERT_TRUE(fsdp->unpinned);  // compared with the best layout of any kind
  r.fsdp = false;
  auto none = PlanJob(r);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->chosen.layout.fsdp());
  for (const auto& a : none->alternatives) EXPECT_FALSE(a.layout.fsdp());
}

TEST(PlanJob, FsdpPinsAreKeptOrRefusedWithTheReason) {
  PlanRequest r = PlanRequestFor("llama-2-13b", 64, "a100-80gb", 128, 4096);
  r.fsdp = true;
  r.fsdp_shard = 8;
  r.fsdp_replicate = 8;
  auto hsdp = PlanJob(r);
  ASSERT_TRUE(hsdp.ok()) << hsdp.message();
  EXPECT_EQ(hsdp->chosen.layout.fsdp_shard, 8);
  EXPECT_EQ(hsdp->chosen.layout.fsdp_replicate(), 8);
  EXPECT_EQ(hsdp->chosen.layout.tp, 1);
  struct Case {
    std::optional<int64_t> tp, pp, shard, replicate;
    const char* model;
    const char* message;
  } cases[] = {
      {std::nullopt, 2, std::nullopt, std::nullopt, "llama-2-70b",
       "--auto-parallel=pp=2,fsdp: pp=2: FSDP is planned without pipeline"},
      {8, std::nullopt, 16, 2, "llama-2-70b",
       "--auto-parallel=tp=8,hsdp=16,2: tp*shard*replicate=256 does not divide the job's 64 GPUs"},
      {std::nullopt, std::nullopt, 1, std::nullopt, "llama-2-70b",
       "a shard group of 1 shards nothing"},
      {std::nullopt, std::nullopt, std::nullopt, std::nullopt, "mixtral-8x7b",
       "FSDP is planned for dense models (mixtral-8x7b has experts)"},
  };
  for (const auto& c : cases) {
    PlanRequest q = PlanRequestFor(c.model, 64, "a100-80gb", 128, 4096);
    q.fsdp = true;
    q.tp = c.tp;
    q.pp = c.pp;
    q.fsdp_shard = c.shard;
    q.fsdp_replicate = c.replicate;
    auto refused = PlanJob(q);
    ASSERT_FALSE(refused.ok()) << c.message;
    EXPECT_NE(refused.message().find(c.message), std::string::npos) << refused.message();
    EXPECT_EQ(refused.message().find('\n'), std::string::npos);
  }
}

TEST(PlanJob, FsdpPlanHandsEachFrameworkItsSharding) {
  PlanRequest r = PlanRequestFor("llama-2-13b", 64, "a100-80gb", 128, 4096);
  r.tp = 2;
  r.fsdp = true;
  r.fsdp_shard = 8;
  r.fsdp_replicate = 4;
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  const std::string megatron = MegatronArgs(*plan);
  EXPECT_NE(
      megatron.find("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params"),
      std::string::npos)
      << megatron;
  EXPECT_NE(megatron.find("--num-distributed-optimizer-instances 4"), std::string::npos);
  const std::string ds = DeepSpeedConfigJson(*plan);
  EXPECT_NE(ds.find("\"stage\":3"), std::string::npos) << ds;
  EXPECT_NE(ds.find("\"mics_shard_size\":8"), std::string::npos) << ds;
  EXPECT_NE(ds.find("\"communication_data_type\":\"fp32\""), std::string::npos) << ds;
  const std::string titan = TorchtitanArgs(*plan);
  EXPECT_NE(titan.find("--parallelism.data_parallel_replicate_degree 4"), std::string::npos);
  EXPECT_NE(titan.find("--parallelism.data_parallel_shard_degree 8"), std::string::npos);
  EXPECT_NE(titan.find("--parallelism.tensor_parallel_degree 2"), std::string::npos);
  EXPECT_NE(titan.find("--training.mixed_precision_reduce float32"), std::string::npos) << titan;
  const std::string accelerate = AccelerateConfig(*plan);
  EXPECT_NE(accelerate.find("distributed_type: FSDP"), std::string::npos) << accelerate;
  EXPECT_NE(accelerate.find("parallelism_config_dp_shard_size: 8"), std::string::npos);
  EXPECT_NE(accelerate.find("parallelism_config_dp_replicate_size: 4"), std::string::npos);
  EXPECT_NE(accelerate.find("parallelism_config_tp_size: 2"), std::string::npos);
  // The environment: shard and replicate sizes, and each rank's place (tp fastest, then the
  // shard group, then the replicas).
  auto env = PlanTaskEnv(*plan, 2 * 8 + 2 * 3 + 1);  // tp rank 1, dp rank 11: shard 3, replica 1
  auto get = [&](const std::string& key) {
    for (const auto& [k, v] : env) {
      if (k == key) return v;
    }
    return std::string("<unset>");
  };
  EXPECT_EQ(get("AUTOPAR_FSDP_SHARD"), "8");
  EXPECT_EQ(get("AUTOPAR_FSDP_REPLICATE"), "4");
  EXPECT_EQ(get("AUTOPAR_DP_RANK"), "11");
  EXPECT_EQ(get("AUTOPAR_FSDP_SHARD_RANK"), "3");
  EXPECT_EQ(get("AUTOPAR_FSDP_REPLICATE_RANK"), "1");
  // The text says what is sharded and how it moves; the JSON round-trips the shard group.
  const std::string text = PlanToText(*plan);
  EXPECT_NE(text.find("fsdp:        HSDP 8 x 4: weights, gradients and optimizer states"),
            std::string::npos)
      << text;
  auto back = PlanFromJson(PlanToJson(*plan));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->chosen.layout.fsdp_shard, 8);
  EXPECT_EQ(back->chosen.layout.fsdp_replicate(), 4);
  // A plan that is not FSDP says 0 for both.
  PlanRequest plain = PlanRequestFor("llama-2-7b", 8, "a100-80gb", 64, 4096);
  plain.fsdp = false;
  auto p = PlanJob(plain);
  ASSERT_TRUE(p.ok());
  for (const auto& [k, v] : PlanTaskEnv(*p, 0)) {
    if (k == "AUTOPAR_FSDP_SHARD" || k == "AUTOPAR_FSDP_REPLICATE") {
      EXPECT_EQ(v, "0") << k;
    }
  }
}

TEST(PlanFromJson, RefusesAShardGroupThatDoesNotSplitDp) {
  PlanRequest r = PlanRequestFor("llama-2-7b", 8, "a100-80gb", 64, 4096);
  r.fsdp = true;
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  plan->chosen.layout.fsdp_shard = 3;
  auto back = PlanFromJson(PlanToJson(*plan, false));
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.message().find("fsdp_shard"), std::string::npos) << back.message();
}

}  // namespace
}  // namespace autopar
