// The planner's memory and time model: what one layout of a job needs per GPU and how long its
// step takes (docs/planner.md has every formula with its source). The search over the layouts is
// planner_search.cpp.
#include "core/plan/planner.h"

#include <algorithm>
#include <cmath>

#include "core/plan/planner_internal.h"

namespace autopar {
using planner_detail::CeilDiv;
using planner_detail::D;
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Bytes per parameter of the bf16 weights.
constexpr double kWeightBytes = 2.0;
// Bytes per parameter of mixed-precision Adam's state: fp32 master weights, momentum, variance.
constexpr double kOptimizerStateBytes = 12.0;
// NCCL reaches about this fraction of a link's bandwidth in large collectives (nccl-tests "busbw").
constexpr double kLinkEfficiency = 0.8;
// Optimizer step traffic per parameter of the local shard beside reading its main grad:
// read+write fp32 master, momentum and variance (24), write the bf16 weight (2).
constexpr double kOptimizerBytesPerParam = 26.0;
// GEMM efficiency falls for narrow per-GPU matrices and few tokens per micro-batch:
// eff = base * w/(w + kWidthHalf) * n/(n + kTokensHalf), w = h/t, n = b*s (docs/planner.md).
constexpr double kWidthHalf = 480.0;
constexpr double kTokensHalf = 64.0;
// The fraction of the tensor-parallel collectives Megatron's --tp-comm-overlap hides behind the
// GEMMs next to them (as long as those GEMMs last). NVIDIA's shipped Transformer Engine overlap
// configurations (Megatron-Bridge, training/comm_overlap.py, the H100 presets for GPT-3 175B,
// Llama 3 70B and 405B) overlap every one of a layer's eight collectives: the forward
// all-gathers and backward reduce-scatters by ring exchange (one chunk per rank, only the first
// GEMM chunk waits), the forward reduce-scatters pipelined in 4 splits (the last split's
// transfer is exposed: 2 of 8 collectives x 1/4 = 1/16) and the backward ones in bulk behind
// the weight-gradient GEMMs. Those kernels also take 16-32 of H100's 132 SMs from the GEMMs they
// hide behind (num_sm), about 20%: we count 3/4 as hidden, not 15/16. An estimate from the
// structure, not a measurement (docs/planner.md).
constexpr double kTensorParallelOverlap = 0.75;
// What the data-parallel and FSDP collectives hidden behind the compute still cost, as a
// fraction of their time: NCCL's kernels take SMs and HBM bandwidth from the GEMMs they run
// beside, and FSDP copies every gathered and reduced unit in and out of its flat buffers. Fitted
// to torchtitan's FSDP2 runs on 64 A100 (docs/planner.md, "FSDP"): free, its three rows were
// predicted 6.2-9.8 MFU points above what they measured; with 0.5, 2.0-4.6.
constexpr double kHiddenCommCost = 0.5;
// HBM passes over a layer's stored activations made by its element-wise kernels (forward: one
// write + one read; backward: about two reads + one write + one more for the gradient).
constexpr double kElementwisePasses = 6.0;
// Unfused attention (PlanRequest::unfused_attention): HBM bytes per attention-score element
// (b*a*s*s of them per layer, 2-byte scores) moved by the kernels between QK^T and AV, the GEMMs'
// own reads and writes of the scores being counted with their FLOPs. Megatron-LM's CoreAttention
// (2020-2022): forward, FusedScaleMaskSoftmax reads and writes the scores (4) and dropout reads
// them and writes its output and a 1-byte mask (5); backward, dropout's gradient reads the
// incoming gradient and the mask and writes (5), the softmax gradient reads the gradient and the
// softmax output and writes (6). Without dropout: forward 4, backward 6. Recompute (full, or
// selective: the attention core) repeats the forward kernels.
constexpr double kUnfusedScoreBytesForward = 9.0;
constexpr double kUnfusedScoreBytesBackward = 11.0;
constexpr double kUnfusedScoreBytesForwardNoDropout = 4.0;
constexpr double kUnfusedScoreBytesBackwardNoDropout = 6.0;

// Bytes per parameter of the main gradients: fp32 as Megatron-LM with --bf16 accumulates and
// reduces them unless told --grad-reduce-in-bf16 (its distributed optimizer guide: 18 bytes per
// parameter, 6 + 12/d with the optimizer sharded; 16 and 4 + 12/d with bf16 gradients); the
// emitted arguments ask every framework for the same precision (plan_io.cpp).
double GradBytes(GradReduce g) { return g == GradReduce::kBf16 ? 2.0 : 4.0; }

// Matmul weights of one layer a token passes through (no norms/biases): what the layer's GEMMs
// multiply it by (a mixture of experts: its k routed and the shared experts, and the router).
double MatmulWeightsPerLayer(const ModelArch& m) {
  const double h = D(m.hidden);
  const double kv_width = D(m.kv_heads * m.head_dim());
  return 2 * h * D(m.q_width()) + 2 * h * kv_width +
         (m.gated_mlp ? 3.0 : 2.0) * h * D(m.active_ffn()) + h * D(m.experts);
}

// Forward FLOPs of one layer for one micro-batch: 2*b*s*W + 4*b*s^2*h (Narayanan et al. 2021;
// h: the attention width heads * head_dim).
double LayerForwardFlops(const ModelArch& m, int64_t s, int64_t b) {
  return 2 * D(b * s) * MatmulWeightsPerLayer(m) + 4 * D(b) * D(s) * D(s) * D(m.q_width());
}

double LogitForwardFlops(const ModelArch& m, int64_t s, int64_t b) {
  return 2 * D(b * s) * D(m.hidden) * D(m.vocab);
}

// Ring all-reduce of `bytes` over n ranks: 2(n-1)/n * bytes / bw + 2(n-1) * latency.
double AllReduceSeconds(double bytes, int64_t n, double gbps, double latency_us) {
  if (n <= 1) return 0;
  const double steps = 2.0 * D(n - 1);
  return steps / D(n) * bytes / (gbps * 1e9 * kLinkEfficiency) + steps * latency_us * 1e-6;
}

// The bandwidth per rank, GB/s, of a collective over a group that spans nodes and whose ranks
// are `stride` apart (rank order tp, cp, dp, pp: a data-parallel group's are t apart). NCCL runs
// one ring per NIC (a channel each), so a group with k ranks in every node drives k of the node's
// NICs: k times the per-GPU network bandwidth, at most NVLink's (nccl-tests' bus bandwidth across
// DGX nodes is the node's NICs together, not one).
double NetworkGbps(const PlanRequest& req, int64_t stride) {
  const int64_t k = std::max<int64_t>(1, req.gpus_per_node / std::max<int64_t>(1, stride));
  return std::min(req.gpu.net_gbps * D(k), req.gpu.nvlink_gbps);
}

struct StageMemory {
  double params = 0;   // dense parameters per GPU on this stage
  double experts = 0;  // routed experts' parameters per GPU (mixtures of experts)
  double activations = 0;
  double transient = 0;
};

}  // namespace

