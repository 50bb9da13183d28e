#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <json/json.h>

#include <map>
#include <memory>
#include <string>

#include "core/plan/planner.h"

namespace autopar {
namespace {

Plan SamplePlan() {
  PlanRequest r;
  r.model = ResolveModel("llama-2-13b").value();
  r.gpu = ResolveGpuType("a100-80gb").value();
  r.gpus = 32;
  r.global_batch = 256;
  r.top_k = 3;
  // A Megatron layout with the distributed optimizer; FSDP plans are tested in
  // planner_fsdp_test.cpp, ZeRO-2's arguments below.
  r.fsdp = false;
  r.grad_sharding = false;
  return PlanJob(r).value();
}

// A hand-made plan with a known layout, for env and argument tests.
Plan FixedPlan(int64_t tp, int64_t pp, int64_t dp, Recompute rc, bool sharding, int64_t vpp) {
  Plan p;
  p.model_name = "gpt3-175b";
  p.layers = 96;
  p.gpu_name = "a100-80gb";
  p.gpus = tp * pp * dp;
  p.gpus_per_node = 8;
  p.global_batch = 1536;
  p.seq_len = 2048;
  Layout& l = p.chosen.layout;
  l.tp = tp;
  l.pp = pp;
  l.dp = dp;
  l.micro_batch = 2;
  l.grad_accum = 1536 / (2 * dp);
  l.vpp = vpp;
  l.recompute = rc;
  l.dp_sharding = sharding ? DataParallelSharding::kOptimizer : DataParallelSharding::kNone;
  l.sequence_parallel = tp > 1;
  return p;
}

Json::Value Parse(const std::string& text) {
  Json::CharReaderBuilder b;
  Json::Value v;
  std::string errors;
  std::unique_ptr<Json::CharReader> reader(b.newCharReader());
  EXPECT_TRUE(reader->parse(text.data(), text.data() + text.size(), &v, &errors)) << errors;
  return v;
}

TEST(PlanJson, HasTheDocumentedFields) {
  const Json::Value v = Parse(PlanToJson(SamplePlan()));
  for (const char* key : {"tp",
                          "pp",
                          "dp",
                          "micro_batch",
                          "grad_accum",
                          "recompute",
                          "optimizer_sharding",
                          "grad_sharding",
                          "mem_per_gpu_gib",
                          "step_time_s",
                          "tokens_per_s",
                          "samples_per_s",
                          "mfu",
                          "vpp",
                          "memory",
                          "time",
                          "alternatives",
                          "model",
                          "gpu",
                          "gpus",
                          "global_batch",
                          "seq_len"}) {
    EXPECT_TRUE(v.isMember(key)) << key;
  }
  EXPECT_EQ(v["alternatives"].size(), 3u);
  EXPECT_TRUE(v["alternatives"][0]["reason"].isString());
  EXPECT_FALSE(Parse(PlanToJson(SamplePlan(), false)).isMember("alternatives"));
}

TEST(PlanJson, RoundTrip) {
  const Plan a = SamplePlan();
  for (bool with_alternatives : {true, false}) {
    auto b = PlanFromJson(PlanToJson(a, with_alternatives));
    ASSERT_TRUE(b.ok()) << b.message();
    EXPECT_EQ(b->model_name, a.model_name);
    EXPECT_EQ(b->layers, a.layers);
    EXPECT_EQ(b->gpus, a.gpus);
    EXPECT_EQ(b->global_batch, a.global_batch);
    EXPECT_EQ(b->seq_len, a.seq_len);
    const Layout &x = a.chosen.layout, &y = b->chosen.layout;
    EXPECT_EQ(std::make_tuple(x.tp, x.pp, x.dp, x.micro_batch, x.grad_accum, x.vpp, x.recompute,
                              x.recompute_layers, x.dp_sharding, x.sequence_parallel),
              std::make_tuple(y.tp, y.pp, y.dp, y.micro_batch, y.grad_accum, y.vpp, y.recompute,
                              y.recompute_layers, y.dp_sharding, y.sequence_parallel));
    EXPECT_NEAR(b->chosen.step_time_s, a.chosen.step_time_s, 1e-8 * a.chosen.step_time_s);
    EXPECT_NEAR(b->chosen.memory.total_gib, a.chosen.memory.total_gib,
                1e-8 * a.chosen.memory.total_gib);
    EXPECT_NEAR(b->chosen.time.bubble_s, a.chosen.time.bubble_s,
                1e-8 + 1e-8 * a.chosen.time.bubble_s);
    EXPECT_NEAR(b->chosen.mfu, a.chosen.mfu, 1e-9);
    ASSERT_EQ(b->alternatives.size(), with_alternatives ? a.alternatives.size() : 0u);
    for (size_t i = 0; i < b->alternatives.size(); ++i) {
      EXPECT_EQ(b->alternatives[i].reason, a.alternatives[i].reason);
      EXPECT_EQ(b->alternatives[i].layout.tp, a.alternatives[i].layout.tp);
    }
    // Serializing the parsed plan again gives the same text.
    EXPECT_EQ(PlanToJson(*b, with_alternatives), PlanToJson(a, with_alternatives));
  }
}

TEST(PlanJson, ErrorsNameTheKey) {
  std::string good = PlanToJson(SamplePlan(), false);
  Json::Value v = Parse(good);
  struct Case {
    std::string text;
    const char* expected;
  } cases[] = {
      {"{", "plan JSON: not valid JSON: line 1, column 2: "},
      {"[]", "plan JSON: expected an object"},
      {[&] {
         Json::Value c = v;
         c.removeMember("tp");
         return Json::FastWriter().write(c);
       }(),
       "plan JSON: 'tp': missing or not an integer"},
      {[&] {
         Json::Value c = v;
         c["recompute"] = "some";
         return Json::FastWriter().write(c);
       }(),
       "plan JSON: 'recompute': recompute: unknown value 'some' (none, selective, full)"},
      {[&] {
         Json::Value c = v;
         c["memory"].removeMember("total_gib");
         return Json::FastWriter().write(c);
       }(),
       "plan JSON: 'memory.total_gib': missing or not a number"},
      {[&] {
         Json::Value c = v;
         c["gpus"] = 7;
         return Json::FastWriter().write(c);
       }(),
       "plan JSON: tp*cp*pp*dp="},
      {[&] {
         Json::Value c = v;
         c["alternatives"] = 3;
         return Json::FastWriter().write(c);
       }(),
       "plan JSON: 'alternatives': not a list"},
  };
  for (const auto& c : cases) {
    auto p = PlanFromJson(c.text);
    ASSERT_FALSE(p.ok()) << c.expected;
    EXPECT_EQ(p.message().rfind(c.expected, 0), 0u) << p.message();
  }
}

TEST(PlanTaskEnv, RankOrderIsTpThenDpThenPp) {
  const Plan plan = FixedPlan(2, 2, 2, Recompute::kSelective, true, 1);
  struct Case {
    int rank, tp, dp, pp;
  } cases[] = {{0, 0, 0, 0}, {1, 1, 0, 0}, {2, 0, 1, 0}, {3, 1, 1, 0},
               {4, 0, 0, 1}, {5, 1, 0, 1}, {6, 0, 1, 1}, {7, 1, 1, 1}};
  for (const auto& c : cases) {
    std::map<std::string, std::string> env;
    for (const auto& [k, val] : PlanTaskEnv(plan, c.rank)) env[k] = val;
    EXPECT_EQ(env["AUTOPAR_TP_RANK"], std::to_string(c.tp)) << c.rank;
    EXPECT_EQ(env["AUTOPAR_DP_RANK"], std::to_string(c.dp)) << c.rank;
    EXPECT_EQ(env["AUTOPAR_PP_RANK"], std::to_string(c.pp)) << c.rank;
  }
  for (int outside : {-1, 8}) {
    for (const auto& [k, val] : PlanTaskEnv(plan, outside)) {
      EXPECT_EQ(k.find("_RANK"), std::string::npos) << outside << " " << k;
    }
  }
}

TEST(PlanTaskEnv, HasEveryVariable) {
  const Plan plan = FixedPlan(4, 2, 4, Recompute::kFull, true, 3);
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : PlanTaskEnv(plan, 5)) env[k] = v;
  const std::map<std::string, std::string> expected = {
      {"AUTOPAR_TP", "4"},
      {"AUTOPAR_CP", "1"},
      {"AUTOPAR_CP_RANK", "0"},
      {"AUTOPAR_EP", "1"},
      {"AUTOPAR_EP_RANK", "0"},
      {"AUTOPAR_PP", "2"},
      {"AUTOPAR_DP", "4"},
      {"AUTOPAR_MICRO_BATCH", "2"},
      {"AUTOPAR_GRAD_ACCUM", "192"},
      {"AUTOPAR_GLOBAL_BATCH", "1536"},
      {"AUTOPAR_SEQ_LEN", "2048"},
      {"AUTOPAR_RECOMPUTE", "full"},
      {"AUTOPAR_OPTIMIZER_SHARDING", "1"},
      {"AUTOPAR_GRAD_SHARDING", "0"},
      {"AUTOPAR_GRAD_REDUCE", "fp32"},
      {"AUTOPAR_RECOMPUTE_LAYERS", "0"},
      {"AUTOPAR_VPP", "3"},
      {"AUTOPAR_FSDP_SHARD", "0"},
      {"AUTOPAR_FSDP_REPLICATE", "0"},
      {"AUTOPAR_TP_RANK", "1"},
      {"AUTOPAR_DP_RANK", "1"},
      {"AUTOPAR_PP_RANK", "0"},
  };
  for (const auto& [k, v] : expected) EXPECT_EQ(env[k], v) << k;
  EXPECT_FALSE(env["AUTOPAR_STAGE_LAYERS"].empty());
  auto parsed = PlanFromJson(env["AUTOPAR_PLAN_JSON"]);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_EQ(parsed->chosen.layout.vpp, 3);
  EXPECT_EQ(env["AUTOPAR_MEGATRON_ARGS"], MegatronArgs(plan));
  EXPECT_EQ(env["AUTOPAR_DEEPSPEED_CONFIG"], DeepSpeedConfigJson(plan));
  EXPECT_EQ(env.size(), expected.size() + 4);
}

TEST(MegatronArgs, Flags) {
  struct Case {
    Plan plan;
    const char* expected;
  } cases[] = {
      {FixedPlan(8, 4, 4, Recompute::kSelective, true, 2),
       "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --micro-batch-size 2 "
       "--global-batch-size 1536 --seq-length 2048 --sequence-parallel --recompute-granularity "
       "selective "
       "--num-layers-per-virtual-pipeline-stage 12 --use-distributed-optimizer "
       "--overlap-param-gather "
       "--overlap-grad-reduce --bf16 --accumulate-allreduce-grads-in-fp32"},
      {FixedPlan(1, 1, 8, Recompute::kFull, false, 1),
       "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --micro-batch-size 2 "
       "--global-batch-size 1536 --seq-length 2048 --recompute-granularity full --recompute-method "
       "uniform "
       "--recompute-num-layers 1 --overlap-grad-reduce --bf16 "
       "--accumulate-allreduce-grads-in-fp32"},
      {FixedPlan(2, 1, 1, Recompute::kNone, false, 1),
       "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 --micro-batch-size 2 "
       "--global-batch-size 1536 --seq-length 2048 --sequence-parallel --bf16 "
       "--accumulate-allreduce-grads-in-fp32"},
  };
  for (const auto& c : cases) EXPECT_EQ(MegatronArgs(c.plan), c.expected);
  Plan block = FixedPlan(8, 16, 1, Recompute::kFull, false, 1);
  block.chosen.layout.recompute_layers = 3;
  EXPECT_NE(MegatronArgs(block).find(
                " --recompute-granularity full --recompute-method block --recompute-num-layers 3 "),
            std::string::npos)
      << MegatronArgs(block);
}

TEST(PlanTaskEnv, ContextParallelRanksFollowTensorParallelOnes) {
  Plan plan = FixedPlan(2, 2, 2, Recompute::kSelective, true, 1);
  plan.chosen.layout.cp = 2;
  plan.gpus = 16;
  std::set<std::string> coords;
  for (int rank = 0; rank < 16; ++rank) {
    std::map<std::string, std::string> env;
    for (const auto& [k, v] : PlanTaskEnv(plan, rank)) env[k] = v;
    coords.insert(env["AUTOPAR_TP_RANK"] + env["AUTOPAR_CP_RANK"] + env["AUTOPAR_DP_RANK"] +
                  env["AUTOPAR_PP_RANK"]);
    if (rank == 3) {  // tp 1, cp 1, dp 0, pp 0 (Megatron's order: tp, cp, dp, pp)
      EXPECT_EQ(env["AUTOPAR_CP"], "2");
      EXPECT_EQ(env["AUTOPAR_TP_RANK"] + env["AUTOPAR_CP_RANK"] + env["AUTOPAR_DP_RANK"] +
                    env["AUTOPAR_PP_RANK"],
                "1100");
    }
  }
  EXPECT_EQ(coords.size(), 16u);
  EXPECT_NE(MegatronArgs(plan).find(" --context-parallel-size 2 --cp-comm-type p2p"),
            std::string::npos);
  auto parsed = PlanFromJson(PlanToJson(plan));
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_EQ(parsed->chosen.layout.cp, 2);
}

TEST(MegatronArgs, UnevenStages) {
  // 70 layers (BLOOM) on 12 stages: the first and last hold 5, the others 6.
  Plan bloom = FixedPlan(4, 12, 8, Recompute::kSelective, true, 1);
  bloom.layers = 70;
  EXPECT_NE(MegatronArgs(bloom).find(" --decoder-first-pipeline-num-layers 5"
                                     " --decoder-last-pipeline-num-layers 5 "),
            std::string::npos)
      << MegatronArgs(bloom);
  EXPECT_NE(PlanToText(bloom).find("stages:      5 + 10 x 6 + 5 layers"), std::string::npos)
      << PlanToText(bloom);
  auto env = PlanTaskEnv(bloom, 0);
  EXPECT_NE(std::find(env.begin(), env.end(),
                      std::make_pair(std::string("AUTOPAR_STAGE_LAYERS"),
                                     std::string("5,6,6,6,6,6,6,6,6,6,6,5"))),
            env.end());
  // Interleaved: every virtual stage in Megatron-Core's layout string (126 layers, 16 x 4 chunks:
  // the first and last chunk hold 1 layer, the others 2).
  Plan llama = FixedPlan(8, 16, 128, Recompute::kFull, true, 4);
  llama.layers = 126;
  const std::string args = MegatronArgs(llama);
  EXPECT_NE(args.find(" --pipeline-model-parallel-layout \"Et*1|t*2|"), std::string::npos) << args;
  EXPECT_NE(args.find("|t*2|t*1L\" "), std::string::npos) << args;
  EXPECT_EQ(args.find("--num-layers-per-virtual-pipeline-stage"), std::string::npos) << args;
  // Even stages keep the old flags only.
  EXPECT_EQ(MegatronArgs(FixedPlan(8, 4, 4, Recompute::kSelective, true, 2)).find("decoder-first"),
            std::string::npos);
}

TEST(DeepSpeedConfig, BatchArithmeticAndZeroStage) {
  for (bool sharding : {false, true}) {
    const Plan plan = FixedPlan(2, 2, 8, Recompute::kFull, sharding, 1);
    const Json::Value v = Parse(DeepSpeedConfigJson(plan));
    // DeepSpeed requires train_batch_size = micro * accumulation * data-parallel size.
    EXPECT_EQ(v["train_batch_size"].asInt64(), v["train_micro_batch_size_per_gpu"].asInt64() *
                                                   v["gradient_accumulation_steps"].asInt64() * 8);
    EXPECT_EQ(v["train_batch_size"].asInt64(), 1536);
    EXPECT_EQ(v["zero_optimization"]["stage"].asInt(), sharding ? 1 : 0);
    EXPECT_TRUE(v["bf16"]["enabled"].asBool());
    // fp32 gradients, as the memory model counts them.
    EXPECT_EQ(v["data_types"]["grad_accum_dtype"].asString(), "fp32");
    EXPECT_EQ(v["communication_data_type"].asString(), "fp32");
    EXPECT_TRUE(v["activation_checkpointing"]["partition_activations"].asBool());
  }
}

TEST(PlanToText, ShowsLayoutMemoryTimeAndAlternatives) {
  const std::string text = PlanToText(SamplePlan());
  for (const char* part :
       {"model:       llama-2-13b (13.02B parameters)", "hardware:    32 x a100-80gb",
        "layout:      tp=", "memory/GPU:  ", "step time:   ", "throughput:  ", " tokens/s, ",
        "MFU ", "alternatives (", "  1. ", "  3. ", " -- "}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
  }
}

TEST(PlanToText, SaysRecomputeAndLayersInWords) {
  Plan p = FixedPlan(1, 1, 8, Recompute::kNone, true, 1);
  std::string text = PlanToText(p);
  EXPECT_NE(text.find(", no recompute"), std::string::npos) << text;
  EXPECT_EQ(text.find("none recompute"), std::string::npos) << text;
  p.chosen.layout.recompute = Recompute::kFull;
  p.chosen.layout.recompute_layers = 1;
  text = PlanToText(p);
  // Of the model's 96 layers (one chunk without a pipeline), and of each chunk's with one.
  EXPECT_NE(text.find("full recompute of 1 of 96 layers, "), std::string::npos) << text;
  p.chosen.layout.recompute_layers = 3;
  EXPECT_NE(PlanToText(p).find("full recompute of 3 of 96 layers"), std::string::npos);
  Plan piped = FixedPlan(8, 4, 4, Recompute::kFull, true, 2);
  piped.chosen.layout.recompute_layers = 5;
  EXPECT_NE(PlanToText(piped).find("full recompute of 5 of 12 layers per chunk"),
            std::string::npos)
      << PlanToText(piped);
}

// Frameworks whose key checkpoints every layer say so for a plan that recomputes only some.
TEST(FrameworkArguments, SayWhatPartialFullRecomputeRuns) {
  Plan p = FixedPlan(2, 1, 8, Recompute::kFull, true, 1);
  EXPECT_EQ(TorchtitanArgs(p).find("recomputes every layer"), std::string::npos);
  p.chosen.layout.recompute_layers = 5;
  EXPECT_NE(TorchtitanArgs(p).find("(activation_checkpoint.mode full recomputes every layer; the "
                                   "plan, full recompute of 5 of 96 layers, is predicted faster "
                                   "than that: plan with --recompute full for what it runs)"),
            std::string::npos)
      << TorchtitanArgs(p);
  // Megatron-LM runs it as planned.
  EXPECT_NE(MegatronArgs(p).find("--recompute-method block --recompute-num-layers 5"),
            std::string::npos);
  p.chosen.layout.fsdp_shard = 8;
  p.chosen.layout.dp_sharding = DataParallelSharding::kNone;
  EXPECT_NE(AccelerateConfig(p).find("(fsdp_activation_checkpointing recomputes every layer"),
            std::string::npos)
      << AccelerateConfig(p);
}

// The gradient precision reaches every framework's arguments, the text, the JSON and the tasks.
TEST(FrameworkArguments, SayTheGradientPrecision) {
  for (GradReduce g : {GradReduce::kFp32, GradReduce::kBf16}) {
    const bool bf16 = g == GradReduce::kBf16;
    Plan p = FixedPlan(2, 1, 8, Recompute::kSelective, true, 1);
    p.chosen.layout.grad_reduce = g;
    const std::string megatron = MegatronArgs(p);
    // Megatron-LM: --bf16 accumulates and reduces in fp32 unless told --grad-reduce-in-bf16.
    EXPECT_NE(megatron.find(bf16 ? " --bf16 --grad-reduce-in-bf16"
                                 : " --bf16 --accumulate-allreduce-grads-in-fp32"),
              std::string::npos)
        << megatron;
    const Json::Value ds = Parse(DeepSpeedConfigJson(p));
    EXPECT_EQ(ds["data_types"]["grad_accum_dtype"].asString(), GradReduceName(g));
    EXPECT_EQ(ds["communication_data_type"].asString(), GradReduceName(g));
    // torchtitan's FSDP over the 8 data-parallel ranks reduces in mixed_precision_reduce.
    EXPECT_NE(TorchtitanArgs(p).find(std::string("--training.mixed_precision_reduce ") +
                                     (bf16 ? "bfloat16" : "float32")),
              std::string::npos)
        << TorchtitanArgs(p);
    // Accelerate's Megatron-LM plugin has no key for it: the line says so with bf16.
    EXPECT_EQ(AccelerateConfig(p).find("no key for bf16 gradient reduction") != std::string::npos,
              bf16)
        << AccelerateConfig(p);
    EXPECT_EQ(PlanToText(p).find("gradients:   accumulated and reduced in bf16") !=
                  std::string::npos,
              bf16);
    EXPECT_EQ(Parse(PlanToJson(p))["grad_reduce"].asString(), GradReduceName(g));
    auto read = PlanFromJson(PlanToJson(p, false));
    ASSERT_TRUE(read.ok()) << read.message();
    EXPECT_EQ(read->chosen.layout.grad_reduce, g);
    std::map<std::string, std::string> env;
    for (const auto& [k, v] : PlanTaskEnv(p, 0)) env[k] = v;
    EXPECT_EQ(env["AUTOPAR_GRAD_REDUCE"], GradReduceName(g));
  }
  // Under DDP torchtitan has no reduce precision: the line says so rather than pretend.
  Plan ddp = FixedPlan(1, 1, 8, Recompute::kNone, false, 1);
  ddp.chosen.layout.grad_reduce = GradReduce::kBf16;
  EXPECT_NE(TorchtitanArgs(ddp).find("no key for bf16 gradient reduction under DDP"),
            std::string::npos)
      << TorchtitanArgs(ddp);
  // Accelerate's FSDP plugin reduces in bf16 with mixed_precision bf16: an fp32 plan says so.
  Plan fsdp = FixedPlan(1, 1, 8, Recompute::kNone, false, 1);
  fsdp.chosen.layout.fsdp_shard = 8;
  EXPECT_NE(AccelerateConfig(fsdp).find("no key for fp32 gradient reduction"), std::string::npos)
      << AccelerateConfig(fsdp);
  fsdp.chosen.layout.grad_reduce = GradReduce::kBf16;
  EXPECT_EQ(AccelerateConfig(fsdp).find("gradient reduction"), std::string::npos);
  // A plan written before the precision was a choice reduced in fp32.
  Json::Value old = Parse(PlanToJson(SamplePlan(), false));
  old.removeMember("grad_reduce");
  auto read = PlanFromJson(Json::FastWriter().write(old));
  ASSERT_TRUE(read.ok()) << read.message();
  EXPECT_EQ(read->chosen.layout.grad_reduce, GradReduce::kFp32);
}

TEST(FrameworkArguments, SayZeroTwo) {
  // tp=2 over 8 data-parallel ranks, optimizer states and gradients sharded, weights whole.
  Plan p = FixedPlan(2, 1, 8, Recompute::kSelective, true, 1);
  p.chosen.layout.dp_sharding = DataParallelSharding::kOptimizerGrads;
  // Megatron-LM: Megatron-FSDP's optim_grads strategy.
  EXPECT_NE(MegatronArgs(p).find(" --use-megatron-fsdp --data-parallel-sharding-strategy "
                                 "optim_grads --use-distributed-optimizer"),
            std::string::npos)
      << MegatronArgs(p);
  EXPECT_EQ(MegatronArgs(p).find("optim_grads_params"), std::string::npos);
  const Json::Value ds = Parse(DeepSpeedConfigJson(p));
  EXPECT_EQ(ds["zero_optimization"]["stage"].asInt(), 2);
  EXPECT_TRUE(ds["zero_optimization"]["overlap_comm"].asBool());
  // torchtitan: FSDP2 over the 8 ranks that keeps the gathered weights until the backward pass.
  const std::string titan = TorchtitanArgs(p);
  for (const char* part : {"--parallelism.data_parallel_shard_degree 8",
                           "--parallelism.fsdp_reshard_after_forward never",
                           "--parallelism.tensor_parallel_degree 2"}) {
    EXPECT_NE(titan.find(part), std::string::npos) << part << "\n" << titan;
  }
  // Accelerate: its FSDP2 plugin without resharding after forward.
  const std::string accelerate = AccelerateConfig(p);
  for (const char* part : {"distributed_type: FSDP", "fsdp_reshard_after_forward: false",
                           "parallelism_config_dp_shard_size: 8", "parallelism_config_tp_size: 2"}) {
    EXPECT_NE(accelerate.find(part), std::string::npos) << part << "\n" << accelerate;
  }
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : PlanTaskEnv(p, 0)) env[k] = v;
  EXPECT_EQ(env["AUTOPAR_OPTIMIZER_SHARDING"], "1");
  EXPECT_EQ(env["AUTOPAR_GRAD_SHARDING"], "1");
  EXPECT_NE(PlanToText(p).find(", ZeRO-2 (optimizer states and gradients sharded)"),
            std::string::npos);
  // The JSON says both, and reads back.
  const Json::Value v = Parse(PlanToJson(p));
  EXPECT_TRUE(v["optimizer_sharding"].asBool());
  EXPECT_TRUE(v["grad_sharding"].asBool());
  auto read = PlanFromJson(PlanToJson(p, false));
  ASSERT_TRUE(read.ok()) << read.message();
  EXPECT_EQ(read->chosen.layout.dp_sharding, DataParallelSharding::kOptimizerGrads);
  // Without it, the others say nothing of it.
  p.chosen.layout.dp_sharding = DataParallelSharding::kOptimizer;
  EXPECT_EQ(Parse(DeepSpeedConfigJson(p))["zero_optimization"]["stage"].asInt(), 1);
  EXPECT_EQ(TorchtitanArgs(p).find("fsdp_reshard_after_forward"), std::string::npos);
  EXPECT_NE(AccelerateConfig(p).find("distributed_type: MEGATRON_LM"), std::string::npos);
  // A plan written before ZeRO-2 was a choice kept whole gradients; gradients sharded without
  // the optimizer states is no plan.
  Json::Value old = Parse(PlanToJson(SamplePlan(), false));
  old.removeMember("grad_sharding");
  auto older = PlanFromJson(Json::FastWriter().write(old));
  ASSERT_TRUE(older.ok()) << older.message();
  EXPECT_EQ(older->chosen.layout.dp_sharding, DataParallelSharding::kOptimizer);
  old["optimizer_sharding"] = false;
  old["grad_sharding"] = true;
  EXPECT_EQ(PlanFromJson(Json::FastWriter().write(old)).message(),
            "plan JSON: 'grad_sharding': ZeRO-2 shards the optimizer states too "
            "(optimizer_sharding false)");
}

