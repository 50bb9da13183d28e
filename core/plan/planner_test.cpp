#include "core/plan/planner.h"
#include "core/plan/plan_request_for_test.h"

#include <gtest/gtest.h>

#include <array>
#include <numeric>

#include <cmath>
#include <regex>
#include <string>

namespace autopar {
namespace {

// A refusal of pinned sizes names the layout the search finds without them ("without the pins it
// plans: tp=1, ep=8, pp=1, dp=48, ..."): pinned to those sizes instead, the request plans.
void ExpectSuggestedLayoutPlans(PlanRequest r, const std::string& message) {
  const std::string marker = "without the pins it plans: ";
  const size_t at = message.find(marker);
  if (at == std::string::npos) {
    // Nothing plans without the pins either: the GPU count it names does.
    const std::string more = "nothing plans without the pins either; it plans with ";
    const size_t m = message.find(more);
    ASSERT_NE(m, std::string::npos) << message;
    r = PlanRequestFor(r.model.name, std::stoll(message.substr(m + more.size())), r.gpu.name,
                r.global_batch);
    EXPECT_TRUE(PlanJob(r).ok()) << message;
    return;
  }
  const std::string layout = message.substr(at + marker.size());
  r.tp.reset();
  r.cp.reset();
  r.ep.reset();
  r.pp.reset();
  r.dp.reset();
  // A ZeRO-2 layout says so; the found layout was searched without sharding pins.
  r.optimizer_sharding.reset();
  r.grad_sharding.reset();
  if (layout.find("ZeRO-2") != std::string::npos) r.grad_sharding = true;
  // An FSDP layout names its shard group ("FSDP over 124", "HSDP 8 x 4").
  r.fsdp = false;
  r.fsdp_shard.reset();
  r.fsdp_replicate.reset();
  if (const size_t f = layout.find("FSDP over "); f != std::string::npos) {
    r.fsdp = true;
    r.fsdp_shard = std::stoll(layout.substr(f + 10));
  } else if (const size_t h = layout.find("HSDP "); h != std::string::npos) {
    r.fsdp = true;
    r.fsdp_shard = std::stoll(layout.substr(h + 5));
    r.fsdp_replicate = std::stoll(layout.substr(layout.find(" x ", h) + 3));
  }
  for (auto [key, slot] : {std::pair<const char*, std::optional<int64_t>*>{"tp=", &r.tp},
                           {"cp=", &r.cp},
                           {"ep=", &r.ep},
                           {"pp=", &r.pp},
                           {"dp=", &r.dp}}) {
    const size_t k = layout.find(key);
    if (k != std::string::npos) *slot = std::stoll(layout.substr(k + 3));
  }
  auto plan = PlanJob(r);
  EXPECT_TRUE(plan.ok()) << layout << ": " << plan.message();
}

// --- formulas against their published forms ----------------------------------------------

TEST(ModelStateBytesPerParam, MegatronBf16WithFp32Grads) {
  // Megatron-LM's distributed optimizer guide: bf16 parameters with fp32 gradients (what --bf16
  // accumulates and reduces in unless told --grad-reduce-in-bf16) keep 18 bytes per parameter,
  // 6 + 12/d with the distributed optimizer (ZeRO stage 1, Rajbhandari et al. 2020: only the 12
  // bytes of fp32 master weights and Adam moments are sharded).
  EXPECT_DOUBLE_EQ(ModelStateBytesPerParam(DataParallelSharding::kNone, 64), 18.0);
  EXPECT_DOUBLE_EQ(ModelStateBytesPerParam(DataParallelSharding::kOptimizer, 1), 18.0);
  EXPECT_DOUBLE_EQ(ModelStateBytesPerParam(DataParallelSharding::kOptimizer, 64), 6.0 + 12.0 / 64);
  // The breakdown says the same: gradients are twice the bf16 weights.
  PlanRequest r = PlanRequestFor("llama-2-7b", 8, "a100-80gb", 64);
  Layout l;
  l.dp = 8;
  l.dp_sharding = DataParallelSharding::kOptimizer;
  const MemoryBreakdown m = EvaluateLayout(r, l).memory;
  EXPECT_NEAR(m.grads_gib, 2 * m.weights_gib, 1e-9);
  EXPECT_NEAR(m.optimizer_gib, 12.0 / 8 / 2 * m.weights_gib, 1e-9);
}

TEST(ActivationBytesPerLayer, KorthikantiTable2) {
  // Korthikanti et al. 2022, Table 2 (bytes per layer), for a GPT layer (kv = h, ffn = 4h).
  const ModelArch m = ResolveModel("gpt3-175b").value();
  const double s = 2048, b = 1, h = 12288, a = 96;
  for (int64_t t : {2, 4, 8}) {
    const double td = static_cast<double>(t);
    struct Case {
      const char* what;
      bool sp;
      Recompute rc;
      int64_t tp;
      double expected;
    } cases[] = {
        {"no parallelism", false, Recompute::kNone, 1, s * b * h * (34 + 5 * a * s / h)},
        {"tensor parallel", false, Recompute::kNone, t,
         s * b * h * (10 + 24 / td + 5 * a * s / (h * td))},
        {"tensor + sequence parallel", true, Recompute::kNone, t,
         s * b * h / td * (34 + 5 * a * s / h)},
        {"tensor parallel + selective", false, Recompute::kSelective, t,
         s * b * h * (10 + 24 / td)},
        {"tensor + sequence parallel + selective", true, Recompute::kSelective, t,
         s * b * h / td * 34},
        {"full recompute", false, Recompute::kFull, 1, 2 * s * b * h},
        {"full recompute + sequence parallel", true, Recompute::kFull, t, 2 * s * b * h / td},
    };
    for (const auto& c : cases) {
      EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, 2048, 1, c.tp, c.sp, c.rc), c.expected)
          << c.what << ", t=" << t;
    }
  }
}

TEST(ActivationBytesPerLayer, GqaGatedMlpAndDropoutGeneralize) {
  ModelArch m = ResolveModel("llama-2-7b").value();  // kv = h, gated, ffn 11008, no dropout
  ASSERT_FALSE(m.dropout);
  const double s = 4096, h = 4096, f = 11008, a = 32;
  // 6sbh + 4sbh (K, V at full width) + 2sbh + 6sbf (gated) + 4sbh (norms), scores 2as^2b.
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, 4096, 1, 1, false, Recompute::kSelective),
                   s * (16 * h + 6 * f));
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, 4096, 1, 1, false, Recompute::kNone),
                   s * (16 * h + 6 * f) + 2 * a * s * s);
  m.kv_heads = 8;  // K and V shrink to a quarter
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, 4096, 1, 1, false, Recompute::kSelective),
                   s * (13 * h + 6 * f));
  m.dropout = true;  // two sbh masks more
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, 4096, 1, 1, false, Recompute::kSelective),
                   s * (15 * h + 6 * f));
}