const char* RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "none";
}

std::string RecomputePhrase(const Layout& l, int64_t layers) {
  if (l.recompute == Recompute::kNone) return "no recompute";
  std::string out = std::string(RecomputeName(l.recompute)) + " recompute";
  if (l.recompute != Recompute::kFull || l.recompute_layers <= 0) return out;
  const int64_t k = l.recompute_layers;
  if (layers <= 0) {
    return out + " of " + std::to_string(k) + (k == 1 ? " layer" : " layers") + " per chunk";
  }
  // Of the largest chunk's layers, as the model costs it (SplitRecompute).
  const std::vector<int64_t> stages = StageLayerCounts(layers, l.pp, l.vpp);
  const int64_t stage = stages.empty() ? CeilDiv(layers, l.pp)
                                       : *std::max_element(stages.begin(), stages.end());
  const int64_t chunk = CeilDiv(stage, std::max<int64_t>(1, l.vpp));
  return out + " of " + std::to_string(k) + " of " + std::to_string(chunk) + " layers" +
         (l.pp * l.vpp > 1 ? " per chunk" : "");
}

std::string ShardingPhrase(const Layout& l) {
  switch (l.dp_sharding) {
    case DataParallelSharding::kNone:
      return "";
    case DataParallelSharding::kOptimizer:
      return "distributed optimizer";
    case DataParallelSharding::kOptimizerGrads:
      return "ZeRO-2 (optimizer states and gradients sharded)";
  }
  return "";
}

std::string FsdpPhrase(const Layout& l) {
  if (!l.fsdp()) return "";
  if (l.fsdp_replicate() > 1) {
    return "HSDP " + std::to_string(l.fsdp_shard) + " x " + std::to_string(l.fsdp_replicate());
  }
  return "FSDP over " + std::to_string(l.fsdp_shard);
}

const char* GradReduceName(GradReduce g) { return g == GradReduce::kBf16 ? "bf16" : "fp32"; }

Result<GradReduce> ParseGradReduce(const std::string& name) {
  if (name == "fp32") return GradReduce::kFp32;
  if (name == "bf16") return GradReduce::kBf16;
  return Status::Error("grad_reduce: unknown value '" + name + "' (fp32, bf16)");
}

Result<Recompute> ParseRecompute(const std::string& name) {
  if (name == "none") return Recompute::kNone;
  if (name == "selective") return Recompute::kSelective;
  if (name == "full") return Recompute::kFull;
  return Status::Error("recompute: unknown value '" + name + "' (none, selective, full)");
}

namespace {

// Bytes of model state per parameter, by what they hold.
struct ParamBytes {
  double weights = 0, grads = 0, optimizer = 0;
  double total() const { return weights + grads + optimizer; }
};

// 2 bf16 weights + the main grads + 12 fp32 (master weights, Adam momentum, Adam variance), the
// optimizer states (and with ZeRO-2 the gradients) sharded over the `ranks` that hold the same
// weights.
ParamBytes DataParallelBytes(DataParallelSharding sharding, int64_t ranks, GradReduce grads) {
  ParamBytes b{kWeightBytes, GradBytes(grads), kOptimizerStateBytes};
  if (ranks <= 1) return b;
  if (sharding != DataParallelSharding::kNone) b.optimizer /= D(ranks);
  if (sharding == DataParallelSharding::kOptimizerGrads) b.grads /= D(ranks);
  return b;
}

// FSDP: every state sharded over the shard group.
ParamBytes FsdpBytes(int64_t shard, GradReduce grads) {
  const double n = D(std::max<int64_t>(1, shard));
  return ParamBytes{kWeightBytes / n, GradBytes(grads) / n, kOptimizerStateBytes / n};
}

}  // namespace

double ModelStateBytesPerParam(DataParallelSharding sharding, int64_t dp, GradReduce grads) {
  return DataParallelBytes(sharding, dp, grads).total();
}

double FsdpStateBytesPerParam(int64_t shard, GradReduce grads) {
  return FsdpBytes(shard, grads).total();
}

