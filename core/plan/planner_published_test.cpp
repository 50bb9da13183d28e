// The planner against published training runs, from 1.7B to 1T parameters, Megatron and FSDP:
// every row's published layout pinned is predicted within 5 points of MFU of what it measured,
// or the row states the gap it has and docs/planner.md ("Checked against published training
// runs") says why. Published throughput is converted to MFU as this planner counts model FLOPs
// (ModelFlopsPerStep: no recompute, the output layer, attention).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/plan/plan_request_for_test.h"
#include "core/plan/planner.h"

namespace autopar {
namespace {

constexpr double kMfuPoints = 0.05;  // the bound: 5 points of MFU, absolute

struct PublishedRun {
  std::string source;   // the row and where it was published
  PlanRequest request;  // with the published layout pinned
  double mfu = 0;       // published, as the planner counts model FLOPs
  // 0: within kMfuPoints. Otherwise the gap (predicted - published, as a fraction) the row has
  // and docs/planner.md explains; checked to stay within 1.5 points of it.
  double stated_gap = 0;
};

// A GPT of Narayanan et al. 2021, Table 1 (vocabulary 51,200, 2048 tokens, ffn 4h).
ModelArch Gpt(const std::string& name, int64_t layers, int64_t hidden, int64_t heads) {
  ModelArch m = *ResolveModel("megatron-22b");
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  return m;
}

// MFU of a published TFLOP/s per GPU counted as Megatron counts it with full recompute
// (Narayanan et al. 2021, eq. 3: 96 B s L h^2 (1 + s/6h + V/16Lh) per step).
double MfuOfRecomputeTflops(double tflops, const ModelArch& m, int64_t s, double peak) {
  const double h = static_cast<double>(m.hidden), l = static_cast<double>(m.layers);
  const double v = static_cast<double>(m.vocab), sd = static_cast<double>(s);
  const double counted = 96 * sd * l * h * h * (1 + sd / (6 * h) + v / (16 * l * h));
  return tflops / peak * ModelFlopsPerStep(m, s, 1) / counted;
}

// MFU of a published throughput in tokens per second per GPU.
double MfuOfTokens(double tokens_per_gpu, const ModelArch& m, int64_t s, double peak_tflops) {
  return tokens_per_gpu * ModelFlopsPerStep(m, s, 1) / static_cast<double>(s) /
         (peak_tflops * 1e12);
}

PlanRequest Pinned(const ModelArch& m, const char* gpu, int64_t gpus, int64_t batch, int64_t tp,
                   int64_t pp, Recompute rc) {
  PlanRequest r;
  r.model = m;
  r.gpu = *ResolveGpuType(gpu);
  r.gpus = gpus;
  r.global_batch = batch;
  r.tp = tp;
  r.pp = pp;
  r.recompute = rc;
  if (rc == Recompute::kFull) r.recompute_layers = 0;
  // Every Megatron run below (2021-2022) predates Megatron's --tp-comm-overlap, and ran unfused
  // attention: Megatron-LM's (and Megatron-DeepSpeed's) attention of 2020-2022 materialised the
  // scores (baddbmm, FusedScaleMaskSoftmax, dropout, bmm) until flash attention (Dao et al.
  // 2022) reached Megatron in 2023. The Llama 3 and torchtitan rows set both back.
  r.tp_comm_overlap = false;
  r.unfused_attention = true;
  return r;
}

// Korthikanti et al. 2022 (MFU: the Megatron-LM README table, data-parallel size 1), the A100
// calibration set; Narayanan et al. 2021, Table 1 (TFLOP/s with full recompute).
std::vector<PublishedRun> MegatronRuns() {
  std::vector<PublishedRun> runs;
  const struct {
    const char* model;
    int64_t gpus, tp, pp;
    double mfu;
  } k22[] = {{"megatron-22b", 8, 8, 1, 0.415},
             {"gpt3-175b", 64, 8, 8, 0.514},
             {"mt-nlg-530b", 280, 8, 35, 0.560},
             {"megatron-1t", 512, 8, 64, 0.563}};
  for (const auto& k : k22) {
    PlanRequest r = Pinned(*ResolveModel(k.model), "a100-80gb", k.gpus, k.gpus, k.tp, k.pp,
                           Recompute::kSelective);
    r.dp = 1;
    runs.push_back({std::string("Korthikanti+ 2022 ") + k.model, r, k.mfu});
  }
  // Korthikanti et al. 2022 Sec. 6.3: the 530B (MT-NLG's architecture) with 8-way data
  // parallelism on 2240 GPUs, the batch 8 x 280, without overlapping the gradient all-reduce:
  // MFU 54.2% (Sec. 6.3), 42.1% with full recompute (abstract); Table 3 and Sec. 6: micro-batch
  // 1, the interleaved schedule with 3 chunks. MT-NLG's production layout on Megatron-LM.
  const struct {
    Recompute recompute;
    double mfu;
  } k22_dp8[] = {{Recompute::kSelective, 0.542}, {Recompute::kFull, 0.421}};
  for (const auto& k : k22_dp8) {
    PlanRequest r =
        Pinned(*ResolveModel("mt-nlg-530b"), "a100-80gb", 2240, 2240, 8, 35, k.recompute);
    r.dp = 8;
    r.micro_batch = 1;
    r.vpp = 3;
    r.dp_comm_overlap = false;
    runs.push_back({std::string("Korthikanti+ 2022 Sec. 6.3 530B on 2240 GPUs, ") +
                        RecomputeName(k.recompute) + " recompute",
                    r, k.mfu});
  }
  // Micro-batch, interleaving (layers per stage / --num-layers-per-virtual-pipeline-stage) and
  // DDP of each row as Megatron-LM's reproduction script of the table sets them
  // (examples/sc21/run_table_1.sh): DDP=torch, PyTorch's DistributedDataParallel, overlaps the
  // gradient all-reduce with the backward pass; DDP=local reduces after it.
  const struct {
    const char* name;
    int64_t layers, hidden, heads, tp, pp, gpus, batch, micro_batch, vpp;
    bool torch_ddp;
    double tflops, stated_gap;
  } n21[] = {{"1.7B", 24, 2304, 24, 1, 1, 32, 512, 16, 1, true, 137, 0},
             {"3.6B", 30, 3072, 32, 2, 1, 64, 512, 16, 1, true, 138, 0},
             {"7.5B", 36, 4096, 32, 4, 1, 128, 512, 16, 1, true, 142, 0},
             {"18.4B", 40, 6144, 48, 8, 1, 256, 1024, 8, 1, true, 135, 0},
             {"39.1B", 48, 8192, 64, 8, 2, 512, 1536, 4, 1, false, 138, 0},
             {"76.1B", 60, 10240, 80, 8, 4, 1024, 1792, 2, 3, false, 140, 0},
             {"145.6B", 80, 12288, 96, 8, 8, 1536, 2304, 2, 2, false, 148, 0},
             {"310.1B", 96, 16384, 128, 8, 16, 1920, 2160, 1, 2, false, 155, 0},
             {"529.6B", 105, 20480, 128, 8, 35, 2520, 2520, 1, 3, false, 163, 0},
             {"1008B", 128, 25600, 160, 8, 64, 3072, 3072, 1, 1, false, 163, 0}};
  for (const auto& n : n21) {
    const ModelArch m = Gpt(std::string("gpt-") + n.name, n.layers, n.hidden, n.heads);
    PlanRequest r = Pinned(m, "a100-80gb", n.gpus, n.batch, n.tp, n.pp, Recompute::kFull);
    r.micro_batch = n.micro_batch;
    r.vpp = n.vpp;
    r.dp_comm_overlap = n.torch_ddp;
    runs.push_back({std::string("Narayanan+ 2021 Table 1 ") + n.name, r,
                    MfuOfRecomputeTflops(n.tflops, m, 2048, 312), n.stated_gap});
  }
  return runs;
}

// Production runs: MT-NLG (Smith et al. 2022, 126 TFLOP/s, DeepSpeed's pipeline), BLOOM
// (BigScience 2022, 150 TFLOP/s, Omni-Path at 6.25 GB/s per GPU), OPT-175B (Zhang et al. 2022,
// FSDP with Megatron's tp=8 on 992 A100, up to 147 TFLOP/s, taken as counted with its full
// recompute), and the Llama 3 paper's Table 4 (405B on H100, BF16 MFU as published). MT-NLG and
// BLOOM ran Megatron-DeepSpeed's attention (Megatron-LM's of 2021, unfused) and OPT trained in
// 2021-22, before flash attention: unfused, as Pinned() sets. MT-NLG stays 7.8 points above what
// it published: the same layout on Megatron-LM (Korthikanti et al. Sec. 6.3, above) is predicted
// within a point, and of the candidates for the production run's extra ~12 s per step
// (docs/planner.md) only about one point has a cited mechanism; its micro-batch size, which would
// explain most of it, is not published. No constant is fitted.
std::vector<PublishedRun> ProductionRuns() {
  std::vector<PublishedRun> runs;
  const ModelArch mtnlg = *ResolveModel("mt-nlg-530b");
  PlanRequest r = Pinned(mtnlg, "a100-80gb", 2240, 1920, 8, 35, Recompute::kFull);
  r.dp = 8;
  // Megatron-DeepSpeed's pipeline is DeepSpeed's PipelineEngine: it turns off the all-reduce in
  // the backward hooks ("We schedule the all-reduces") and its TrainSchedule issues ReduceGrads
  // after the last micro-batch's backward pass: nothing is overlapped (MT-NLG and BLOOM).
  r.dp_comm_overlap = false;
  runs.push_back(
      {"Smith+ 2022 MT-NLG 530B", r, MfuOfRecomputeTflops(126, mtnlg, 2048, 312), 0.078});
  const ModelArch bloom = *ResolveModel("bloom-176b");
  r = Pinned(bloom, "a100-80gb", 384, 2048, 4, 12, Recompute::kFull);
  r.dp = 8;
  r.dp_comm_overlap = false;  // DeepSpeed's PipelineEngine, as MT-NLG's
  r.gpu.net_gbps = 6.25;
  // Its training script (bigscience-workshop/bigscience, train/tr11-176B-ml/tr11-176B-ml.slurm):
  // MICRO_BATCH_SIZE=2 once the batch ramp-up passed 784.
  r.micro_batch = 2;
  runs.push_back({"BigScience 2022 BLOOM 176B", r, MfuOfRecomputeTflops(150, bloom, 2048, 312)});
  const ModelArch opt = *ResolveModel("opt-175b");
  r = Pinned(opt, "a100-80gb", 992, 992, 8, 1, Recompute::kFull);
  r.fsdp = true;
  r.fsdp_shard = 124;
  runs.push_back({"Zhang+ 2022 OPT-175B (FSDP)", r, MfuOfRecomputeTflops(147, opt, 2048, 312)});
  const struct {
    int64_t gpus, seq, batch, cp, pp, dp;
    double mfu;
  } l24[] = {{8192, 8192, 2048, 1, 16, 64, 0.43},
             {16384, 8192, 2048, 1, 16, 128, 0.41},
             {16384, 131072, 128, 16, 16, 8, 0.38}};
  for (const auto& l : l24) {
    r = Pinned(*ResolveModel("llama-3-405b"), "h100-80gb", l.gpus, l.batch, 8, l.pp,
               Recompute::kFull);
    r.recompute.reset();  // not published: the planner's choice (full recompute of some layers)
    r.recompute_layers.reset();
    r.tp_comm_overlap = true;
    r.unfused_attention = false;  // Llama 3: flash attention (Transformer Engine)
    r.seq_len = l.seq;
    r.cp = l.cp;
    r.dp = l.dp;
    runs.push_back({"Llama Team 2024 Table 4, 405B on " + std::to_string(l.gpus) + " H100, " +
                        std::to_string(l.seq) + " tokens",
                    r, l.mfu});
  }
  return runs;
}

// torchtitan's FSDP2 runs on 64 A100-80GB (pytorch/torchtitan docs/performance.md): FSDP over
// all 64, local batch b, tokens per second per GPU.
std::vector<PublishedRun> TorchtitanRuns() {
  std::vector<PublishedRun> runs;
  const struct {
    const char* model;
    int64_t seq, local_batch;
    Recompute recompute;
    double tokens;
  } tt[] = {{"llama-3-8b", 8192, 1, Recompute::kSelective, 2973},
            {"llama-3-70b", 8192, 1, Recompute::kFull, 331},
            {"llama-2-70b", 4096, 2, Recompute::kFull, 353}};
  for (const auto& t : tt) {
    const ModelArch m = *ResolveModel(t.model);
    PlanRequest r = Pinned(m, "a100-80gb", 64, 64 * t.local_batch, 1, 1, t.recompute);
    r.seq_len = t.seq;
    r.micro_batch = t.local_batch;
    r.fsdp = true;
    r.fsdp_shard = 64;
    r.tp_comm_overlap = true;
    r.unfused_attention = false;  // torchtitan: scaled_dot_product_attention (flash)
    runs.push_back({std::string("torchtitan FSDP2 ") + t.model + " on 64 A100", r,
                    MfuOfTokens(t.tokens, m, t.seq, 312)});
  }
  return runs;
}

TEST(PlanJob, PublishedRunsWithinFiveMfuPoints) {
  std::vector<PublishedRun> runs = MegatronRuns();
  for (auto* more : {ProductionRuns, TorchtitanRuns}) {
    for (auto& run : more()) runs.push_back(run);
  }
  for (const PublishedRun& run : runs) {
    SCOPED_TRACE(run.source);
    auto pinned = PlanJob(run.request);
    ASSERT_TRUE(pinned.ok()) << pinned.message();
    EXPECT_TRUE(pinned->chosen.fits);
    const double gap = pinned->chosen.mfu - run.mfu;
    if (run.stated_gap == 0) {
      EXPECT_LE(std::abs(gap), kMfuPoints)
          << "predicted " << pinned->chosen.mfu * 100 << "% against " << run.mfu * 100 << "%";
    } else {
      EXPECT_NEAR(gap, run.stated_gap, 0.015)
          << "predicted " << pinned->chosen.mfu * 100 << "% against " << run.mfu * 100 << "%";
    }
    // Each plans without the pins too, and what it chooses fits.
    PlanRequest free = run.request;
    free.tp.reset();
    free.cp.reset();
    free.pp.reset();
    free.dp.reset();
    free.micro_batch.reset();
    free.recompute.reset();
    free.recompute_layers.reset();
    free.fsdp.reset();
    free.fsdp_shard.reset();
    auto chosen = PlanJob(free);
    ASSERT_TRUE(chosen.ok()) << chosen.message();
    EXPECT_TRUE(chosen->chosen.fits);
  }
}

TEST(PlanJob, TorchtitanRowsWithoutRecomputeAndWithOpLevelRecompute) {
  // Two more of torchtitan's rows, as they ran in 80 GB: llama-2-13b with local batch 2 and no
  // recompute fits (its flash attention stores no scores); llama-2-70b with local batch 1 and
  // torchtitan's op-level selective recompute does not (111 GiB: op-level recompute keeps fewer
  // tensors than Megatron's selective recompute, which is what the planner counts). Their time
  // is checked on the layout evaluated as it ran: 2,162 tokens/s per GPU for 13B within 5
  // points. The 70B row is 9.6
  // points above its 355 tokens/s: torchtitan's op-level selective recompute also recomputes
  // every other matmul in the backward pass (about 1/7 more compute, which would bring it to
  // +1), the planner's selective recompute only attention's core.
  const struct {
    const char* model;
    int64_t local_batch;
    Recompute recompute;
    double tokens, stated_gap;
    bool fits;
  } rows[] = {{"llama-2-13b", 2, Recompute::kNone, 2162, 0, true},
              {"llama-2-70b", 1, Recompute::kSelective, 355, 0.096, false}};
  for (const auto& row : rows) {
    SCOPED_TRACE(row.model);
    PlanRequest r = PlanRequestFor(row.model, 64, "a100-80gb", 64 * row.local_batch, 4096);
    Layout l;
    l.dp = 64;
    l.fsdp_shard = 64;
    l.micro_batch = row.local_batch;
    l.recompute = row.recompute;
    const PlanCandidate c = EvaluateLayout(r, l);
    EXPECT_EQ(c.fits, row.fits) << c.memory.total_gib;
    const double published = MfuOfTokens(row.tokens, r.model, 4096, 312);
    EXPECT_NEAR(c.mfu - published, row.stated_gap, row.stated_gap == 0 ? kMfuPoints : 0.015)
        << "predicted " << c.mfu * 100 << "% against " << published * 100 << "%";
  }
}

TEST(PlanJob, SaysWhenItPredictsAboveTheBestPublishedRun) {
  // llama-2-70b on 512 A100: the planner's choice is predicted above the best MFU published for
  // A100 at 50-200B parameters (GPT-3 175B's 51.4%): the text and the JSON say so and why.
  PlanRequest r = PlanRequestFor("llama-2-70b", 512, "a100-80gb", 1024, 4096);
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  ASSERT_GT(plan->chosen.mfu, 0.514);
  ASSERT_TRUE(plan->above_published);
  EXPECT_DOUBLE_EQ(plan->above_published->mfu, 0.514);
  const std::string text = PlanToText(*plan);
  EXPECT_NE(text.find("published:   "), std::string::npos) << text;
  EXPECT_NE(text.find("is above the best MFU published for a100-80gb at 50-200B parameters, 51.4% "
                      "(GPT-3 175B, Korthikanti et al. 2022)"),
            std::string::npos)
      << text;
  auto back = PlanFromJson(PlanToJson(*plan));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(AbovePublishedText(*back), AbovePublishedText(*plan));
  // Llama 3 405B's published layout on 16,384 H100 (tp=8 pp=16 dp=128) is predicted below the
  // 43% published on 8,192: no such line.
  PlanRequest llama3 = PlanRequestFor("llama-3-405b", 16384, "h100-80gb", 2048, 8192);
  llama3.tp = 8;
  llama3.cp = 1;
  llama3.pp = 16;
  auto below = PlanJob(llama3);
  ASSERT_TRUE(below.ok());
  EXPECT_FALSE(below->above_published);
  EXPECT_EQ(PlanToText(*below).find("published:   "), std::string::npos);
  // No ceiling is below a published row it covers (to the 0.1 point they are written with).
  std::vector<PublishedRun> runs = MegatronRuns();
  for (auto* more : {ProductionRuns, TorchtitanRuns}) {
    for (auto& run : more()) runs.push_back(run);
  }
  for (const PublishedRun& run : runs) {
    auto c = PublishedCeilingFor(run.request.gpu.name, CountParams(run.request.model).total);
    if (c) {
      EXPECT_GE(c->mfu + 0.001, run.mfu) << run.source;
    }
  }
}

}  // namespace
}  // namespace autopar