TEST(PlanJob, UnfusedAttentionStreamsTheScoresThroughHbm) {
  // megatron-22b (a = 64, dropout) on 8 A100, t = 2, micro-batch 2 x 2 steps per rank: unfused
  // attention adds 9 bytes (forward) + 11 (backward) per score element, b*(a/t)*s^2 per layer and
  // micro-batch, at 80% of the HBM bandwidth; recompute repeats the forward 9 (full recompute:
  // every layer; selective: the attention core of every layer). Nothing else changes.
  PlanRequest r = PlanRequestFor("megatron-22b", 8, "a100-80gb", 16, 2048);
  Layout l;
  l.tp = 2;
  l.dp = 4;
  l.micro_batch = 2;
  const double elements = 2.0 * 32 * 2048.0 * 2048.0 * 48 /* layers */ * 2 /* micro-batches */;
  const double hbm = 2039e9 * 0.8;
  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    SCOPED_TRACE(static_cast<int>(rc));
    l.recompute = rc;
    r.unfused_attention = false;
    const PlanCandidate fused = EvaluateLayout(r, l);
    r.unfused_attention = true;
    const PlanCandidate unfused = EvaluateLayout(r, l);
    EXPECT_NEAR(unfused.time.elementwise_s - fused.time.elementwise_s, elements * 20 / hbm, 1e-9);
    const double repeated = rc == Recompute::kNone ? 0.0 : elements * 9 / hbm;
    EXPECT_NEAR(unfused.time.recompute_s - fused.time.recompute_s, repeated, 1e-9);
    EXPECT_DOUBLE_EQ(unfused.time.compute_s, fused.time.compute_s);
    EXPECT_LT(unfused.mfu, fused.mfu);
  }
  // Without dropout (Llama) the dropout kernels and the mask are gone: 4 + 6 bytes.
  PlanRequest llama = PlanRequestFor("llama-2-7b", 8, "a100-80gb", 8, 4096);
  Layout one;
  one.dp = 8;
  one.recompute = Recompute::kNone;
  const PlanCandidate fused = EvaluateLayout(llama, one);
  llama.unfused_attention = true;
  const PlanCandidate unfused = EvaluateLayout(llama, one);
  EXPECT_NEAR(unfused.time.elementwise_s - fused.time.elementwise_s,
              1.0 * 32 * 4096.0 * 4096.0 * 32 * 10 / hbm, 1e-9);
  // Context parallelism runs fused attention: no change.
  PlanRequest longer = PlanRequestFor("llama-2-7b", 8, "a100-80gb", 1, 32768);
  Layout cp;
  cp.cp = 8;
  cp.recompute = Recompute::kSelective;
  const double with_cp = EvaluateLayout(longer, cp).step_time_s;
  longer.unfused_attention = true;
  EXPECT_DOUBLE_EQ(EvaluateLayout(longer, cp).step_time_s, with_cp);
}

TEST(ModelFlopsPerStep, NarayananFormula) {
  // Narayanan et al. 2021, eq. (3) without recompute: 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)).
  for (const char* name : {"gpt3-175b", "megatron-1t", "megatron-22b"}) {
    const ModelArch m = ResolveModel(name).value();
    const double B = 1536, s = 2048, l = static_cast<double>(m.layers),
                 h = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab);
    const double expected = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    EXPECT_NEAR(ModelFlopsPerStep(m, 2048, 1536) / expected, 1.0, 1e-12) << name;
  }
}

TEST(ModelFlopsPerStep, PalmFormulaForLlama) {
  // Chowdhery et al. 2022 (PaLM), App. B: 6N + 12*L*H*Q*T FLOPs per token, N = non-embedding
  // parameters (the untied output matrix counts; norms are negligible).
  const ModelArch m = ResolveModel("llama-2-7b").value();
  const ParamCount pc = CountParams(m);
  const double n = static_cast<double>(m.layers) * pc.per_layer + pc.output;
  const double per_token = 6 * n + 12.0 * 32 * 4096 * 4096;
  EXPECT_NEAR(ModelFlopsPerStep(m, 4096, 1) / 4096 / per_token, 1.0, 1e-4);
}

TEST(EvaluateLayout, PipelineBubbleIsPMinus1OverMV) {
  PlanRequest r = PlanRequestFor("gpt3-175b", 64, "a100-80gb", 64);
  for (int64_t v : {1, 2, 3}) {
    Layout l;
    l.tp = 8;
    l.pp = 8;
    l.dp = 1;
    l.micro_batch = 1;
    l.vpp = v;
    l.recompute = Recompute::kSelective;
    const PlanCandidate c = EvaluateLayout(r, l);
    const double m = static_cast<double>(c.layout.grad_accum);
    ASSERT_EQ(c.layout.grad_accum, 64);
    const double steady = c.time.compute_s + c.time.elementwise_s + c.time.recompute_s +
                          c.time.tp_comm_s + c.time.p2p_s;
    EXPECT_NEAR(c.time.bubble_s / steady, 7.0 / (m * static_cast<double>(v)), 1e-12) << "v=" << v;
  }
}

TEST(EvaluateLayout, InterleavingAddsKorthikantiActivationFactor) {
  PlanRequest r = PlanRequestFor("gpt3-175b", 64, "a100-80gb", 64);
  Layout l;
  l.tp = 8;
  l.pp = 8;
  l.micro_batch = 1;
  l.recompute = Recompute::kSelective;
  const double plain = EvaluateLayout(r, l).memory.activations_gib;
  l.vpp = 2;
  const double interleaved = EvaluateLayout(r, l).memory.activations_gib;
  EXPECT_NEAR(interleaved / plain, 1.0 + 7.0 / 16.0, 1e-12);
}

TEST(EvaluateLayout, MemoryAndTimeAreConsistent) {
  PlanRequest r = PlanRequestFor("llama-2-13b", 16, "a100-80gb", 128);
  Layout l;
  l.tp = 2;
  l.pp = 2;
  l.dp = 4;
  l.micro_batch = 2;
  l.dp_sharding = DataParallelSharding::kOptimizer;
  const PlanCandidate c = EvaluateLayout(r, l);
  EXPECT_EQ(c.layout.grad_accum, 16);
  EXPECT_TRUE(c.layout.sequence_parallel);
  const MemoryBreakdown& m = c.memory;
  EXPECT_NEAR(m.total_gib,
              m.weights_gib + m.grads_gib + m.optimizer_gib + m.activations_gib + m.transient_gib,
              1e-9);
  // Sharded optimizer: 12/d bytes per parameter against 2 for the weights.
  EXPECT_NEAR(m.optimizer_gib / m.weights_gib, 12.0 / 4 / 2, 1e-9);
  const TimeBreakdown& t = c.time;
  EXPECT_NEAR(t.total_s,
              t.compute_s + t.elementwise_s + t.recompute_s + t.tp_comm_s + t.bubble_s + t.p2p_s +
                  t.dp_comm_exposed_s + t.optimizer_s,
              1e-12);
  EXPECT_GT(t.elementwise_s, 0.0);
  EXPECT_LT(t.elementwise_s, 0.2 * t.compute_s);
  EXPECT_LE(t.dp_comm_exposed_s, t.dp_comm_s);
  EXPECT_NEAR(c.tokens_per_s, 128.0 * 4096 / c.step_time_s, 1e-6);
  EXPECT_GT(c.mfu, 0.2);
  EXPECT_LT(c.mfu, 0.8);
  // Full recompute costs one extra forward of the layers.
  Layout full = l;
  full.recompute = Recompute::kFull;
  const PlanCandidate f = EvaluateLayout(r, full);
  EXPECT_GT(f.time.recompute_s, 0.25 * f.time.compute_s);
  EXPECT_LT(f.memory.activations_gib, c.memory.activations_gib / 5);
}

// --- the search ------------------------------------------------------------------------------