double ActivationBytesPerLayer(const ModelArch& m, int64_t seq_len, int64_t micro_batch, int64_t tp,
                               bool sequence_parallel, Recompute recompute, int64_t cp,
                               bool fused_attention) {
  const double c = D(std::max<int64_t>(1, cp));
  const double s = D(seq_len) / c, b = D(micro_batch), h = D(m.hidden), a = D(m.heads);
  const double t = D(std::max<int64_t>(1, tp));
  const double sb = s * b;  // this rank's tokens
  if (recompute == Recompute::kFull) {
    // Only each layer's input (2 bytes/value) is kept; sharded over t with sequence parallelism.
    return 2 * sb * h / (sequence_parallel ? t : 1.0);
  }
  const double kv_width = D(m.kv_heads * m.head_dim());
  const double q = D(m.q_width());  // h, unless heads are not hidden/heads wide
  // A mixture of experts runs each token through its k experts (and the shared ones): their
  // activations, and the k copies of the token the dispatch makes, 2*k*sbh.
  const double f = D(m.active_ffn());
  const double dispatch = m.moe() ? 2 * D(m.experts_per_token) * sb * h : 0.0;
  // Korthikanti et al. 2022, Sec. 4.1, per term (bytes), generalized to GQA and gated MLPs:
  //  attention: QKV input 2sbh, Q 2sbh, K and V 2*2sb*kv, output-proj input 2sbh, dropout mask sbh
  //             -> 7sbh + 4sb*kv (= 11sbh without GQA); scores: softmax out 2as^2b, dropout mask
  //             as^2b, dropout out 2as^2b -> 5as^2b.
  //  MLP: input 2sbh, dropout mask sbh, activation input and output 2sbf each (gated: 3 x 2sbf).
  //  two layer norms: 2 x 2sbh.
  // For a GPT layer (kv = h, f = 4h, not gated) this is sbh(34 + 5as/h).
  // Without dropout (Llama) the three masks and the dropout output are not stored: -sbh in
  // attention, -sbh in the MLP, scores 2as^2b (the softmax output only).
  const double no_dropout = m.dropout ? 0.0 : 1.0;
  const double attention_linear = (3 - no_dropout) * sb * h + 4 * sb * q + 4 * sb * kv_width;
  const double scores = (m.dropout ? 5.0 : 2.0) * a * s * s * b;
  const double mlp = (3 - no_dropout) * sb * h + (m.gated_mlp ? 6.0 : 4.0) * sb * f + dispatch;
  const double norms = 4 * sb * h;
  const double linear = attention_linear + mlp + norms;
  // Fused (flash) attention never stores the scores: its backward kernel recomputes them from
  // Q, K, V and each row's softmax statistics (fp32 log-sum-exp, 4asb: under 0.1% of a layer's
  // activations, not counted), regenerating a dropout mask from its seed. Context parallelism
  // always runs it (Megatron's CP requires Transformer Engine's); selective recompute drops the
  // scores of unfused attention.
  const bool fused = fused_attention || cp > 1;
  const double quadratic = fused || recompute == Recompute::kSelective ? 0.0 : scores;
  if (tp <= 1) return linear + quadratic;
  if (sequence_parallel) return (linear + quadratic) / t;
  // Tensor parallel without sequence parallelism: norms, dropout masks and the inputs of the
  // first linear of each block (10 sbh for GPT) stay replicated.
  const double replicated = (10 - 2 * no_dropout) * sb * h;
  return replicated + (linear - replicated) / t + quadratic / t;
}

double ModelFlopsPerStep(const ModelArch& m, int64_t seq_len, int64_t batch) {
  return 3.0 * (D(m.layers) * LayerForwardFlops(m, seq_len, batch) +
                LogitForwardFlops(m, seq_len, batch));
}

std::optional<StageLayers> SplitStages(int64_t layers, int64_t pp) {
  if (pp < 1 || layers < pp) return std::nullopt;
  StageLayers s;
  if (layers % pp == 0 || pp == 1) {
    s.first = s.middle = s.last = layers / pp;
    return s;
  }
  s.middle = CeilDiv(layers, pp);
  const int64_t ends = pp == 2 ? layers : layers - (pp - 2) * s.middle;  // first + last
  s.first = CeilDiv(ends, 2);
  s.last = ends / 2;
  if (pp == 2) s.middle = s.first;
  if (s.last < 1) return std::nullopt;
  return s;
}

std::vector<int64_t> ChunkLayers(int64_t layers, int64_t pp, int64_t vpp) {
  const int64_t n = pp * std::max<int64_t>(1, vpp);
  auto split = SplitStages(layers, n);
  if (!split) return {};
  std::vector<int64_t> out(static_cast<size_t>(n), split->middle);
  out.front() = split->first;
  out.back() = split->last;
  return out;
}

std::vector<int64_t> StageLayerCounts(int64_t layers, int64_t pp, int64_t vpp) {
  std::vector<int64_t> chunks = ChunkLayers(layers, pp, vpp);
  if (chunks.empty()) return {};
  std::vector<int64_t> out(static_cast<size_t>(pp), 0);
  for (size_t c = 0; c < chunks.size(); ++c) out[c % static_cast<size_t>(pp)] += chunks[c];
  return out;
}

