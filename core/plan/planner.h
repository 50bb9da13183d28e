// The auto-parallel planner: chooses tensor/pipeline/data-parallel sizes, micro-batch, activation
// recompute, optimizer-state and gradient sharding and pipeline interleaving for one training job
// from a model of memory and time (every formula and its source: docs/planner.md).
//
// PlanJob() searches every layout that satisfies the constraints (t*p*d = gpus, heads % t == 0,
// kv_heads % t == 0, gpus_per_node % t == 0 unless allow_cross_node_tp, p stages hold the layers
// (SplitStages; evenly only when allow_uneven_stages is off), global_batch % (micro_batch*d) ==
// 0, interleaving needs p > 1, the number of micro-batches to be a multiple of p and v to divide
// every stage's layers) and returns the fastest that fits in memory, plus up to top_k ranked
// alternatives, each with the reason it lost. With pinned sizes it also returns the best layout
// found without them (Plan::unpinned), so that a given layout can be checked against it.
//
// On failure the Result carries one line ready to print after "autopar: ":
//   - invalid request: names the field/option ("--gpus: must be >= 1", "--global-batch: ...");
//   - pinned sizes or knobs that cannot work, named by the first constraint they fail as pinned:
//     "--auto-parallel=tp=3: tp=3 does not divide heads (32)", "micro_batch=5 does not divide
//     the sequences of a data-parallel rank (global batch 48 / dp=8)" or
//     "--auto-parallel=tp=4,pp=2: does not fit: needs 95.1 GiB per GPU, 72.0 GiB usable ...";
//   - a model that fits no layout: how much memory per GPU the smallest layout needs and what
//     would make it fit (uneven stages when forbidden, more GPUs/nodes, a GPU type with more
//     memory);
//   - a global batch no data-parallel size divides: the sizes possible and a batch that works.
// Every change a refusal suggests was planned with that change before it is printed.
// PlanJob is pure (no I/O) and thread-safe; it takes well under 50 ms for a 1T model on 3072 GPUs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/plan/hardware.h"
#include "core/plan/model.h"
#include "autopar/status.h"