TEST(PlanJob, EveryPlanSatisfiesTheConstraints) {
  struct Case {
    const char* model;
    int64_t gpus, gpus_per_node, batch;
    const char* gpu;
  } cases[] = {
      {"gpt3-1.3b", 8, 8, 512, "a100-80gb"},
      {"llama-2-7b", 8, 8, 512, "a100-40gb"},
      {"llama-2-7b", 64, 8, 1024, "h100-80gb"},
      {"llama-2-13b", 32, 4, 256, "a100-80gb"},
      {"llama-2-70b", 64, 8, 512, "h100-80gb"},
      {"llama-3-70b", 128, 8, 1024, "h200-141gb"},
      {"gpt3-175b", 1024, 8, 1536, "a100-80gb"},
      {"megatron-1t", 3072, 8, 3072, "a100-80gb"},
      {"7B", 24, 8, 96, "a100-80gb"},
  };
  for (const auto& c : cases) {
    PlanRequest r = PlanRequestFor(c.model, c.gpus, c.gpu, c.batch);
    r.gpus_per_node = c.gpus_per_node;
    r.top_k = 5;
    auto plan = PlanJob(r);
    ASSERT_TRUE(plan.ok()) << c.model << ": " << plan.message();
    std::vector<PlanCandidate> all = plan->alternatives;
    all.insert(all.begin(), plan->chosen);
    for (const PlanCandidate& p : all) {
      const Layout& l = p.layout;
      SCOPED_TRACE(std::string(c.model) + " tp=" + std::to_string(l.tp) +
                   " pp=" + std::to_string(l.pp) + " dp=" + std::to_string(l.dp) +
                   " v=" + std::to_string(l.vpp));
      EXPECT_EQ(l.tp * l.cp * l.pp * l.dp, c.gpus);
      EXPECT_EQ(r.model.heads % l.tp, 0);
      EXPECT_EQ(r.model.kv_heads % l.tp, 0);
      EXPECT_LE(l.tp, c.gpus_per_node);
      EXPECT_EQ(c.gpus_per_node % l.tp, 0);
      const std::vector<int64_t> chunks = ChunkLayers(r.model.layers, l.pp, l.vpp);
      ASSERT_EQ(chunks.size(), static_cast<size_t>(l.pp * l.vpp));
      EXPECT_EQ(std::accumulate(chunks.begin(), chunks.end(), int64_t{0}), r.model.layers);
      EXPECT_EQ(l.micro_batch * l.grad_accum * l.dp, c.batch);
      if (l.vpp > 1) {
        EXPECT_GT(l.pp, 1);
        EXPECT_EQ(l.grad_accum % l.pp, 0);
      }
    }
    EXPECT_TRUE(plan->chosen.fits);
    EXPECT_LE(plan->chosen.memory.total_gib, plan->mem_usable_gib);
    EXPECT_EQ(plan->chosen.layout.sequence_parallel, plan->chosen.layout.tp > 1);
    EXPECT_LE(plan->alternatives.size(), 5u);
    for (const PlanCandidate& a : plan->alternatives) {
      if (a.fits && a.step_time_s < plan->chosen.step_time_s) {
        // Faster, but within the model's error of a simpler chosen layout.
        EXPECT_GE(a.step_time_s * (1 + kTimeModelError), plan->chosen.step_time_s * (1 - 1e-9));
        EXPECT_EQ(a.reason.rfind("faster by ", 0), 0u) << a.reason;
      } else if (a.fits) {
        EXPECT_EQ(a.reason.rfind("slower by ", 0), 0u) << a.reason;
      } else {
        EXPECT_LT(a.step_time_s, plan->chosen.step_time_s);
        EXPECT_EQ(a.reason.rfind("does not fit: needs ", 0), 0u) << a.reason;
      }
    }
  }
}

TEST(PlanJob, ChoosesTheSimplestLayoutWithinTheModelErrorOfTheFastest) {
  // Brute force over the same space with EvaluateLayout: nothing that fits is faster than the
  // plan's fastest layout (the chosen one, or the one set aside for it), and nothing that fits
  // is faster than the chosen one by more than the model's error (ZeRO-2 included: it is
  // searched where p = 1).
  PlanRequest r = PlanRequestFor("llama-2-7b", 16, "a100-80gb", 64);
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  for (int64_t t : {1, 2, 4, 8}) {
    for (int64_t p : {1, 2, 4, 8, 16}) {
      if (16 % (t * p) != 0) continue;
      const int64_t d = 16 / (t * p);
      for (int64_t b : {1, 2, 4}) {
        if (64 % (b * d) != 0) continue;
        for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
          for (DataParallelSharding sh :
               {DataParallelSharding::kNone, DataParallelSharding::kOptimizer,
                DataParallelSharding::kOptimizerGrads}) {
            if ((sh != DataParallelSharding::kNone && d == 1) ||
                (sh == DataParallelSharding::kOptimizerGrads && p > 1)) {
              continue;
            }
            Layout l;
            l.tp = t;
            l.pp = p;
            l.dp = d;
            l.micro_batch = b;
            l.recompute = rc;
            l.dp_sharding = sh;
            const PlanCandidate c = EvaluateLayout(r, l);
            const PlanCandidate& fastest = plan->set_aside ? *plan->set_aside : plan->chosen;
            if (c.fits) {
              EXPECT_GE(c.step_time_s, fastest.step_time_s * (1 - 1e-12));
              EXPECT_GE(c.step_time_s * (1 + kTimeModelError),
                        plan->chosen.step_time_s * (1 - 1e-12));
            }
          }
        }
      }
    }
  }
}

TEST(PlanJob, CountsTheFp32GradientsMegatronKeeps) {
  // llama-3-405b on 1024 H100, batch 1024: with 2-byte gradients the planner chose tp=4 pp=8
  // dp=32 (full recompute, interleaved x8) at 69.5 GiB; with the 4 bytes Megatron's --bf16 keeps
  // that layout needs about 89 GiB, and the plan is another layout that fits.
  PlanRequest r = PlanRequestFor("llama-3-405b", 1024, "h100-80gb", 1024);
  Layout old;
  old.tp = 4;
  old.pp = 8;
  old.dp = 32;
  old.vpp = 8;
  old.recompute = Recompute::kFull;
  old.dp_sharding = DataParallelSharding::kOptimizer;
  const PlanCandidate before = EvaluateLayout(r, old);
  EXPECT_GT(before.memory.total_gib, 85.0);
  EXPECT_FALSE(before.fits);
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_TRUE(plan->chosen.fits);
  EXPECT_LE(plan->chosen.memory.total_gib, plan->mem_usable_gib);
  EXPECT_NEAR(plan->chosen.memory.grads_gib, 2 * plan->chosen.memory.weights_gib, 1e-9);
}

TEST(PlanJob, KeepsTheHeadroomFree) {
  // By default 8% of the GPU's memory is kept free (fragmentation, NCCL buffers, CUDA context).
  PlanRequest r = PlanRequestFor("llama-2-13b", 16, "a100-80gb", 256);
  EXPECT_DOUBLE_EQ(r.headroom_fraction, kDefaultMemoryHeadroom);
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_DOUBLE_EQ(plan->mem_usable_gib, 80.0 * (1 - kDefaultMemoryHeadroom));
  EXPECT_LE(plan->chosen.memory.total_gib, plan->mem_usable_gib);
  // A larger headroom is kept too: no layout the plan chooses or lists as fitting uses it.
  r.headroom_fraction = 0.3;
  auto tight = PlanJob(r);
  ASSERT_TRUE(tight.ok()) << tight.message();
  EXPECT_LE(tight->chosen.memory.total_gib, 56.0);
  for (const auto& a : tight->alternatives) {
    if (a.fits) {
      EXPECT_LE(a.memory.total_gib, 56.0);
    }
  }
  r.headroom_fraction = 1.0;
  EXPECT_EQ(PlanJob(r).message(), "--headroom: must be a fraction in [0, 1) (got 1.000)");
}