namespace {

// What the memory and time model needs of one layout: its sizes, the micro-batches of a step and
// the layers of the largest pipeline stage, split by how they are recomputed.
struct LayoutShape {
  int64_t s = 0;                       // tokens per sequence
  int64_t t = 1, p = 1, d = 1, b = 1;  // tp, pp, dp, micro-batch
  int64_t v = 1;                       // interleaved chunks per stage (vpp, at least 1)
  int64_t cx = 1;                      // context parallel: this rank holds s/cx tokens
  int64_t ep = 1;
  int64_t mb = 1;  // micro-batches per step and data-parallel rank
  // Every stage is costed as the one holding the most layers (with uneven stages an upper bound).
  int64_t layers_per_stage = 0;
  int64_t full_layers = 0;   // of them, recomputed in full
  int64_t other_layers = 0;  // the others, recomputed as other_rc says
  Recompute other_rc = Recompute::kNone;
};

// Full recompute may cover only k layers of each of the v chunks of a stage (Megatron's
// --recompute-method block); the stage's other layers then use selective recompute. Sets the
// layout's recompute_layers to k, or 0 when that is every layer of a chunk.
void SplitRecompute(Layout* l, LayoutShape* sh) {
  const int64_t chunk_layers = CeilDiv(sh->layers_per_stage, sh->v);
  sh->full_layers = 0;  // per stage
  if (l->recompute == Recompute::kFull) {
    const int64_t k =
        l->recompute_layers > 0 ? std::min(l->recompute_layers, chunk_layers) : chunk_layers;
    l->recompute_layers = k == chunk_layers ? 0 : k;
    sh->full_layers = std::min(sh->layers_per_stage, k * sh->v);
  } else {
    l->recompute_layers = 0;
  }
  sh->other_layers = sh->layers_per_stage - sh->full_layers;
  sh->other_rc = l->recompute == Recompute::kFull ? Recompute::kSelective : l->recompute;
}

// Completes `l` as it is costed (sequence parallelism whenever tp > 1, the accumulation steps the
// global batch needs, cp and ep of at least 1, ep 1 for a dense model) and returns its shape.
LayoutShape ShapeLayout(const PlanRequest& req, Layout* l) {
  const ModelArch& m = req.model;
  l->sequence_parallel = l->tp > 1;
  l->grad_accum =
      std::max<int64_t>(1, req.global_batch / std::max<int64_t>(1, l->micro_batch * l->dp));
  l->cp = std::max<int64_t>(1, l->cp);
  l->ep = m.moe() ? std::max<int64_t>(1, l->ep) : 1;
  LayoutShape sh;
  sh.s = req.seq_len > 0 ? req.seq_len : m.seq_len;
  sh.t = l->tp;
  sh.p = l->pp;
  sh.d = l->dp;
  sh.b = l->micro_batch;
  sh.v = std::max<int64_t>(1, l->vpp);
  sh.cx = l->cp;
  sh.ep = l->ep;
  sh.mb = l->grad_accum;
  const std::vector<int64_t> stages = StageLayerCounts(m.layers, sh.p, sh.v);
  sh.layers_per_stage =
      stages.empty() ? CeilDiv(m.layers, sh.p) : *std::max_element(stages.begin(), stages.end());
  SplitRecompute(l, &sh);
  return sh;
}

// --- memory -----------------------------------------------------------------------------

// The activations one micro-batch leaves stored on the largest stage.
double StageActivationBytes(const ModelArch& m, const Layout& l, const LayoutShape& sh, bool fused) {
  return D(sh.full_layers) * ActivationBytesPerLayer(m, sh.s, sh.b, sh.t, l.sequence_parallel,
                                                     Recompute::kFull, sh.cx, fused) +
         D(sh.other_layers) * ActivationBytesPerLayer(m, sh.s, sh.b, sh.t, l.sequence_parallel,
                                                      sh.other_rc, sh.cx, fused);
}

// The working set of recompute: one layer's activations rebuilt during backward.
double RecomputeWorkingBytes(const ModelArch& m, const Layout& l, const LayoutShape& sh, bool fused) {
  if (sh.full_layers > 0) {
    return ActivationBytesPerLayer(m, sh.s, sh.b, sh.t, l.sequence_parallel, Recompute::kNone,
                                   sh.cx, fused);
  }
  if (l.recompute == Recompute::kSelective && sh.cx == 1 && !fused) {
    return (m.dropout ? 5.0 : 2.0) * D(m.heads) * D(sh.s) * D(sh.s) * D(sh.b) / D(sh.t);
  }
  return 0;
}

struct PipelineEnds {
  StageMemory first, last;  // with p == 1, `first` is the one stage
};

// The first stage holds the embedding and the most micro-batches in flight, the last the output
// layer and the logits: one of them is the most loaded.
PipelineEnds CostPipelineEnds(const ModelArch& m, const Layout& l, const LayoutShape& sh, bool fused) {
  const ParamCount pc = CountParams(m);
  const int64_t t = sh.t, p = sh.p, v = sh.v, ep = sh.ep;
  const double tied_copy = (m.tied_embeddings && p > 1) ? D(m.vocab) * D(m.hidden) : 0.0;
  const double act_stage = StageActivationBytes(m, l, sh, fused);
  const double recompute_working = RecomputeWorkingBytes(m, l, sh, fused);
  // Korthikanti et al. 2022 Sec. 4.2.3: with 1F1B the first stage holds min(p, m) micro-batches;
  // interleaving multiplies that by (1 + (p-1)/(p*v)).
  const double in_flight = D(std::min(p, sh.mb)) * (v > 1 ? 1.0 + D(p - 1) / D(p * v) : 1.0);
  // Cross-entropy logits in fp32 (Korthikanti et al. 2022 Sec. 4.3: 4sbv/t).
  const double logits = 4 * D(sh.s / sh.cx) * D(sh.b) * D(m.vocab) / D(t);
  PipelineEnds ends;
  StageMemory& first = ends.first;
  StageMemory& last = ends.last;
  first.params = (D(sh.layers_per_stage) * pc.per_layer + pc.embedding) / D(t);
  // Each rank holds 1/ep of the experts, each of them split over the expert tensor-parallel size.
  const int64_t etp = l.expert_tp();
  first.experts = last.experts = D(sh.layers_per_stage) * pc.routed_per_layer / D(etp * ep);
  first.activations = act_stage * in_flight;
  first.transient = recompute_working;
  if (p == 1) {
    first.params = (pc.total - D(m.layers) * pc.routed_per_layer) / D(t);
    first.experts = D(m.layers) * pc.routed_per_layer / D(etp * ep);
    first.transient += logits;
  }
  // With uneven stages every stage is costed as the largest one (an upper bound).
  last.params = (D(sh.layers_per_stage) * pc.per_layer + pc.output + tied_copy) / D(t);
  last.activations = act_stage * (v > 1 ? 1.0 + D(p - 1) / D(p * v) : 1.0);
  last.transient = recompute_working + logits;
  return ends;
}

// The ranks of a pipeline stage that hold the same experts (Megatron-Core's expert data-parallel
// size): the stage's t*d*c ranks over expert_tp*ep.
int64_t ExpertReplicas(const Layout& l) {
  return l.tp * l.dp * l.cp / (l.expert_tp() * std::max<int64_t>(1, l.ep));
}

// Bytes of model state per parameter, of the dense weights and of the routed experts'.
struct StateBytes {
  ParamBytes dense, experts;
};

StateBytes StateBytesPerParam(const Layout& l, const LayoutShape& sh) {
  StateBytes out;
  if (l.fsdp()) {  // dense only (ep = 1): every state sharded over the shard group
    out.dense = out.experts = FsdpBytes(l.fsdp_shard, l.grad_reduce);
    return out;
  }
  // Gradients are reduced, and the distributed optimizer (and ZeRO-2) shards, over the d*c ranks
  // that hold the same weights (Megatron's data-parallel group with context parallelism).
  out.dense = DataParallelBytes(l.dp_sharding, sh.d * sh.cx, l.grad_reduce);
  // Expert weights are shared by the ranks that hold the same experts (the expert data-parallel
  // group, ExpertReplicas).
  out.experts = DataParallelBytes(l.dp_sharding, ExpertReplicas(l), l.grad_reduce);
  return out;
}

double StageBytes(const StageMemory& sm, const StateBytes& state) {
  return sm.params * state.dense.total() + sm.experts * state.experts.total() + sm.activations +
         sm.transient;
}

// The weights FSDP gathers per tensor-parallel rank, by unit: each transformer layer is one unit
// (torchtitan and Accelerate wrap every block), the embedding, final norm and output layer the
// root unit.
struct FsdpUnits {
  double layer = 0, root = 0;  // parameters per GPU when gathered
};

FsdpUnits FsdpUnitsOf(const ModelArch& m, int64_t t) {
  const ParamCount pc = CountParams(m);
  return FsdpUnits{pc.per_layer / D(t), (pc.embedding + pc.output) / D(t)};
}

}  // namespace