TEST(PlanToText, SaysTheHeadroom) {
  const Plan p = SamplePlan();
  EXPECT_NE(PlanToText(p).find("headroom:    8% of 80.0 GiB (6.4 GiB) kept free for allocator "
                               "fragmentation, NCCL buffers and the CUDA context\n"),
            std::string::npos)
      << PlanToText(p);
  EXPECT_DOUBLE_EQ(Parse(PlanToJson(p))["mem_headroom"].asDouble(), kDefaultMemoryHeadroom);
  // A plan written before the headroom was a setting kept 10% free.
  Json::Value old = Parse(PlanToJson(p, false));
  old.removeMember("mem_headroom");
  auto read = PlanFromJson(Json::FastWriter().write(old));
  ASSERT_TRUE(read.ok()) << read.message();
  EXPECT_DOUBLE_EQ(read->mem_headroom, 0.10);
}

TEST(FrameworkArguments, TorchtitanAndAccelerateKeys) {
  // torchtitan's JobConfig keys (torchtitan/config/job_config.py): with a pipeline the step's
  // micro-batches are one local batch; with any model parallelism or sharding, FSDP.
  Plan p = FixedPlan(2, 2, 8, Recompute::kSelective, true, 1);
  std::string tt = TorchtitanArgs(p);
  for (const std::string part :
       {"--parallelism.data_parallel_replicate_degree 1", "--parallelism.data_parallel_shard_degree 8",
        "--parallelism.tensor_parallel_degree 2", "--parallelism.pipeline_parallel_degree 2",
        "--parallelism.pipeline_parallel_schedule 1F1B",
        "--parallelism.pipeline_parallel_microbatch_size 2", "--training.global_batch_size 1536",
        "--training.local_batch_size 192", "--training.seq_len 2048",
        "--activation_checkpoint.mode selective", "--activation_checkpoint.selective_ac_option op"}) {
    EXPECT_NE(tt.find(part), std::string::npos) << part << "\n" << tt;
  }
  // Plain data parallelism without sharding: DDP; no pipeline: the micro-batch is the local batch.
  tt = TorchtitanArgs(FixedPlan(1, 1, 8, Recompute::kNone, false, 1));
  EXPECT_NE(tt.find("--parallelism.data_parallel_replicate_degree 8 "
                    "--parallelism.data_parallel_shard_degree 1"),
            std::string::npos)
      << tt;
  EXPECT_NE(tt.find("--training.local_batch_size 2"), std::string::npos) << tt;
  EXPECT_NE(tt.find("--activation_checkpoint.mode none"), std::string::npos) << tt;
  // Accelerate's Megatron-LM plugin: num_micro_batches is the accumulation.
  const std::string acc = AccelerateConfig(p);
  for (const std::string part :
       {"distributed_type: MEGATRON_LM", "mixed_precision: bf16", "num_processes: 32",
        "megatron_lm_tp_degree: 2", "megatron_lm_pp_degree: 2",
        "megatron_lm_num_micro_batches: 96", "megatron_lm_sequence_parallelism: true",
        "megatron_lm_recompute_activations: true", "megatron_lm_use_distributed_optimizer: true"}) {
    EXPECT_NE(acc.find(part), std::string::npos) << part << "\n" << acc;
  }
  EXPECT_NE(AccelerateConfig(FixedPlan(2, 2, 8, Recompute::kFull, true, 1)).find("no key for full recompute"),
            std::string::npos);
}