TEST(EvaluateLayout, TensorParallelOverlapHidesThreeQuarters) {
  // Megatron's --tp-comm-overlap hides 3/4 of the tensor-parallel collectives behind the GEMMs
  // (kTensorParallelOverlap, docs/planner.md): llama-2-70b at tp=8 on 64 H100.
  PlanRequest r = PlanRequestFor("llama-2-70b", 64, "h100-80gb", 512, 4096);
  Layout l;
  l.tp = 8;
  l.dp = 8;
  l.recompute = Recompute::kSelective;
  l.dp_sharding = DataParallelSharding::kOptimizer;
  PlanRequest off = r;
  off.tp_comm_overlap = false;
  const PlanCandidate with = EvaluateLayout(r, l), without = EvaluateLayout(off, l);
  EXPECT_GT(without.time.tp_comm_s, 0.0);
  EXPECT_DOUBLE_EQ(without.time.tp_comm_hidden_s, 0.0);
  EXPECT_NEAR(with.time.tp_comm_s + with.time.tp_comm_hidden_s, without.time.tp_comm_s, 1e-9);
  EXPECT_NEAR(with.time.tp_comm_s, 0.25 * without.time.tp_comm_s, 1e-9);
  EXPECT_NEAR(without.step_time_s - with.step_time_s, with.time.tp_comm_hidden_s, 1e-9);
  // The Megatron arguments ask for the overlap the time counts on, and only then.
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  ASSERT_GT(plan->chosen.layout.tp, 1);
  EXPECT_NE(MegatronArgs(*plan).find(" --sequence-parallel --tp-comm-overlap"), std::string::npos)
      << MegatronArgs(*plan);
  auto plain = PlanJob(off);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(MegatronArgs(*plain).find("--tp-comm-overlap"), std::string::npos);
  // The shipped tp=8 layout is no longer pushed far away: within 25% of the best (37% without).
  PlanRequest pinned = r;
  pinned.tp = 8;
  pinned.pp = 1;
  auto tp8 = PlanJob(pinned);
  ASSERT_TRUE(tp8.ok()) << tp8.message();
  ASSERT_TRUE(tp8->unpinned);
  EXPECT_LT(tp8->chosen.step_time_s / tp8->unpinned->step_time_s, 1.25);
}

TEST(PlanJob, PrefersTheSimplerLayoutWithinTheModelError) {
  // llama-2-70b on 64 H100: tp=2 pp=16 is predicted fastest, but tp=4 pp=4 (4 pipeline stages,
  // not 16) is within the model's 5% of it: the simpler one is chosen, the faster one named.
  PlanRequest r = PlanRequestFor("llama-2-70b", 64, "h100-80gb", 512, 4096);
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  ASSERT_TRUE(plan->set_aside);
  const Layout& chosen = plan->chosen.layout;
  const Layout& fastest = plan->set_aside->layout;
  EXPECT_LT(chosen.pp, fastest.pp);
  EXPECT_LT(plan->set_aside->step_time_s, plan->chosen.step_time_s);
  EXPECT_LE(plan->chosen.step_time_s, plan->set_aside->step_time_s * (1 + kTimeModelError));
  const std::string text = PlanToText(*plan);
  EXPECT_NE(text.find("simpler:     chosen over tp=" + std::to_string(fastest.tp) +
                      " pp=" + std::to_string(fastest.pp)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("within the model's 5.0% error: the simpler layout was chosen"),
            std::string::npos);
  // llama-2-7b on 8 A100: plain data parallelism (pp=2 was chosen at 71.5 GiB, 1.1% faster).
  auto small = PlanJob(PlanRequestFor("llama-2-7b", 8, "a100-80gb", 512, 4096));
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->chosen.layout.tp, 1);
  EXPECT_EQ(small->chosen.layout.pp, 1);
  EXPECT_EQ(small->chosen.layout.dp, 8);
  // Nothing set aside when the fastest is the simplest.
  auto one = PlanJob(PlanRequestFor("gpt3-1.3b", 8, "a100-80gb", 512));
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->set_aside);
  EXPECT_EQ(PlanToText(*one).find("simpler:"), std::string::npos);
}

TEST(PlanJob, AdvisesANearbyBatchThatPlansMarkedlyBetter) {
  // 2047 sequences on 384 A100: only dp=1 divides it, and gpt3-175b runs tp=8 pp=48 (one or two
  // layers per stage). 2048 allows dp=16: the advice names it, planned, > 5 points of MFU better.
  PlanRequest r = PlanRequestFor("gpt3-175b", 384, "a100-80gb", 2047);
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->chosen.layout.dp, 1);
  ASSERT_TRUE(plan->batch_advice);
  EXPECT_EQ(plan->batch_advice->global_batch, 2048);
  EXPECT_GT(plan->batch_advice->plan.mfu, plan->chosen.mfu + kBatchAdviceMfuPoints);
  auto at_2048 = PlanJob(PlanRequestFor("gpt3-175b", 384, "a100-80gb", 2048));
  ASSERT_TRUE(at_2048.ok());
  EXPECT_EQ(plan->batch_advice->plan.layout.dp, at_2048->chosen.layout.dp);
  EXPECT_DOUBLE_EQ(plan->batch_advice->plan.mfu, at_2048->chosen.mfu);
  EXPECT_FALSE(at_2048->batch_advice);  // a good batch gets no advice
  auto read = PlanFromJson(PlanToJson(*plan));
  ASSERT_TRUE(read.ok()) << read.message();
  ASSERT_TRUE(read->batch_advice);
  EXPECT_EQ(read->batch_advice->global_batch, 2048);
  EXPECT_NE(PlanToText(*plan).find("advice:      --global-batch=2048 (+1) plans tp="),
            std::string::npos)
      << PlanToText(*plan);
  // llama-2-7b on 8 GPUs with 513 sequences (= 27 x 19: dp=1 only): 512 runs dp=8.
  auto odd = PlanJob(PlanRequestFor("llama-2-7b", 8, "a100-80gb", 513));
  ASSERT_TRUE(odd.ok());
  ASSERT_TRUE(odd->batch_advice);
  EXPECT_EQ(odd->batch_advice->global_batch, 512);
  EXPECT_EQ(odd->batch_advice->plan.layout.dp, 8);
  // A pinned layout is being evaluated: no advice.
  r.tp = 8;
  auto pinned = PlanJob(r);
  ASSERT_TRUE(pinned.ok());
  EXPECT_FALSE(pinned->batch_advice);
}

TEST(PlanJob, SmallModelUsesDataParallelism) {
  auto plan = PlanJob(PlanRequestFor("gpt3-1.3b", 8, "a100-80gb", 512));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->chosen.layout.tp, 1);
  EXPECT_EQ(plan->chosen.layout.pp, 1);
  EXPECT_EQ(plan->chosen.layout.dp, 8);
}

TEST(PlanJob, TensorParallelStaysInANodeUnlessAllowed) {
  PlanRequest r = PlanRequestFor("gpt3-175b", 256, "a100-80gb", 512);
  r.gpus_per_node = 4;
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_LE(plan->chosen.layout.tp, 4);
  r.tp = 8;
  auto pinned = PlanJob(r);
  ASSERT_FALSE(pinned.ok());
  EXPECT_EQ(pinned.message().rfind(
                "--auto-parallel=tp=8: tp=8 exceeds the 4 GPUs of a node (tensor parallelism must "
                "stay on NVLink); without the pins it plans: tp=",
                0),
            0u)
      << pinned.message();
  // A model whose 48 heads allow t = 6: on 8-GPU nodes a group of 6 would straddle two nodes.
  PlanRequest straddle = PlanRequestFor("gpt3-1.3b", 12, "a100-80gb", 48);
  straddle.model.heads = 48;
  straddle.model.hidden = 48 * 64;
  straddle.model.kv_heads = 48;
  straddle.tp = 6;
  auto straddling = PlanJob(straddle);
  ASSERT_FALSE(straddling.ok());
  EXPECT_EQ(straddling.message().rfind(
                "--auto-parallel=tp=6: tp=6 does not divide the 8 GPUs of a node (a "
                "tensor-parallel group would straddle two nodes); without the pins it plans: ",
                0),
            0u)
      << straddling.message();
  r.allow_cross_node_tp = true;
  auto allowed = PlanJob(r);
  ASSERT_TRUE(allowed.ok()) << allowed.message();
  EXPECT_EQ(allowed->chosen.layout.tp, 8);
}