double GradBucketBytes(const ModelArch& m, int64_t t, GradReduce grads) {
  const FsdpUnits u = FsdpUnitsOf(m, t);
  const double unsharded_grad =
      kWeightBytes + (grads == GradReduce::kBf16 ? 0.0 : GradBytes(GradReduce::kFp32));
  return unsharded_grad * std::max(u.layer, u.root);
}

namespace {

// FSDP's working set beyond the shards: two layers gathered in bf16 at a time (the one running
// and the one prefetched), the root unit gathered from the first forward to the last backward,
// and in the backward pass one unit's gradients unsharded (GradBucketBytes).
double FsdpGatheredBytes(const ModelArch& m, int64_t t, GradReduce grads) {
  const FsdpUnits u = FsdpUnitsOf(m, t);
  return kWeightBytes * (2 * u.layer + u.root) + GradBucketBytes(m, t, grads);
}

// Fills `memory` with the most loaded stage's breakdown and returns that stage (its parameters
// are what the data-parallel reduction and the optimizer step move).
StageMemory CostMemory(const PlanRequest& req, const Layout& l, const LayoutShape& sh,
                       MemoryBreakdown* memory) {
  PipelineEnds ends = CostPipelineEnds(req.model, l, sh, !req.unfused_attention);
  if (l.fsdp()) ends.first.transient += FsdpGatheredBytes(req.model, sh.t, l.grad_reduce);
  // ZeRO-2 (planned with p = 1) reduce-scatters each unit's gradients as the backward pass
  // produces them: one unit's are unsharded at a time.
  if (l.grad_sharding()) ends.first.transient += GradBucketBytes(req.model, sh.t, l.grad_reduce);
  const StateBytes state = StateBytesPerParam(l, sh);
  const StageMemory& worst =
      (sh.p == 1 || StageBytes(ends.first, state) >= StageBytes(ends.last, state)) ? ends.first
                                                                                   : ends.last;
  auto gib = [&](double ParamBytes::*part) {
    return (worst.params * state.dense.*part + worst.experts * state.experts.*part) / kGiB;
  };
  memory->weights_gib = gib(&ParamBytes::weights);
  memory->grads_gib = gib(&ParamBytes::grads);
  memory->optimizer_gib = gib(&ParamBytes::optimizer);
  memory->activations_gib = worst.activations / kGiB;
  memory->transient_gib = worst.transient / kGiB;
  memory->total_gib = StageBytes(worst, state) / kGiB;
  return worst;
}

// --- time -------------------------------------------------------------------------------

// Seconds of one micro-batch on the largest stage, by part.
struct MicroBatchTimes {
  double compute = 0, elementwise = 0, recompute = 0;
  double tp = 0, cp = 0, ep = 0, p2p = 0;  // communication not overlapped
};

// The FLOP/s a GPU's GEMMs reach on this layout's per-GPU matrices.
double GemmFlops(const GpuSpec& g, const ModelArch& m, const LayoutShape& sh) {
  const double peak = g.bf16_tflops * 1e12;
  const double width = D(m.hidden) / D(sh.t);
  const double tokens = D(sh.b * sh.s / sh.cx);
  const double eff =
      g.matmul_efficiency * (width / (width + kWidthHalf)) * (tokens / (tokens + kTokensHalf));
  return peak * eff;
}

// The model's forward and backward FLOPs, the element-wise work and what recompute repeats.
void CostCompute(const PlanRequest& req, const LayoutShape& sh, double gpu_flops,
                 MicroBatchTimes* out) {
  const ModelArch& m = req.model;
  const int64_t s = sh.s, b = sh.b, t = sh.t, cx = sh.cx;
  // Context parallelism splits every layer's work c ways (attention too: Megatron balances the
  // causal mask by giving each rank two chunks of the sequence).
  const double layer_fwd = LayerForwardFlops(m, s, b) / D(cx);
  // The slowest stage: with p > 1 the last stage also runs the output layer; p == 1 runs all.
  const double stage_fwd = D(sh.layers_per_stage) * layer_fwd + LogitForwardFlops(m, s / cx, b);
  out->compute = 3.0 * stage_fwd / (D(t) * gpu_flops);
  // Memory-bound element-wise work (norms, activation function, dropout, residual adds, rotary):
  // about kElementwisePasses passes of HBM traffic over the layer's stored (linear) activations;
  // it is what makes small hidden sizes less efficient than their GEMMs alone.
  const double hbm = req.gpu.hbm_gbps * 1e9 * kLinkEfficiency;
  const double elementwise_layer =
      kElementwisePasses * ActivationBytesPerLayer(m, s, b, t, t > 1, Recompute::kSelective, cx) /
      hbm;
  // Unfused attention: the softmax and dropout kernels over this rank's a/t heads of b*s*s scores
  // (context parallelism runs fused attention).
  double scores_fwd = 0, scores_bwd = 0;
  if (req.unfused_attention && cx == 1) {
    const double elements = D(b) * D(m.heads) / D(t) * D(s) * D(s);
    scores_fwd = elements *
                 (m.dropout ? kUnfusedScoreBytesForward : kUnfusedScoreBytesForwardNoDropout) / hbm;
    scores_bwd = elements *
                 (m.dropout ? kUnfusedScoreBytesBackward : kUnfusedScoreBytesBackwardNoDropout) /
                 hbm;
  }
  out->elementwise = D(sh.layers_per_stage) * (elementwise_layer + scores_fwd + scores_bwd);
  // Full recompute repeats a layer's forward; selective repeats the attention core (QK^T, AV).
  const double attention_core = 4 * D(b) * D(s) * D(s) * D(m.q_width()) / D(cx);
  out->recompute =
      (D(sh.full_layers) * layer_fwd +
       (sh.other_rc == Recompute::kSelective ? D(sh.other_layers) * attention_core : 0.0)) /
          (D(t) * gpu_flops) +
      D(sh.full_layers) * elementwise_layer / 3.0 +  // the forward third of the element-wise passes
      // and the score kernels of the attention core, which both recomputes repeat.
      (D(sh.full_layers) + (sh.other_rc == Recompute::kSelective ? D(sh.other_layers) : 0.0)) *
          scores_fwd;
}

// Tensor parallelism: per layer, 2 all-reduce-equivalents (all-gather + reduce-scatter with
// sequence parallelism) in forward and 2 in backward, of 2*b*s*h bytes (Narayanan et al. 2021
// Sec. 3.3; Korthikanti et al. 2022 Sec. 4.2.2); full recompute repeats the forward ones. With
// expert tensor parallelism 1 the routed experts need none, but the MoE layer's are still charged
// (an upper bound; shared experts keep them).
double TensorParallelSeconds(const PlanRequest& req, const LayoutShape& sh) {
  const int64_t t = sh.t;
  if (t <= 1) return 0;
  const GpuSpec& g = req.gpu;
  const bool tp_in_node = t <= req.gpus_per_node;
  const double bw = tp_in_node ? g.nvlink_gbps : g.net_gbps;
  const double lat = tp_in_node ? g.nvlink_latency_us : g.net_latency_us;
  const double one =
      AllReduceSeconds(2.0 * D(sh.b * sh.s / sh.cx) * D(req.model.hidden), t, bw, lat);
  return (6.0 * D(sh.full_layers) + 4.0 * D(sh.other_layers)) * one;
}

// Context parallelism (ring attention, Liu et al. 2023; Megatron-LM's p2p CP): per layer, each
// rank passes its K/V chunk (2 x b*s/c*kv_width bf16 values, split over t) around the ring in
// c-1 steps while it computes attention on the chunk it holds; the backward pass moves K/V and
// their gradients (2x). Only what the attention compute does not hide counts; full recompute
// repeats the forward exchange. CP groups are t ranks apart: on NVLink while t*c fits a node.
double ContextParallelSeconds(const PlanRequest& req, const LayoutShape& sh, double gpu_flops) {
  const int64_t s = sh.s, b = sh.b, t = sh.t, cx = sh.cx;
  if (cx <= 1) return 0;
  const ModelArch& m = req.model;
  const GpuSpec& g = req.gpu;
  const bool cp_in_node = t * cx <= req.gpus_per_node;
  const double bw = (cp_in_node ? g.nvlink_gbps : g.net_gbps) * 1e9 * kLinkEfficiency;
  const double lat = (cp_in_node ? g.nvlink_latency_us : g.net_latency_us) * 1e-6;
  const double kv_width = D(m.kv_heads * m.head_dim());
  const double chunk_bytes = 2.0 * 2.0 * D(b * s / cx) * kv_width / D(t);
  const double ring = D(cx - 1) * (chunk_bytes / bw + lat);
  const double attention = 4 * D(b) * D(s) * D(s) * D(m.q_width()) / D(cx * t) / gpu_flops;
  const double fwd = std::max(0.0, ring - attention);
  const double bwd = std::max(0.0, 2.0 * ring - 2.0 * attention);
  return D(sh.layers_per_stage) * (fwd + bwd) + D(sh.full_layers) * fwd;
}

// Expert parallelism (Lepikhin et al. 2020; Megatron-Core's all-to-all dispatcher): per MoE
// layer and micro-batch, each rank sends its tokens' k copies (b*s/c/t tokens of 2h bytes) to
// the ranks of their experts and gets them back: 2 all-to-alls forward, 2 backward, (ep-1)/ep
// of the bytes leaving the rank; full recompute repeats the forward ones. Not overlapped.
// Expert-parallel ranks are t*c apart (with expert tensor parallelism 1: consecutive, the tokens
// of a sequence-parallel rank dispatched from it): on NVLink while the group fits a node.
double ExpertParallelSeconds(const PlanRequest& req, const Layout& l, const LayoutShape& sh) {
  const int64_t ep = sh.ep;
  if (ep <= 1) return 0;
  const ModelArch& m = req.model;
  const GpuSpec& g = req.gpu;
  const int64_t span = l.expert_tp() == 1 ? ep : sh.t * sh.cx * ep;
  const bool ep_in_node = span <= req.gpus_per_node;
  const double bw = (ep_in_node ? g.nvlink_gbps : g.net_gbps) * 1e9 * kLinkEfficiency;
  const double lat = (ep_in_node ? g.nvlink_latency_us : g.net_latency_us) * 1e-6;
  const double bytes = 2.0 * D(sh.b * sh.s / sh.cx) * D(m.experts_per_token) * D(m.hidden) /
                       D(sh.t) * D(ep - 1) / D(ep);
  const double one = bytes / bw + D(ep - 1) * lat;
  return (4.0 * D(sh.layers_per_stage) + 2.0 * D(sh.full_layers)) * one;
}

// Pipeline point-to-point: one activation and one gradient of 2*b*s*h bytes per micro-batch and
// stage boundary, split over the t ranks (scatter/gather, Narayanan et al. 2021 Sec. 4.1),
// v times as many with interleaving. Stages are t*d ranks apart (rank order tp, dp, pp).
double PipelineSeconds(const PlanRequest& req, const LayoutShape& sh) {
  if (sh.p <= 1) return 0;
  const GpuSpec& g = req.gpu;
  const bool crosses_nodes = sh.t * sh.cx * sh.d >= req.gpus_per_node;
  const double bw = crosses_nodes ? g.net_gbps : g.nvlink_gbps;
  const double lat = crosses_nodes ? g.net_latency_us : g.nvlink_latency_us;
  const double bytes = 2.0 * D(sh.b * sh.s / sh.cx) * D(req.model.hidden) / D(sh.t);
  return 2.0 * D(sh.v) * (bytes / (bw * 1e9 * kLinkEfficiency) + lat * 1e-6);
}

// The hidden part of the data-parallel collectives slows the compute it runs beside by
// kHiddenCommCost of its time; charged as exposed communication.
void ChargeHiddenComm(TimeBreakdown* time) {
  time->dp_comm_exposed_s += kHiddenCommCost * (time->dp_comm_s - time->dp_comm_exposed_s);
}

// FSDP (Zhao et al. 2023; torchtitan's FSDP2): per micro-batch, every unit's weights are
// all-gathered in bf16 before its forward and again before its backward (they are freed after
// the forward), and its gradients reduce-scattered (fp32 or bf16) after its backward; HSDP then
// all-reduces the gradient shard over the replicas. Each collective runs behind the compute of
// the unit before it (prefetch): only the first gather of the forward pass (the root unit) and
// the last reduce-scatter of the backward pass (the root's) wait, and whatever does not fit in
// the pass's compute. An all-gather or reduce-scatter is half a ring all-reduce of the gathered
// bytes. Shard groups are t ranks apart (rank order tp, shard, replicate): on NVLink while t*S
// fits a node; replica groups while t*S*R does.
void CostFsdp(const PlanRequest& req, const Layout& l, const LayoutShape& sh,
              const MicroBatchTimes& mbt, TimeBreakdown* time) {
  const GpuSpec& g = req.gpu;
  const int64_t shard = l.fsdp_shard, replicas = l.fsdp_replicate();
  const bool shard_in_node = sh.t * shard <= req.gpus_per_node;
  const bool replica_in_node = sh.t * shard * replicas <= req.gpus_per_node;
  const double bw = shard_in_node ? g.nvlink_gbps : NetworkGbps(req, sh.t);
  const double lat = shard_in_node ? g.nvlink_latency_us : g.net_latency_us;
  const double rbw = replica_in_node ? g.nvlink_gbps : NetworkGbps(req, sh.t * shard);
  const double rlat = replica_in_node ? g.nvlink_latency_us : g.net_latency_us;
  auto gather = [&](double bytes) { return AllReduceSeconds(bytes, shard, bw, lat) / 2; };
  const double grad_bytes = GradBytes(l.grad_reduce);
  auto reduce = [&](double params) {
    return gather(grad_bytes * params) +
           AllReduceSeconds(grad_bytes * params / D(shard), replicas, rbw, rlat);
  };
  const FsdpUnits u = FsdpUnitsOf(req.model, sh.t);
  const double layers = D(sh.layers_per_stage);
  const double layer_fwd = gather(kWeightBytes * u.layer);
  const double layer_bwd = layer_fwd + reduce(u.layer);
  const double root_fwd = gather(kWeightBytes * u.root), root_bwd = reduce(u.root);
  const double forward_window = (1.0 / 3.0) * (mbt.compute + mbt.elementwise);
  const double backward_window = (2.0 / 3.0) * (mbt.compute + mbt.elementwise) + mbt.recompute;
  const double whole = layers * (layer_fwd + layer_bwd) + root_fwd + root_bwd;
  double exposed = root_fwd + std::max(0.0, layers * layer_fwd - forward_window) + root_bwd +
                   std::max(0.0, layers * layer_bwd - backward_window);
  if (!req.dp_comm_overlap) exposed = whole;
  time->dp_comm_s = D(sh.mb) * whole;
  time->dp_comm_exposed_s = D(sh.mb) * exposed;
  ChargeHiddenComm(time);
}

// Data parallelism: the gradients of this GPU's parameters (fp32, or bf16 with bf16 reduction),
// ring all-reduce; with the distributed optimizer a reduce-scatter of the gradients and an
// all-gather of the updated bf16 weights (each half an all-reduce of its bytes). The reduction
// overlaps with the backward pass of the last micro-batch; the distributed optimizer's parameter
// all-gather overlaps with the first forward pass (Megatron's --overlap-grad-reduce and
// --overlap-param-gather). ZeRO-2 keeps no whole gradients to accumulate the micro-batches in:
// it reduce-scatters after every micro-batch, behind that micro-batch's backward pass (DeepSpeed
// stage 2, Megatron-FSDP's optim_grads), and all-gathers the weights once per step.
void CostDataParallel(const PlanRequest& req, const Layout& l, const LayoutShape& sh,
                      const StageMemory& worst, const MicroBatchTimes& mbt, TimeBreakdown* time) {
  const int64_t d = sh.d, cx = sh.cx;
  if (d * cx <= 1) return;
  if (l.fsdp()) {
    CostFsdp(req, l, sh, mbt, time);
    return;
  }
  const GpuSpec& g = req.gpu;
  const bool dp_in_node = sh.t * cx * d <= req.gpus_per_node;
  const double bw = dp_in_node ? g.nvlink_gbps : NetworkGbps(req, sh.t);
  const double lat = dp_in_node ? g.nvlink_latency_us : g.net_latency_us;
  auto all_reduce = [&](double bytes_per_param) {
    return AllReduceSeconds(bytes_per_param * worst.params, d * cx, bw, lat) +
           AllReduceSeconds(bytes_per_param * worst.experts, ExpertReplicas(l), bw, lat);
  };
  const double backward_window = (2.0 / 3.0) * (mbt.compute + mbt.elementwise) + mbt.recompute;
  const double forward_window = (1.0 / 3.0) * (mbt.compute + mbt.elementwise);
  const double grad_bytes = GradBytes(l.grad_reduce);
  if (l.optimizer_sharding()) {
    const double reduce_scatter = all_reduce(grad_bytes) / 2;
    const double all_gather = all_reduce(kWeightBytes) / 2;
    const double scatters = l.grad_sharding() ? D(sh.mb) : 1.0;
    time->dp_comm_s = scatters * reduce_scatter + all_gather;
    time->dp_comm_exposed_s = scatters * std::max(0.0, reduce_scatter - backward_window) +
                              std::max(0.0, all_gather - forward_window);
  } else {
    time->dp_comm_s = all_reduce(grad_bytes);
    time->dp_comm_exposed_s = std::max(0.0, time->dp_comm_s - backward_window);
  }
  if (!req.dp_comm_overlap) time->dp_comm_exposed_s = time->dp_comm_s;
  ChargeHiddenComm(time);
}

// Every rate at `factor` of the preset's: each time, the exposed parts included
// (max(0, a/f - b/f) = max(0, a - b)/f), is divided by it; the step time exactly so.
void Calibrate(double factor, TimeBreakdown* time) {
  for (double* x :
       {&time->compute_s, &time->elementwise_s, &time->recompute_s, &time->tp_comm_s,
       &time->tp_comm_hidden_s,
        &time->cp_comm_s, &time->ep_comm_s, &time->bubble_s, &time->p2p_s, &time->dp_comm_s,
        &time->dp_comm_exposed_s, &time->optimizer_s, &time->total_s}) {
    *x /= factor;
  }
}

// One optimizer step: every micro-batch on the largest stage, the pipeline bubble, the exposed
// data-parallel reduction and the optimizer step (`worst`: the most loaded stage's memory).
TimeBreakdown CostStep(const PlanRequest& req, const Layout& l, const LayoutShape& sh,
                       const StageMemory& worst) {
  const double gpu_flops = GemmFlops(req.gpu, req.model, sh);
  MicroBatchTimes mbt;
  CostCompute(req, sh, gpu_flops, &mbt);
  mbt.tp = TensorParallelSeconds(req, sh);
  // Hidden behind the layer's GEMMs (forward, backward and recompute), at most as long as they.
  const double tp_hidden =
      req.tp_comm_overlap ? std::min(kTensorParallelOverlap * mbt.tp, mbt.compute + mbt.recompute)
                          : 0.0;
  mbt.tp -= tp_hidden;
  mbt.cp = ContextParallelSeconds(req, sh, gpu_flops);
  mbt.ep = ExpertParallelSeconds(req, l, sh);
  mbt.p2p = PipelineSeconds(req, sh);
  const double stage_mb = mbt.compute + mbt.elementwise + mbt.recompute + mbt.tp + mbt.cp + mbt.ep;
  const double mb = D(sh.mb);
  TimeBreakdown time;
  time.compute_s = mb * mbt.compute;
  time.elementwise_s = mb * mbt.elementwise;
  time.recompute_s = mb * mbt.recompute;
  time.tp_comm_s = mb * mbt.tp;
  time.tp_comm_hidden_s = mb * tp_hidden;
  time.cp_comm_s = mb * mbt.cp;
  time.ep_comm_s = mb * mbt.ep;
  time.p2p_s = mb * mbt.p2p;
  // Pipeline bubble (Narayanan et al. 2021): (p-1)/v micro-batch slots of fill and drain.
  time.bubble_s = D(sh.p - 1) / D(sh.v) * (stage_mb + mbt.p2p);
  CostDataParallel(req, l, sh, worst, mbt, &time);
  const int64_t replicas = sh.d * sh.cx;
  const int64_t dense_split = l.fsdp() ? l.fsdp_shard : l.optimizer_sharding() ? replicas : 1;
  const int64_t expert_split =
      l.fsdp() ? l.fsdp_shard : l.optimizer_sharding() ? ExpertReplicas(l) : 1;
  const double shard = worst.params / D(dense_split) + worst.experts / D(expert_split);
  time.optimizer_s = (kOptimizerBytesPerParam + GradBytes(l.grad_reduce)) * shard /
                     (req.gpu.hbm_gbps * 1e9 * kLinkEfficiency);
  time.total_s = time.compute_s + time.elementwise_s + time.recompute_s + time.tp_comm_s +
                 time.cp_comm_s + time.ep_comm_s + time.bubble_s + time.p2p_s +
                 time.dp_comm_exposed_s + time.optimizer_s;
  if (req.calibration) Calibrate(req.calibration->factor, &time);
  return time;
}

}  // namespace