namespace autopar {

enum class Recompute { kNone, kSelective, kFull };
const char* RecomputeName(Recompute r);  // "none", "selective", "full"
Result<Recompute> ParseRecompute(const std::string& name);

// The precision the gradients are accumulated and data-parallel reduced in. fp32: Megatron-LM's
// default with --bf16 (fp32 main-grad buffers, 4 bytes per parameter, reduced in fp32); bf16:
// its --grad-reduce-in-bf16 (2 bytes, half the data-parallel bytes). bf16 changes the numerics,
// so the search takes it only where no layout fits with fp32 (docs/planner.md, "Memory per GPU").
enum class GradReduce { kFp32, kBf16 };
const char* GradReduceName(GradReduce g);  // "fp32", "bf16"
Result<GradReduce> ParseGradReduce(const std::string& name);

// What the data-parallel ranks of a layout that is not FSDP shard among them (Rajbhandari et al.
// 2020's ZeRO stages; FSDP, stage 3, is Layout::fsdp_shard). kOptimizer: the optimizer states
// (ZeRO-1: Megatron-LM's distributed optimizer, DeepSpeed stage 1). kOptimizerGrads: the
// optimizer states and the gradients, the weights kept whole (ZeRO-2: DeepSpeed stage 2,
// Megatron-FSDP's optim_grads, FSDP2 without resharding after forward); it has no whole gradient
// buffer to accumulate in, so it reduce-scatters after every micro-batch, and it is planned with
// pp = 1 and a dense model (docs/planner.md, "ZeRO-2").
enum class DataParallelSharding { kNone, kOptimizer, kOptimizerGrads };

// A site calibration of the time model (docs/planner.md, "Calibration"): a finished job on this
// GPU type trained at `factor` times the MFU its plan predicted, so every predicted time of a plan
// for it is divided by `factor` (as if every rate of the GPU type, FLOP/s and bandwidths alike,
// were `factor` times the preset's). The layouts' order, and so the chosen layout, is unchanged.
struct PlanCalibration {
  double factor = 1.0;  // (0, 2]
  std::string job;      // the job it was measured on
};
// "calibrated x0.87 from job 1234"
std::string CalibrationLabel(const PlanCalibration& calibration);

// The fraction of each GPU's memory a plan keeps free by default: room for the caching
// allocator's fragmentation, NCCL's buffers and the CUDA context, none of which the memory model
// counts (docs/planner.md, "Memory per GPU").
inline constexpr double kDefaultMemoryHeadroom = 0.08;

// The time model's stated relative error: its calibration set (Korthikanti et al. 2022's four
// runs, docs/planner.md) is predicted within 5% (PublishedRunsWithinStatedTolerance). A more
// complex layout (more pipeline stages, tensor or context parallelism) is chosen over a simpler
// one only when it is predicted faster by more than this.
inline constexpr double kTimeModelError = 0.05;

// A global batch can force a poor layout: the data-parallel size must divide it, so a batch with
// few divisors leaves only deep pipelines or wide tensor parallelism (gpt3-175b on 384 A100 with
// 2047 sequences: tp=8 pp=48 dp=1). The planner then plans the batches within
// kNearbyBatchFraction of the request that allow a larger data-parallel size (the nearest
// multiples of each such size, nearest first, at most kBatchAdviceSearches of them) and advises
// the nearest whose plan's MFU is more than kBatchAdviceMfuPoints above the request's.
inline constexpr double kNearbyBatchFraction = 0.05;
inline constexpr double kBatchAdviceMfuPoints = 0.05;  // 5 points of MFU, as a fraction
inline constexpr int kBatchAdviceSearches = 8;

struct PlanRequest {
  ModelArch model;
  GpuSpec gpu;       // a preset from ResolveGpuType, with any numbers overridden
  int64_t gpus = 0;  // total GPUs of the job
  int64_t gpus_per_node = 8;
  int64_t global_batch = 0;  // sequences per optimizer step
  int64_t seq_len = 0;       // 0: model.seq_len
  // Pinned sizes (--auto-parallel=tp=T,pp=P[,cp=C][,ep=E][,dp=D]); unset = searched.
  std::optional<int64_t> tp, pp, dp;
  std::optional<int64_t> cp;  // context parallelism (searched for long sequences, see Layout)
  std::optional<int64_t> ep;  // expert parallelism (mixtures of experts, see Layout)
  // How the pinned sizes were given, for error messages; empty: "--auto-parallel=tp=T,pp=P".
  std::string pin_label;
  // Further restrictions, mainly to evaluate a published layout; unset = searched.
  std::optional<int64_t> micro_batch;
  std::optional<int64_t> vpp;
  std::optional<Recompute> recompute;
  std::optional<int64_t> recompute_layers;  // with full recompute: layers per chunk (0 = all)
  // Pinned optimizer-state sharding (autopar plan --optimizer-sharding): true plans the
  // distributed optimizer or ZeRO-2 (both shard it), false neither.
  std::optional<bool> optimizer_sharding;
  // Pinned gradient sharding (--auto-parallel=...,grad_sharding=on|off, autopar plan
  // --grad-sharding): true plans ZeRO-2 layouts only (no FSDP), false none; unset: searched.
  std::optional<bool> grad_sharding;
  // Pinned gradient precision (--auto-parallel=grad_reduce=, autopar plan --grad-reduce); unset:
  // fp32, or bf16 when no layout fits with fp32.
  std::optional<GradReduce> grad_reduce;
  // FSDP (ZeRO-3; PyTorch FSDP2, DeepSpeed ZeRO stage 3, Megatron-FSDP): weights, gradients and
  // optimizer states sharded over a shard group of the data-parallel ranks (Layout::fsdp_shard).
  // fsdp: true plans FSDP layouts only, false none; unset: both are searched.
  // fsdp_shard / fsdp_replicate pin the shard group and the number of its replicas (HSDP when
  // replicate > 1; dp = shard * replicate). --auto-parallel=fsdp[=N] / hsdp=S,R.
  std::optional<bool> fsdp;
  std::optional<int64_t> fsdp_shard, fsdp_replicate;
  int top_k = 3;  // alternatives to return
  bool allow_cross_node_tp =
      false;  // t may exceed gpus_per_node (TP traffic then uses the network)
  // Pipeline stages may hold different numbers of layers (SplitStages; the largest stage is
  // costed for every stage, an upper bound); off: p must divide the layers.
  bool allow_uneven_stages = true;
  // A layout fits when the memory it is modelled to need <= gpu.mem_gib * (1 -
  // headroom_fraction), the "usable" memory: the headroom is kept free for what the model does
  // not count (allocator fragmentation, NCCL buffers, the CUDA context). The site sets it
  // (plugstack.conf plan_headroom=), `autopar plan` with --headroom.
  double headroom_fraction = kDefaultMemoryHeadroom;
  // Megatron's --tp-comm-overlap (Transformer Engine's userbuffers, with sequence parallelism):
  // part of the tensor-parallel communication is hidden behind the GEMMs (docs/planner.md,
  // "Communication"), and the Megatron arguments ask for it. Off: every byte is exposed, as in
  // runs before the overlap existed (the published runs of 2021-2022 the model is checked on).
  bool tp_comm_overlap = true;
  // Megatron's --overlap-grad-reduce / --overlap-param-gather (and FSDP's prefetch): the
  // data-parallel collectives run behind the backward and forward passes. Off: every byte is
  // exposed, as in Megatron-LM before Megatron-Core (the runs of Narayanan et al. 2021 reduced
  // their gradients after the backward pass).
  bool dp_comm_overlap = true;
  // The attention kernel. Fused (flash) attention, the default (torchtitan, Megatron-Core with
  // Transformer Engine, anything with FlashAttention since 2022-23), never writes the b*a*s*s
  // scores to memory. Unfused (Megatron-LM's and Megatron-DeepSpeed's CoreAttention of 2020-2022:
  // baddbmm, FusedScaleMaskSoftmax, torch dropout, bmm) materialises them, and its softmax and
  // dropout kernels and their gradients stream them through HBM: charged as element-wise time
  // (docs/planner.md, "Element-wise work"). Context parallelism always runs fused attention.
  bool unfused_attention = false;
  // The site's calibration for gpu (core/calibration: CalibrationFile::For); unset: the time model as it is.
  std::optional<PlanCalibration> calibration;
};

struct Layout {
  int64_t tp = 1, pp = 1, dp = 1;
  // Context parallelism (Megatron-LM's --context-parallel-size): each of the cp ranks holds s/cp
  // tokens of every sequence, K/V travel around the ring overlapped with attention; searched
  // where every rank keeps at least kContextParallelMinTokens tokens (sequences of 8K and more).
  // t*cp*p*d = gpus; rank order tp, cp, dp, pp.
  int64_t cp = 1;
  // Expert parallelism (mixtures of experts; Megatron-LM's --expert-model-parallel-size): the
  // routed experts are split over ep of the d*cp ranks that share the dense weights, and also
  // over t (expert tensor parallelism = tp); or, where ep does not divide d*cp, over ep of the
  // t*d*cp ranks of a stage, each holding whole experts (expert tensor parallelism 1,
  // Megatron-Core's MoE parallel folding). Tokens reach their experts by all-to-all.
  int64_t ep = 1;
  // The expert tensor-parallel size (Megatron-Core's --expert-tensor-parallel-size).
  int64_t expert_tp() const { return ep > 1 && (dp * cp) % ep != 0 ? 1 : tp; }
  int64_t micro_batch = 1;
  int64_t grad_accum = 1;  // micro-batches per step per data-parallel rank
  int64_t vpp = 1;         // interleaved (virtual) pipeline chunks per stage; 1 = not interleaved
  Recompute recompute = Recompute::kNone;
  // With kFull: layers of each pipeline chunk recomputed in full (Megatron's "block" method); the
  // chunk's other layers use selective recompute. 0 = every layer.
  int64_t recompute_layers = 0;
  // Optimizer states (ZeRO-1), or optimizer states and gradients (ZeRO-2), sharded over the d*cp
  // ranks that hold the same weights; none with FSDP, which shards everything itself.
  DataParallelSharding dp_sharding = DataParallelSharding::kNone;
  bool optimizer_sharding() const { return dp_sharding != DataParallelSharding::kNone; }
  bool grad_sharding() const { return dp_sharding == DataParallelSharding::kOptimizerGrads; }
  GradReduce grad_reduce = GradReduce::kFp32;  // gradients accumulated and reduced in
  bool sequence_parallel = false;   // on whenever tp > 1 (Korthikanti et al. 2022)
  // FSDP (ZeRO-3): weights, gradients and optimizer states sharded over groups of fsdp_shard of
  // the d data-parallel ranks; d / fsdp_shard replicas of each shard (HSDP when more than one).
  // 0: not FSDP. Each layer's weights are all-gathered before its forward and again before its
  // backward, its gradients reduce-scattered (docs/planner.md, "FSDP"). Planned with pp = 1,
  // cp = 1 and ep = 1 (tensor parallelism combines: FSDP x TP); rank order tp, shard, replicate.
  int64_t fsdp_shard = 0;
  bool fsdp() const { return fsdp_shard > 0; }
  int64_t fsdp_replicate() const { return fsdp_shard > 0 ? dp / fsdp_shard : 0; }
};

// Per-GPU memory on the most loaded pipeline stage, GiB.
struct MemoryBreakdown {
  double weights_gib = 0;      // bf16 parameters (FSDP: their shard)
  double grads_gib = 0;        // main gradients: fp32 (Megatron's --bf16 default) or bf16
                               // (ZeRO-2 and FSDP: their shard)
  double optimizer_gib = 0;    // fp32 master weights + Adam moments (sharded over d if enabled)
  double activations_gib = 0;  // stored activations of all in-flight micro-batches
  double transient_gib = 0;    // logits / recompute working set / FSDP's gathered layers /
                               // ZeRO-2's unsharded gradient bucket
  double total_gib = 0;
};

// Time of one optimizer step, seconds. total = compute + elementwise + recompute + tp_comm +
// cp_comm + ep_comm + bubble + p2p + dp_comm_exposed + optimizer.
struct TimeBreakdown {
  double compute_s = 0;          // model FLOPs of the slowest stage, all micro-batches
  double elementwise_s = 0;      // memory-bound element-wise kernels (norms, activations, ...)
  double recompute_s = 0;        // extra forward work of activation recompute
  double tp_comm_s = 0;          // tensor-parallel all-gather/reduce-scatter, the exposed part
  double tp_comm_hidden_s = 0;   // the part hidden behind GEMMs (--tp-comm-overlap); not in total
  double cp_comm_s = 0;          // context-parallel K/V ring exchange, the part attention does not hide
  double ep_comm_s = 0;          // expert-parallel all-to-all (dispatch and combine), not overlapped
  double bubble_s = 0;           // pipeline fill/drain: (p-1)/(m*v) of the steady state
  double p2p_s = 0;              // pipeline point-to-point sends
  double dp_comm_s = 0;          // data-parallel gradient reduction (whole; ZeRO-2: one
                                 // reduce-scatter per micro-batch); FSDP: its gathers,
                                 // reduce-scatters and (HSDP) replica all-reduces
  double dp_comm_exposed_s = 0;  // the part not hidden behind the compute
  double optimizer_s = 0;        // optimizer step (memory-bound)
  double total_s = 0;
};

struct PlanCandidate {
  Layout layout;
  MemoryBreakdown memory;
  TimeBreakdown time;
  double step_time_s = 0;
  double tokens_per_s = 0;
  double samples_per_s = 0;
  double mfu = 0;  // model FLOPs / (step time * gpus * peak)
  bool fits = false;
  std::string reason;  // for alternatives: why it lost to the chosen plan
};

// The best MFU published for a GPU type and a range of model sizes (total parameters in
// [min_params, max_params)), as the planner counts model FLOPs: the ceiling a prediction is
// compared with (docs/planner.md, "Checked against published training runs";
// planner_published_test.cpp checks the rows they come from).
struct PublishedCeiling {
  const char* gpu;
  double min_params, max_params;
  double mfu;
  const char* run;  // which run, and where it was published
};
// The ceiling for the plan's GPU type and model size, when one was published.
std::optional<PublishedCeiling> PublishedCeilingFor(const std::string& gpu, double params);

// A nearby global batch that plans markedly better (see kNearbyBatchFraction).
struct BatchAdvice {
  int64_t global_batch = 0;
  PlanCandidate plan;  // the plan of that batch
};

struct Plan {
  std::string model_name;
  double params = 0;   // counted from the architecture
  int64_t layers = 0;  // transformer layers (for per-virtual-stage layer counts)
  // A mixture of experts (for the framework arguments); 0 for a dense model.
  int64_t experts = 0, experts_per_token = 0, expert_ffn_hidden = 0, shared_experts = 0;
  double active_params = 0;  // per token (dense: params)
  std::string gpu_name;
  int64_t gpus = 0, gpus_per_node = 0, global_batch = 0, seq_len = 0;
  double mem_usable_gib = 0;
  double mem_headroom = kDefaultMemoryHeadroom;  // the fraction of the GPU's memory kept free
  bool tp_comm_overlap = false;  // planned with Megatron's --tp-comm-overlap (PlanRequest)
  // The chosen layout reduces its gradients in bf16 because no layout fits with fp32 (the
  // precision was not pinned); its text says so.
  bool grad_reduce_fallback = false;
  int64_t candidates_evaluated = 0;
  PlanCandidate chosen;
  std::vector<PlanCandidate> alternatives;  // ranked, best first
  // The fastest layout, when it was set aside for a simpler one (fewer pipeline stages, then
  // smaller tensor, then context parallelism) predicted within kTimeModelError of it; its
  // reason says by how much it was faster.
  std::optional<PlanCandidate> set_aside;
  // Set when a nearby batch plans markedly better (not with pinned sizes or micro-batch).
  std::optional<BatchAdvice> batch_advice;
  // With pinned sizes (tp/pp/dp): the best layout found without the pins, when one plans.
  std::optional<PlanCandidate> unpinned;
  // The calibration every time of this plan was divided by (PlanRequest::calibration).
  std::optional<PlanCalibration> calibration;
  // Set when the chosen plan is predicted above the best MFU published for its GPU type and
  // model size: its text and JSON say so and why.
  std::optional<PublishedCeiling> above_published;
};

// How p pipeline stages hold L layers: evenly when p divides L; otherwise every middle stage holds
// ceil(L/p) and the first and last stages what is left (the first one more when it is odd): the
// split Llama 3 405B (126 layers, 16 stages: 7, 8 x 14, 7) and BLOOM 176B (70 layers, 12 stages:
// 5, 6 x 10, 5) trained with, and what Megatron-LM's --decoder-first-pipeline-num-layers /
// --decoder-last-pipeline-num-layers express. The first and last stages carry the embedding and
// the output layer, so holding fewer layers there also balances them.
struct StageLayers {
  int64_t first = 0, middle = 0, last = 0;  // middle: each of the p-2 others (p > 2)
  bool even() const { return first == middle && last == middle; }
  int64_t largest() const { return std::max(first, std::max(middle, last)); }
};
// nullopt when p < 1 or p > L, or when the first or last stage would be left without a layer.
std::optional<StageLayers> SplitStages(int64_t layers, int64_t pp);
// The layers of each of the p*v model chunks, in Megatron's order (chunk c runs on stage c % p):
// SplitStages over p*v chunks; empty when they cannot hold the layers that way.
std::vector<int64_t> ChunkLayers(int64_t layers, int64_t pp, int64_t vpp);
// The layers of each pipeline stage (the sum of its v chunks); empty as above.
std::vector<int64_t> StageLayerCounts(int64_t layers, int64_t pp, int64_t vpp);

Result<Plan> PlanJob(const PlanRequest& request);

// Evaluates one fully specified layout (no search, no constraint checks beyond arithmetic).
// For tests, the docs tables and the "why it lost" explanations.
PlanCandidate EvaluateLayout(const PlanRequest& request, const Layout& layout);

// --- the formulas (docs/planner.md), exposed for unit tests --------------------------------
// Bytes of model state per parameter for mixed-precision Adam as Megatron-LM's --bf16 keeps it
// (its distributed optimizer guide): 2 (bf16 weights) + 4 (fp32 main grads; 2 with bf16 grads) +
// 12 (fp32 master, momentum, variance) = 18 (16); with the optimizer states sharded over d (ZeRO
// stage 1, Rajbhandari et al. 2020): 6 + 12/d (4 + 12/d); with the gradients sharded too (ZeRO
// stage 2): 2 + 16/d (2 + 14/d), beside which ZeRO-2 holds one unsharded gradient bucket
// (GradBucketBytes).
double ModelStateBytesPerParam(DataParallelSharding sharding, int64_t dp,
                               GradReduce grads = GradReduce::kFp32);
// The transient unsharded gradients of ZeRO-2 and FSDP: one unit's (a transformer layer, or the
// embedding and output layer together, whichever is larger; parameters per GPU at tensor-parallel
// size t), in bf16 as autograd writes them and, with fp32 reduction, the fp32 copy the
// reduce-scatter sends.
double GradBucketBytes(const ModelArch& m, int64_t t, GradReduce grads);
// FSDP (ZeRO-3, Rajbhandari et al. 2020 P_os+g+p): the same 18 (16) bytes, all of them sharded
// over the shard group: 18 / shard (PyTorch FSDP2 keeps 16: fp32 sharded parameters that are also
// the master weights; DeepSpeed ZeRO-3 and Megatron-FSDP keep bf16 and fp32 copies; the planner
// counts the larger).
double FsdpStateBytesPerParam(int64_t shard, GradReduce grads = GradReduce::kFp32);
// Activation bytes of one transformer layer for one micro-batch of b sequences of length s on one
// GPU (Korthikanti et al. 2022, generalized to GQA and gated MLPs; equals s*b*h*(34 + 5*a*s/h)
// for a GPT layer without parallelism or recompute).
// With context parallelism (cp > 1) each rank stores the linear terms of its s/cp tokens. Fused
// (flash) attention, which context parallelism always runs, stores no attention scores; the
// default here is unfused, Korthikanti's accounting.
double ActivationBytesPerLayer(const ModelArch& m, int64_t seq_len, int64_t micro_batch, int64_t tp,
                               bool sequence_parallel, Recompute recompute, int64_t cp = 1,
                               bool fused_attention = false);
// Context parallelism is searched only where every rank keeps at least this many tokens of a
// sequence (so from 8K tokens on: cp=2 at 8K, as NVIDIA runs Llama 3.1), and with s divisible by
// 2*cp (Megatron's load balancing).
inline constexpr int64_t kContextParallelMinTokens = 4096;
// The recompute of a layout of a model of `layers` layers in words: "no recompute", "selective
// recompute", "full recompute" (every layer), "full recompute of 5 of 32 layers" (Megatron's
// block method: the others keep their activations), "full recompute of 1 of 2 layers per chunk"
// (with a pipeline: of each chunk's); without `layers`, "full recompute of 5 layers per chunk".
std::string RecomputePhrase(const Layout& layout, int64_t layers = 0);
// "FSDP over 64" (one shard group of all the data-parallel ranks), "HSDP 8 x 4" (shard groups of
// 8, 4 replicas), or "" when the layout is not FSDP.
std::string FsdpPhrase(const Layout& layout);
// "distributed optimizer", "ZeRO-2 (optimizer states and gradients sharded)", or "" when the
// data-parallel ranks shard nothing (or the layout is FSDP).
std::string ShardingPhrase(const Layout& layout);
// Model FLOPs of one step (forward + backward, no recompute) for `batch` sequences: 3 * (L * (2 *
// b*s * W + 4 * b * s^2 * h) + 2 * b*s*h*V) (Narayanan et al. 2021, generalized).
double ModelFlopsPerStep(const ModelArch& m, int64_t seq_len, int64_t batch);

// --- plan I/O ------------------------------------------------------------------------------
// JSON object with at least tp, pp, dp, micro_batch, grad_accum, vpp, recompute,
// optimizer_sharding, grad_sharding (ZeRO-2; plans without it: false), mem_per_gpu_gib,
// step_time_s, tokens_per_s, samples_per_s, mfu, memory, time, alternatives.
// `with_alternatives=false` drops the list (for the job environment).
std::string PlanToJson(const Plan& plan, bool with_alternatives = true);
// Parses PlanToJson's output (with or without alternatives); errors name the key.
Result<Plan> PlanFromJson(const std::string& json);

// The job environment of one task: AUTOPAR_TP/PP/DP, AUTOPAR_MICRO_BATCH, AUTOPAR_GRAD_ACCUM,
// AUTOPAR_GLOBAL_BATCH, AUTOPAR_SEQ_LEN, AUTOPAR_RECOMPUTE, AUTOPAR_RECOMPUTE_LAYERS (layers per
// chunk recomputed in full; 0 = all), AUTOPAR_OPTIMIZER_SHARDING (0/1; 1 with ZeRO-2 too),
// AUTOPAR_GRAD_SHARDING (0/1: ZeRO-2), AUTOPAR_GRAD_REDUCE (fp32/bf16), AUTOPAR_VPP,
// AUTOPAR_FSDP_SHARD / AUTOPAR_FSDP_REPLICATE (0 when the plan is not FSDP),
// AUTOPAR_TP_RANK/PP_RANK/DP_RANK (with FSDP also AUTOPAR_FSDP_SHARD_RANK = dp_rank % shard and
// AUTOPAR_FSDP_REPLICATE_RANK = dp_rank / shard), AUTOPAR_PLAN_JSON, AUTOPAR_MEGATRON_ARGS,
// AUTOPAR_DEEPSPEED_CONFIG.
// Rank order is Megatron-LM's default: tp fastest, then dp, then pp:
//   tp_rank = rank % tp; dp_rank = (rank / tp) % dp; pp_rank = rank / (tp * dp).
// `rank` outside [0, tp*pp*dp) gives no per-rank variables.
std::vector<std::pair<std::string, std::string>> PlanTaskEnv(const Plan& plan, int rank);
std::string MegatronArgs(const Plan& plan);
std::string DeepSpeedConfigJson(const Plan& plan);
// The plan as torchtitan's job config overrides ("--parallelism.tensor_parallel_degree 2 ...":
// parallelism, training batch and sequence, activation_checkpoint) and as Accelerate's Megatron-LM
// plugin config ("distributed_type: MEGATRON_LM, ... megatron_lm_config: {megatron_lm_tp_degree:
// 2, ...}"), each on one line; FrameworksJson: all four (Megatron-LM, DeepSpeed, torchtitan,
// Accelerate) as one JSON object, what `autopar plan` shows (docs/planner.md).
std::string TorchtitanArgs(const Plan& plan);
std::string AccelerateConfig(const Plan& plan);

// "--global-batch=2048 (+1) plans tp=4 pp=6 dp=16 at 62.2% MFU against 49.5% for 2047 (it
// allows a data-parallel size above 1)"; "" without advice.
std::string BatchAdviceText(const Plan& plan);

// "62.3% is above the best MFU published for a100-80gb at 50-200B parameters: 51.4% (GPT-3 175B,
// ...); ..." or "" when the plan is not (Plan::above_published).
std::string AbovePublishedText(const Plan& plan);

// One or more lines for people: layout, memory breakdown, step time, throughput, alternatives.
std::string PlanToText(const Plan& plan);

}  // namespace autopar