TEST(PlanJob, PinnedSizesAreKept) {
  PlanRequest r = PlanRequestFor("llama-2-13b", 32, "a100-80gb", 256);
  r.tp = 4;
  r.pp = 2;
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->chosen.layout.tp, 4);
  EXPECT_EQ(plan->chosen.layout.pp, 2);
  EXPECT_EQ(plan->chosen.layout.dp, 4);
  for (const auto& a : plan->alternatives) {
    EXPECT_EQ(a.layout.tp, 4);
    EXPECT_EQ(a.layout.pp, 2);
  }
  r.dp = 4;
  EXPECT_TRUE(PlanJob(r).ok());
}

TEST(PlanJob, PinnedSizesAreRefusedWithTheReason) {
  struct Case {
    const char* model;
    int64_t gpus, batch;
    std::optional<int64_t> tp, pp, dp;
    const char* expected;
  } cases[] = {
      {"llama-2-7b", 8, 64, 3, std::nullopt, std::nullopt,
       "--auto-parallel=tp=3: tp=3 does not divide the attention heads (32)"},
      {"llama-2-70b", 64, 64, 16, std::nullopt, std::nullopt,
       "--auto-parallel=tp=16: tp=16 does not divide the key/value heads (8)"},
      {"llama-2-7b", 12, 48, 8, std::nullopt, std::nullopt,
       "--auto-parallel=tp=8: tp=8 does not divide the job's 12 GPUs"},
      {"llama-2-7b", 8, 64, 2, 3, std::nullopt,
       "--auto-parallel=tp=2,pp=3: tp*pp=6 does not divide the job's 8 GPUs"},
      {"llama-2-7b", 16, 64, 4, 2, 4,
       "--auto-parallel=tp=4,pp=2,dp=4: tp*pp*dp=32 but the job has 16 GPUs"},
      {"llama-2-7b", 16, 60, 2, 1, std::nullopt,
       "--auto-parallel=tp=2,pp=1: the resulting dp=8 does not divide the global batch (60)"},
      {"llama-2-7b", 8, 64, std::nullopt, 64, std::nullopt,
       "--auto-parallel=pp=64: pp=64 exceeds the model's 32 layers"},
      {"gpt3-175b", 8, 8, 1, 1, std::nullopt,
       "--auto-parallel=tp=1,pp=1: does not fit: the smallest configuration (tp=1, pp=1, dp=8, "
       "micro-batch 1, "
       "full recompute, FSDP over 8, bf16 gradient reduction) needs "},
  };
  for (const auto& c : cases) {
    PlanRequest r = PlanRequestFor(c.model, c.gpus, "a100-80gb", c.batch);
    r.tp = c.tp;
    r.pp = c.pp;
    r.dp = c.dp;
    auto plan = PlanJob(r);
    ASSERT_FALSE(plan.ok()) << c.expected;
    EXPECT_EQ(plan.message().rfind(c.expected, 0), 0u) << plan.message();
    // The change it names (the layout found without the pins), applied, plans.
    ExpectSuggestedLayoutPlans(r, plan.message());
  }
}

// Every pinned refusal names the first constraint the pins as given fail (never "no valid
// layout", never another layout's): one case per class of constraint.
TEST(PlanJob, PinnedRefusalNamesTheFirstFailedConstraint) {
  struct Case {
    const char* model;
    int64_t gpus, batch;
    void (*pin)(PlanRequest*);
    const char* expected;
  } cases[] = {
      {"llama-2-7b", 8, 48, [](PlanRequest* r) { r->dp = 3; },
       "--auto-parallel=dp=3: dp=3 does not divide the job's 8 GPUs"},
      {"llama-2-7b", 8, 48,
       [](PlanRequest* r) {
         r->tp = 4;
         r->dp = 4;
       },
       "--auto-parallel=tp=4,dp=4: tp*dp=16 does not divide the job's 8 GPUs"},
      {"llama-2-7b", 8, 48, [](PlanRequest* r) { r->cp = 3; },
       "--auto-parallel=cp=3: cp=3 needs a sequence length divisible by 6 (got 4096)"},
      {"mixtral-8x7b", 16, 64,
       [](PlanRequest* r) {
         r->ep = 16;
         r->pp = 1;
       },
       "--auto-parallel=ep=16,pp=1: ep=16 does not divide the model's 8 experts"},
      {"llama-2-7b", 8, 48,
       [](PlanRequest* r) {
         r->tp = 1;
         r->pp = 1;
         r->dp = 8;
         r->micro_batch = 5;
       },
       "--auto-parallel=tp=1,pp=1,dp=8: micro_batch=5 does not divide the sequences of a "
       "data-parallel rank (global batch 48 / dp=8)"},
      {"llama-2-7b", 8, 48, [](PlanRequest* r) { r->micro_batch = 5; },
       "micro_batch=5 does not divide the sequences of a data-parallel rank (global batch 48 / dp "
       "= 1, 2, 4, 8)"},
      {"llama-2-7b", 8, 1024,
       [](PlanRequest* r) {
         r->tp = 8;
         r->micro_batch = 128;
       },
       "--auto-parallel=tp=8: micro_batch=128 exceeds the 64 sequences the search tries"},
      {"llama-2-7b", 8, 48,
       [](PlanRequest* r) {
         r->pp = 1;
         r->vpp = 2;
       },
       "--auto-parallel=pp=1: vpp=2 needs pipeline parallelism (pp > 1; pp=1)"},
      {"llama-2-7b", 8, 48,
       [](PlanRequest* r) {
         r->pp = 4;
         r->vpp = 3;
       },
       "--auto-parallel=pp=4: vpp=3 does not divide the 8 layers of a stage (pp=4, 32 layers)"},
      {"llama-2-7b", 8, 48,
       [](PlanRequest* r) {
         r->tp = 1;
         r->pp = 4;
         r->dp = 2;
         r->micro_batch = 8;
         r->vpp = 2;
       },
       "--auto-parallel=tp=1,pp=4,dp=2: vpp=2 needs the micro-batches of each data-parallel rank "
       "to be a multiple of pp=4 (3 with micro-batch 8, dp=2)"},
      {"llama-2-7b", 8, 48,
       [](PlanRequest* r) {
         r->tp = 8;
         r->pp = 1;
         r->optimizer_sharding = true;
       },
       "--auto-parallel=tp=8,pp=1: optimizer sharding (pinned on) shards over the data-parallel "
       "ranks (dp*cp) and this layout has one"},
  };
  for (const auto& c : cases) {
    PlanRequest r = PlanRequestFor(c.model, c.gpus, "a100-80gb", c.batch);
    r.seq_len = 4096;
    c.pin(&r);
    auto plan = PlanJob(r);
    ASSERT_FALSE(plan.ok()) << c.expected;
    EXPECT_EQ(plan.message().rfind(c.expected, 0), 0u) << plan.message();
    EXPECT_EQ(plan.message().find("no valid layout"), std::string::npos) << plan.message();
    EXPECT_NE(plan.message().find("; without the pins it plans: "), std::string::npos)
        << plan.message();
    EXPECT_EQ(plan.message().find('\n'), std::string::npos) << plan.message();
  }
}