namespace {

// The best MFU published per GPU type and size, as planner_published_test.cpp converts them.
const PublishedCeiling kPublishedCeilings[] = {
    {"a100-80gb", 0, 10e9, 0.552, "llama-3-8b with FSDP2, torchtitan on 64 A100"},
    {"a100-80gb", 10e9, 50e9, 0.604, "llama-2-13b with FSDP2 without recompute, torchtitan"},
    {"a100-80gb", 50e9, 200e9, 0.514, "GPT-3 175B, Korthikanti et al. 2022"},
    {"a100-80gb", 200e9, 1e15, 0.563, "Megatron 1T, Korthikanti et al. 2022"},
    {"h100-80gb", 200e9, 1e15, 0.43, "Llama 3 405B on 8,192 H100, Llama Team 2024"},
};

}  // namespace

std::optional<PublishedCeiling> PublishedCeilingFor(const std::string& gpu, double params) {
  for (const PublishedCeiling& c : kPublishedCeilings) {
    if (gpu == c.gpu && params >= c.min_params && params < c.max_params) return c;
  }
  return std::nullopt;
}

PlanCandidate EvaluateLayout(const PlanRequest& req, const Layout& in) {
  PlanCandidate c;
  c.layout = in;
  const LayoutShape sh = ShapeLayout(req, &c.layout);
  const StageMemory worst = CostMemory(req, c.layout, sh, &c.memory);
  c.fits = c.memory.total_gib <= req.gpu.mem_gib * (1.0 - req.headroom_fraction);
  c.time = CostStep(req, c.layout, sh, worst);
  c.step_time_s = c.time.total_s;
  c.samples_per_s = D(req.global_batch) / c.step_time_s;
  c.tokens_per_s = c.samples_per_s * D(sh.s);
  const double peak = req.gpu.bf16_tflops * 1e12;
  c.mfu =
      ModelFlopsPerStep(req.model, sh.s, req.global_batch) / (c.step_time_s * D(req.gpus) * peak);
  return c;
}

}  // namespace autopar