TEST(FrameworkArguments, ShownInTextAndJson) {
  const Plan p = SamplePlan();
  const std::string text = PlanToText(p);
  for (const char* part : {"arguments:\n  Megatron-LM: --tensor-model-parallel-size ",
                           "\n  DeepSpeed:   {", "\n  torchtitan:  --parallelism.",
                           "\n  Accelerate:  distributed_type: MEGATRON_LM"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
  }
  const Json::Value v = Parse(PlanToJson(p));
  const Json::Value& fw = v["frameworks"];
  EXPECT_EQ(fw["megatron_args"].asString(), MegatronArgs(p));
  EXPECT_EQ(fw["deepspeed_config"]["zero_optimization"]["stage"].asInt(),
            p.chosen.layout.optimizer_sharding() ? 1 : 0);
  EXPECT_EQ(fw["torchtitan"]["parallelism"]["tensor_parallel_degree"].asInt64(), p.chosen.layout.tp);
  EXPECT_EQ(fw["accelerate"]["megatron_lm_config"]["megatron_lm_pp_degree"].asInt64(),
            p.chosen.layout.pp);
  // Not in the job's environment copy of the plan.
  EXPECT_FALSE(Parse(PlanToJson(p, false)).isMember("frameworks"));
}

TEST(PlanToText, NoAlternativesHeaderWithoutAlternatives) {
  Plan p = SamplePlan();
  p.alternatives.clear();
  EXPECT_EQ(PlanToText(p).find("alternatives"), std::string::npos) << PlanToText(p);
}

}  // namespace
}  // namespace autopar