TEST(PlanJob, ModelThatCannotFitSaysWhatWouldMakeItFit) {
  PlanRequest r = PlanRequestFor("llama-3-405b", 8, "a100-80gb", 64);
  auto plan = PlanJob(r);
  ASSERT_FALSE(plan.ok());
  const std::string& msg = plan.message();
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      msg, m,
      std::regex(
          "^llama-3-405b \\(405\\.9B parameters\\) does not fit on 8 x a100-80gb: the smallest "
          "layout "
          // The least memory: bf16 gradients, which the search falls back to where fp32 fits no
          // layout.
          "\\(tp=8, pp=1, dp=1, micro-batch 1, full recompute, bf16 gradient reduction\\) needs "
          "([0-9.]+) GiB per GPU, "
          "73\\.6 GiB usable; it plans with ([0-9]+) GPUs \\(([0-9]+) nodes of 8\\)")))
      << msg;
  EXPECT_GT(std::stod(m[1].str()), 73.6);
  // The suggested GPU count plans, with the same request otherwise.
  const int64_t gpus = std::stoll(m[2].str());
  PlanRequest bigger = PlanRequestFor("llama-3-405b", gpus, "a100-80gb", 64);
  EXPECT_TRUE(PlanJob(bigger).ok()) << gpus << " GPUs: " << PlanJob(bigger).message();
  // One node fewer than suggested does not, with the same batch.
  PlanRequest smaller = PlanRequestFor("llama-3-405b", gpus - 8, "a100-80gb", 64);
  EXPECT_FALSE(PlanJob(smaller).ok());
}

TEST(PlanJob, RecomputesJustEnoughLayersInFull) {
  // Llama-3-405B's published layout at 8K tokens: selective recompute does not fit, so the planner
  // recomputes the fewest layers per chunk in full that make it fit (Megatron's block method).
  PlanRequest r = PlanRequestFor("llama-3-405b", 16384, "h100-80gb", 2048);
  r.tp = 8;
  r.pp = 16;
  r.dp = 128;
  r.allow_uneven_stages = true;
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  const Layout& l = plan->chosen.layout;
  const int64_t chunk = (126 + 15) / 16 / l.vpp;
  ASSERT_EQ(l.recompute, Recompute::kFull);
  ASSERT_GT(l.recompute_layers, 0);
  ASSERT_LT(l.recompute_layers, chunk);
  Layout fewer = l;
  fewer.recompute_layers = l.recompute_layers - 1;
  if (fewer.recompute_layers == 0) fewer.recompute = Recompute::kSelective;
  EXPECT_FALSE(EvaluateLayout(r, fewer).fits);
  Layout all = l;
  all.recompute_layers = 0;
  const PlanCandidate every = EvaluateLayout(r, all);
  EXPECT_TRUE(every.fits);
  EXPECT_GT(every.step_time_s, plan->chosen.step_time_s);
  EXPECT_LT(every.memory.activations_gib, plan->chosen.memory.activations_gib);
  // Pinned full recompute (--recompute full) means every layer, as the frameworks without
  // Megatron's block method run it; the layers pinned too, those.
  r.recompute = Recompute::kFull;
  auto full = PlanJob(r);
  ASSERT_TRUE(full.ok()) << full.message();
  EXPECT_EQ(full->chosen.layout.recompute_layers, 0);
  EXPECT_NE(PlanToText(*full).find(", full recompute, "), std::string::npos);
  r.recompute_layers = l.recompute_layers;
  r.vpp = l.vpp;
  auto block = PlanJob(r);
  ASSERT_TRUE(block.ok()) << block.message();
  EXPECT_EQ(block->chosen.layout.recompute_layers, l.recompute_layers);
}

TEST(PlanJob, SuggestsABiggerGpuWhenOneWouldDo) {
  auto plan = PlanJob(PlanRequestFor("megatron-22b", 4, "a100-80gb", 16));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.message().find("or with a GPU type with more memory (h200-141gb)"), std::string::npos)
      << plan.message();
  EXPECT_TRUE(PlanJob(PlanRequestFor("megatron-22b", 4, "h200-141gb", 16)).ok());
}

TEST(PlanJob, InvalidRequestsNameTheOption) {
  struct Case {
    void (*mutate)(PlanRequest&);
    const char* expected;
  } cases[] = {
      {[](PlanRequest& r) { r.gpus = 0; }, "--gpus: must be >= 1 (got 0)"},
      {[](PlanRequest& r) { r.gpus_per_node = 0; }, "--gpus-per-node: must be >= 1 (got 0)"},
      {[](PlanRequest& r) { r.global_batch = 0; }, "--global-batch: must be >= 1 (got 0)"},
      {[](PlanRequest& r) { r.gpu.mem_gib = 0; },
       "--gpu-mem-gib: must be a positive number (got 0.000)"},
      {[](PlanRequest& r) { r.gpu.net_gbps = -1; },
       "--net-gbps: must be a positive number (got -1.000)"},
      {[](PlanRequest& r) { r.model.heads = 7; },
       "--model: llama-2-7b: hidden: 4096 is not divisible by heads (7)"},
      {[](PlanRequest& r) { r.tp = 0; }, "tp: must be >= 1 (got 0)"},
  };
  for (const auto& c : cases) {
    PlanRequest r = PlanRequestFor("llama-2-7b", 8, "a100-80gb", 64);
    c.mutate(r);
    auto plan = PlanJob(r);
    ASSERT_FALSE(plan.ok()) << c.expected;
    EXPECT_EQ(plan.message(), c.expected);
  }
}

TEST(PlanJob, GlobalBatchThatNoDataParallelSizeDivides) {
  // BLOOM's 70 layers and 112 heads on 384 GPUs with even stages only leave d in {24, 48, 96,
  // 192, 384} (p divides 70 and 384/t: 1 or 2); uneven stages give BLOOM's own dp=8.
  PlanRequest r = PlanRequestFor("bloom-176b", 384, "a100-80gb", 2048);
  r.allow_uneven_stages = false;
  auto plan = PlanJob(r);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.message(),
            "--global-batch: 2048 is not divisible by any data-parallel size possible on 384 GPUs "
            "(dp = 24, 48, 96, 192, 384; even pipeline stages only); it plans with "
            "--global-batch=2040 or with uneven pipeline stages (without --even-stages)");
  // Each change it names plans.
  r.global_batch = 2040;
  EXPECT_TRUE(PlanJob(r).ok()) << PlanJob(r).message();
  r.global_batch = 2048;
  r.allow_uneven_stages = true;
  EXPECT_TRUE(PlanJob(r).ok()) << PlanJob(r).message();
}

TEST(PlanJob, PublishedRunsPlanWithoutFlags) {
  // Runs the planner once refused: Meta's Llama 3 405B (TP8 PP16 DP128 on 16,384 H100s, 8K
  // tokens, 2048 sequences; 126 layers: 7 + 8 x 14 + 7) and BLOOM 176B (TP4 PP12 DP8 on 384 A100s;
  // 70 layers: 5 + 6 x 10 + 5) plan with default options, and their published layouts pinned fit.
  struct Case {
    const char* model;
    int64_t gpus;
    const char* gpu;
    int64_t batch, seq, tp, pp, dp;
    std::vector<int64_t> stages;
  } cases[] = {
      {"llama-3-405b", 16384, "h100-80gb", 2048, 8192, 8, 16, 128,
       {7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7}},
      {"bloom-176b", 384, "a100-80gb", 2048, 2048, 4, 12, 8, {5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5}},
  };
  for (const auto& c : cases) {
    PlanRequest r = PlanRequestFor(c.model, c.gpus, c.gpu, c.batch);
    r.seq_len = c.seq;
    auto plan = PlanJob(r);
    ASSERT_TRUE(plan.ok()) << c.model << ": " << plan.message();
    EXPECT_TRUE(plan->chosen.fits);
    EXPECT_FALSE(plan->unpinned);  // nothing pinned
    r.tp = c.tp;
    r.pp = c.pp;
    r.dp = c.dp;
    auto pinned = PlanJob(r);
    ASSERT_TRUE(pinned.ok()) << c.model << " pinned: " << pinned.message();
    EXPECT_EQ(StageLayerCounts(r.model.layers, c.pp, 1), c.stages) << c.model;
    // The pinned layout is shown beside the best one found, which is at least as fast or, being
    // simpler, within the model's error of it.
    ASSERT_TRUE(pinned->unpinned) << c.model;
    EXPECT_LE(pinned->unpinned->step_time_s, pinned->chosen.step_time_s * (1 + kTimeModelError))
        << c.model;
    EXPECT_NE(PlanToText(*pinned).find("best found:"), std::string::npos);
  }
}

TEST(ActivationBytesPerLayer, ContextParallelHoldsItsShareOfTheTokens) {
  ModelArch m = *ResolveModel("llama-3-8b");
  for (Recompute rc : {Recompute::kSelective, Recompute::kFull}) {
    const double whole = ActivationBytesPerLayer(m, 65536, 1, 8, true, rc);
    EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, 65536, 1, 8, true, rc, 8), whole / 8);
  }
  // Without recompute the scores are not stored either: context parallelism runs fused attention.
  const double linear = ActivationBytesPerLayer(m, 65536, 1, 8, true, Recompute::kSelective);
  EXPECT_DOUBLE_EQ(ActivationBytesPerLayer(m, 65536, 1, 8, true, Recompute::kNone, 4), linear / 4);
}

TEST(PlanJob, LongContextUsesContextParallelism) {
  // Llama 3 405B's long-context stage: 131,072 tokens on 16,384 H100s.
  PlanRequest r = PlanRequestFor("llama-3-405b", 16384, "h100-80gb", 128);
  r.seq_len = 131072;
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  const Layout& l = plan->chosen.layout;
  EXPECT_GT(l.cp, 1);
  EXPECT_EQ(131072 % (2 * l.cp), 0);
  EXPECT_GE(131072 / l.cp, kContextParallelMinTokens);
  EXPECT_EQ(l.tp * l.cp * l.pp * l.dp, 16384);
  EXPECT_NE(MegatronArgs(*plan).find("--context-parallel-size " + std::to_string(l.cp)),
            std::string::npos);
  // Fused attention stores no scores, so a layout without context parallelism fits too, slower.
  r.cp = 1;
  auto without = PlanJob(r);
  ASSERT_TRUE(without.ok()) << without.message();
  EXPECT_GT(without->chosen.step_time_s, plan->chosen.step_time_s);
  // A stack whose attention stores the scores (unfused) fits nothing without it, and the refusal
  // names what does (context parallelism always runs fused attention).
  r.unfused_attention = true;
  auto refused = PlanJob(r);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("without the pins it plans: tp="), std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find(", cp="), std::string::npos) << refused.message();
  // Short sequences never search it (every rank keeps >= 8K tokens).
  auto short_seq = PlanJob(PlanRequestFor("llama-2-7b", 64, "a100-80gb", 512));
  ASSERT_TRUE(short_seq.ok());
  EXPECT_EQ(short_seq->chosen.layout.cp, 1);
}

// The published runs, each within 5 points of MFU or with its gap stated: planner_published_test.cpp.

TEST(PlanJob, OptLayoutNeedsFsdp) {
  // OPT-175B trained with FSDP and Megatron's tensor parallelism (tp=8, FSDP over the other
  // 124): with only the optimizer sharded its layout is refused, and the refusal names ZeRO-2
  // (its 40.7 GiB of bf16 weights per GPU fit whole once the gradients are sharded); pinned as
  // FSDP it plans and fits.
  PlanRequest opt = PlanRequestFor("opt-175b", 992, "a100-80gb", 992);
  ASSERT_TRUE(PlanJob(opt).ok());
  opt.tp = 8;
  opt.pp = 1;
  opt.dp = 124;
  opt.fsdp = false;
  opt.grad_sharding = false;
  auto refused = PlanJob(opt);
  ASSERT_FALSE(refused.ok());
  ExpectSuggestedLayoutPlans(opt, refused.message());
  EXPECT_NE(refused.message().find("; it plans with ZeRO-2 (--auto-parallel=...,grad_sharding=on"),
            std::string::npos)
      << refused.message();
  opt.grad_sharding.reset();
  auto zero2 = PlanJob(opt);
  ASSERT_TRUE(zero2.ok()) << zero2.message();
  EXPECT_TRUE(zero2->chosen.layout.grad_sharding());
  opt.fsdp = true;
  opt.fsdp_shard = 124;
  auto fsdp = PlanJob(opt);
  ASSERT_TRUE(fsdp.ok()) << fsdp.message();
  EXPECT_TRUE(fsdp->chosen.fits);
  EXPECT_EQ(fsdp->chosen.layout.fsdp_shard, 124);
  // Llama 2 70B: no layout published; it plans.
  PlanRequest llama2 = PlanRequestFor("llama-2-70b", 2048, "a100-80gb", 1024);
  llama2.seq_len = 4096;
  EXPECT_TRUE(PlanJob(llama2).ok());
}

TEST(PlanJob, MixtureOfExpertsUsesExpertParallelism) {
  // NVIDIA NeMo Megatron-Bridge performance summary (docs/performance-summary.md, 25.11
  // container, DGX-H100): gpt-oss-120b, 64 H100, BF16, GBS 512, MBS 4, 4096 tokens, TP1 PP4 CP1
  // VP1 EP8, 5,630 tokens/s/GPU. It plans without flags with expert parallelism; the published
  // layout pinned fits and is predicted within 25% of its throughput.
  PlanRequest r = PlanRequestFor("gpt-oss-120b", 64, "h100-80gb", 512);
  r.seq_len = 4096;
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_TRUE(plan->chosen.fits);
  EXPECT_GT(plan->chosen.layout.ep, 1);
  EXPECT_EQ(128 % plan->chosen.layout.ep, 0);
  EXPECT_GT(plan->chosen.time.ep_comm_s, 0);
  const std::string args = MegatronArgs(*plan);
  EXPECT_NE(args.find("--num-experts 128 --moe-router-topk 4 --moe-ffn-hidden-size 2880"),
            std::string::npos)
      << args;
  EXPECT_NE(args.find("--expert-model-parallel-size " + std::to_string(plan->chosen.layout.ep)),
            std::string::npos);
  r.tp = 1;
  r.pp = 4;
  r.ep = 8;
  r.micro_batch = 4;
  r.vpp = 1;
  auto published = PlanJob(r);
  ASSERT_TRUE(published.ok()) << published.message();
  EXPECT_TRUE(published->chosen.fits);
  EXPECT_NEAR(published->chosen.tokens_per_s / 64 / 5630, 1.0, 0.25)
      << published->chosen.tokens_per_s / 64;
  // Expert parallelism divides the expert weights: ep=8 holds an eighth of ep=1's per GPU.
  Layout one = published->chosen.layout;
  one.ep = 1;
  EXPECT_GT(EvaluateLayout(r, one).memory.weights_gib, 4 * published->chosen.memory.weights_gib);
  // A dense model refuses an expert-parallel pin; a size that does not divide the experts too.
  PlanRequest dense = PlanRequestFor("llama-2-7b", 8, "a100-80gb", 64);
  dense.ep = 2;
  EXPECT_EQ(PlanJob(dense).message().rfind(
                "--auto-parallel=ep=2: ep=2 needs a mixture-of-experts model (llama-2-7b has no "
                "experts); without the pins it plans: ",
                0),
            0u);
  ExpectSuggestedLayoutPlans(dense, PlanJob(dense).message());
  PlanRequest odd = PlanRequestFor("mixtral-8x7b", 48, "h100-80gb", 96);
  odd.seq_len = 4096;
  odd.ep = 3;
  EXPECT_EQ(PlanJob(odd).message().rfind(
                "--auto-parallel=ep=3: ep=3 does not divide the model's 8 experts; without the "
                "pins it plans: tp=",
                0),
            0u);
  ExpectSuggestedLayoutPlans(odd, PlanJob(odd).message());
}

TEST(PlanJob, ExpertParallelismBeyondDataParallelism) {
  // Megatron-Core's MoE parallel folding (megatron/core/transformer/moe/README.md): with expert
  // tensor parallelism 1, ep spans the tensor-parallel ranks too. mixtral-8x7b on 16 H100 with
  // tp=4 pp=2 dp=2: ep=8 > dp*cp=2 plans, each GPU holding one whole expert, as much expert
  // weight per GPU as ep=2 with the experts split over tp=4.
  PlanRequest r = PlanRequestFor("mixtral-8x7b", 16, "h100-80gb", 64);
  r.seq_len = 4096;
  r.tp = 4;
  r.pp = 2;
  r.dp = 2;
  r.ep = 8;
  auto folded = PlanJob(r);
  ASSERT_TRUE(folded.ok()) << folded.message();
  const Layout& l = folded->chosen.layout;
  EXPECT_EQ(l.ep, 8);
  EXPECT_EQ(l.expert_tp(), 1);
  EXPECT_GT(folded->chosen.time.ep_comm_s, 0);
  const std::string args = MegatronArgs(*folded);
  EXPECT_NE(args.find("--expert-model-parallel-size 8 --expert-tensor-parallel-size 1 "),
            std::string::npos)
      << args;
  Layout split = l;
  split.ep = 2;
  ASSERT_EQ(split.expert_tp(), 4);
  EXPECT_EQ(EvaluateLayout(r, split).memory.weights_gib, folded->chosen.memory.weights_gib);
  // Megatron's expert rank order etp, ep, expert-dp: with etp 1, ep consecutive ranks.
  int ep_ranks = 0;
  for (const auto& [key, value] : PlanTaskEnv(*folded, 13)) {
    if (key != "AUTOPAR_EP_RANK") continue;
    EXPECT_EQ(value, "5");
    ++ep_ranks;
  }
  EXPECT_EQ(ep_ranks, 1);
  auto back = PlanFromJson(PlanToJson(*folded));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->chosen.layout.expert_tp(), 1);
  // Within dp*cp the experts stay split over tp (Megatron's default), as before.
  r.ep = 2;
  auto within = PlanJob(r);
  ASSERT_TRUE(within.ok()) << within.message();
  EXPECT_EQ(within->chosen.layout.expert_tp(), 4);
  EXPECT_EQ(MegatronArgs(*within).find("--expert-tensor-parallel-size"), std::string::npos);
  // An ep that no pipeline stage's GPUs hold is refused in one line that says so.
  r.dp.reset();
  r.tp.reset();
  r.pp = 4;
  r.ep = 8;
  auto refused = PlanJob(r);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.message().rfind("--auto-parallel=ep=8,pp=4: ep=8 does not divide the 4 GPUs of "
                                    "a pipeline stage (tp*dp*cp); without the pins it plans: ",
                                    0),
            0u)
      << refused.message();
  EXPECT_EQ(refused.message().find('\n'), std::string::npos);
}

TEST(SplitStages, FirstAndLastHoldWhatIsLeft) {
  struct Case {
    int64_t layers, pp;
    std::optional<std::array<int64_t, 3>> split;  // first, middle, last
  } cases[] = {
      {32, 4, {{8, 8, 8}}},   {126, 16, {{7, 8, 7}}}, {70, 12, {{5, 6, 5}}},
      {33, 4, {{8, 9, 7}}},   {7, 2, {{4, 4, 3}}},    {5, 1, {{5, 5, 5}}},
      {3, 4, std::nullopt},   // more stages than layers
      {10, 8, std::nullopt},  // 6 middle stages of 2 layers leave nothing for the ends
      {9, 8, std::nullopt},
  };
  for (const auto& c : cases) {
    auto s = SplitStages(c.layers, c.pp);
    SCOPED_TRACE(std::to_string(c.layers) + " layers, pp=" + std::to_string(c.pp));
    ASSERT_EQ(s.has_value(), c.split.has_value());
    if (!s) continue;
    EXPECT_EQ(s->first, (*c.split)[0]);
    EXPECT_EQ(s->middle, (*c.split)[1]);
    EXPECT_EQ(s->last, (*c.split)[2]);
    const auto stages = StageLayerCounts(c.layers, c.pp, 1);
    EXPECT_EQ(std::accumulate(stages.begin(), stages.end(), int64_t{0}), c.layers);
  }
  // Interleaved: 126 layers in 16 x 2 chunks, split as 32 stages would be.
  const auto chunks = ChunkLayers(126, 16, 2);
  ASSERT_EQ(chunks.size(), 32u);
  EXPECT_EQ(std::accumulate(chunks.begin(), chunks.end(), int64_t{0}), 126);
}

TEST(PlanJob, EvenStagesForbidUnevenOnes) {
  PlanRequest r = PlanRequestFor("llama-3-405b", 16384, "h100-80gb", 2048);
  r.seq_len = 8192;
  r.allow_uneven_stages = false;
  // With FSDP the model plans without a pipeline (HSDP with tp=8), slowly; without it the even
  // stages are what binds.
  auto fsdp = PlanJob(r);
  ASSERT_TRUE(fsdp.ok()) << fsdp.message();
  EXPECT_TRUE(fsdp->chosen.layout.fsdp());
  r.fsdp = false;
  auto plan = PlanJob(r);
  ASSERT_FALSE(plan.ok());
  // The binding constraint and a change that works, which plans.
  EXPECT_NE(plan.message().find("does not fit on 16384 x h100-80gb"), std::string::npos)
      << plan.message();
  EXPECT_NE(plan.message().find("it plans with uneven pipeline stages (without --even-stages)"),
            std::string::npos)
      << plan.message();
  r.tp = 8;
  r.pp = 16;
  auto pinned = PlanJob(r);
  ASSERT_FALSE(pinned.ok());
  EXPECT_NE(pinned.message().find("pp=16 does not divide the model's 126 layers and uneven stages "
                                  "are off (--even-stages)"),
            std::string::npos)
      << pinned.message();
}

TEST(PlanJob, MoreMemoryNeverMakesThePlanSlower) {
  for (const char* gpu : {"a100-40gb", "a100-80gb"}) {
    PlanRequest small = PlanRequestFor("llama-2-13b", 16, gpu, 256);
    PlanRequest big = small;
    big.gpu.mem_gib *= 2;
    auto a = PlanJob(small);
    auto b = PlanJob(big);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_LE(b->chosen.step_time_s, a->chosen.step_time_s) << gpu;
  }
}

}  // namespace
}  // namespace autopar
