// The planner's memory and time model and the layout search (docs/planner.md has every formula
// with its source).
#include "core/plan/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "core/text.h"

namespace autopar {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// NCCL reaches about this fraction of a link's bandwidth in large collectives (nccl-tests "busbw").
constexpr double kLinkEfficiency = 0.8;
// Optimizer step traffic per parameter of the local shard: read+write fp32 master, momentum and
// variance (24), read the bf16 grad (2), write the bf16 weight (2).
constexpr double kOptimizerBytesPerParam = 28.0;
// GEMM efficiency falls for narrow per-GPU matrices and few tokens per micro-batch:
// eff = base * w/(w + kWidthHalf) * n/(n + kTokensHalf), w = h/t, n = b*s (docs/planner.md).
constexpr double kWidthHalf = 480.0;
constexpr double kTokensHalf = 64.0;
// HBM passes over a layer's stored activations made by its element-wise kernels (forward: one
// write + one read; backward: about two reads + one write + one more for the gradient).
constexpr double kElementwisePasses = 6.0;

double D(int64_t v) { return static_cast<double>(v); }

std::string Fixed(double v, int digits) {
  char buf[64];
  (void)std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> small, large;
  for (int64_t i = 1; i * i <= n; ++i) {
    if (n % i == 0) {
      small.push_back(i);
      if (i != n / i) large.push_back(n / i);
    }
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

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

struct StageMemory {
  double params = 0;  // dense parameters per GPU on this stage
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

Result<Recompute> ParseRecompute(const std::string& name) {
  if (name == "none") return Recompute::kNone;
  if (name == "selective") return Recompute::kSelective;
  if (name == "full") return Recompute::kFull;
  return Status::Error("recompute: unknown value '" + name + "' (none, selective, full)");
}

double ModelStateBytesPerParam(bool optimizer_sharding, int64_t dp) {
  // 2 bf16 weights + 2 bf16 grads + 12 fp32 (master weights, Adam momentum, Adam variance).
  const double optimizer = 12.0;
  return 2.0 + 2.0 + (optimizer_sharding && dp > 1 ? optimizer / D(dp) : optimizer);
}

double ActivationBytesPerLayer(const ModelArch& m, int64_t seq_len, int64_t micro_batch, int64_t tp,
                               bool sequence_parallel, Recompute recompute, int64_t cp) {
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
  // Context parallelism runs attention as fused (flash) attention, as Megatron's CP requires
  // Transformer Engine's: the scores are never stored.
  const double quadratic = recompute == Recompute::kSelective || cp > 1 ? 0.0 : scores;
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

PlanCandidate EvaluateLayout(const PlanRequest& req, const Layout& in) {
  const ModelArch& m = req.model;
  const GpuSpec& g = req.gpu;
  const int64_t s = req.seq_len > 0 ? req.seq_len : m.seq_len;
  PlanCandidate c;
  c.layout = in;
  Layout& l = c.layout;
  l.sequence_parallel = l.tp > 1;
  l.grad_accum =
      std::max<int64_t>(1, req.global_batch / std::max<int64_t>(1, l.micro_batch * l.dp));
  const int64_t t = l.tp, p = l.pp, d = l.dp, b = l.micro_batch, v = std::max<int64_t>(1, l.vpp);
  const int64_t cx = std::max<int64_t>(1, l.cp);  // context parallel: this rank holds s/cx tokens
  l.cp = cx;
  const int64_t ep = m.moe() ? std::max<int64_t>(1, l.ep) : 1;
  l.ep = ep;
  const int64_t mb = l.grad_accum;
  const ParamCount pc = CountParams(m);
  // Every stage is costed as the one holding the most layers (with uneven stages an upper bound).
  const std::vector<int64_t> stages = StageLayerCounts(m.layers, p, v);
  const int64_t layers_per_stage =
      stages.empty() ? CeilDiv(m.layers, p) : *std::max_element(stages.begin(), stages.end());
  const double tied_copy = (m.tied_embeddings && p > 1) ? D(m.vocab) * D(m.hidden) : 0.0;

  // --- memory ---------------------------------------------------------------------------
  // Full recompute may cover only k layers of each of the v chunks of a stage (Megatron's
  // --recompute-method block); the stage's other layers then use selective recompute.
  const int64_t chunk_layers = CeilDiv(layers_per_stage, v);
  int64_t full_layers = 0;  // per stage
  if (l.recompute == Recompute::kFull) {
    const int64_t k =
        l.recompute_layers > 0 ? std::min(l.recompute_layers, chunk_layers) : chunk_layers;
    l.recompute_layers = k == chunk_layers ? 0 : k;
    full_layers = std::min(layers_per_stage, k * v);
  } else {
    l.recompute_layers = 0;
  }
  const int64_t other_layers = layers_per_stage - full_layers;
  const Recompute other_rc = l.recompute == Recompute::kFull ? Recompute::kSelective : l.recompute;
  const double act_stage =
      D(full_layers) * ActivationBytesPerLayer(m, s, b, t, l.sequence_parallel, Recompute::kFull, cx) +
      D(other_layers) * ActivationBytesPerLayer(m, s, b, t, l.sequence_parallel, other_rc, cx);
  double recompute_working = 0;  // one layer's activations rebuilt during backward
  if (full_layers > 0) {
    recompute_working =
        ActivationBytesPerLayer(m, s, b, t, l.sequence_parallel, Recompute::kNone, cx);
  } else if (l.recompute == Recompute::kSelective && cx == 1) {
    recompute_working = (m.dropout ? 5.0 : 2.0) * D(m.heads) * D(s) * D(s) * D(b) / D(t);
  }
  // Korthikanti et al. 2022 Sec. 4.2.3: with 1F1B the first stage holds min(p, m) micro-batches;
  // interleaving multiplies that by (1 + (p-1)/(p*v)).
  const double in_flight = D(std::min(p, mb)) * (v > 1 ? 1.0 + D(p - 1) / D(p * v) : 1.0);
  // Cross-entropy logits in fp32 (Korthikanti et al. 2022 Sec. 4.3: 4sbv/t).
  const double logits = 4 * D(s / cx) * D(b) * D(m.vocab) / D(t);
  StageMemory first, last;
  first.params = (D(layers_per_stage) * pc.per_layer + pc.embedding) / D(t);
  first.experts = last.experts = D(layers_per_stage) * pc.routed_per_layer / D(t * ep);
  first.activations = act_stage * in_flight;
  first.transient = recompute_working;
  if (p == 1) {
    first.params = (pc.total - D(m.layers) * pc.routed_per_layer) / D(t);
    first.experts = D(m.layers) * pc.routed_per_layer / D(t * ep);
    first.transient += logits;
  }
  // With uneven stages every stage is costed as the largest one (an upper bound).
  last.params = (D(layers_per_stage) * pc.per_layer + pc.output + tied_copy) / D(t);
  last.activations = act_stage * (v > 1 ? 1.0 + D(p - 1) / D(p * v) : 1.0);
  last.transient = recompute_working + logits;
  // Gradients are reduced, and the distributed optimizer shards, over the d*c ranks that hold
  // the same weights (Megatron's data-parallel group with context parallelism).
  const double state_bytes = ModelStateBytesPerParam(l.optimizer_sharding, d * cx);
  // Expert weights are shared by the d*c/ep ranks that hold the same experts.
  const double expert_state_bytes = ModelStateBytesPerParam(l.optimizer_sharding, d * cx / ep);
  auto stage_total = [&](const StageMemory& sm) {
    return sm.params * state_bytes + sm.experts * expert_state_bytes + sm.activations +
           sm.transient;
  };
  const StageMemory& worst = (p == 1 || stage_total(first) >= stage_total(last)) ? first : last;
  c.memory.weights_gib = (worst.params + worst.experts) * 2.0 / kGiB;
  c.memory.grads_gib = (worst.params + worst.experts) * 2.0 / kGiB;
  c.memory.optimizer_gib =
      (worst.params * (state_bytes - 4.0) + worst.experts * (expert_state_bytes - 4.0)) / kGiB;
  c.memory.activations_gib = worst.activations / kGiB;
  c.memory.transient_gib = worst.transient / kGiB;
  c.memory.framework_gib = req.framework_gib;
  c.memory.total_gib = stage_total(worst) / kGiB + req.framework_gib;
  c.fits = c.memory.total_gib <= g.mem_gib * (1.0 - req.headroom_fraction);

  // --- time -----------------------------------------------------------------------------
  const double peak = g.bf16_tflops * 1e12;
  const double width = D(m.hidden) / D(t);
  const double tokens = D(b * s / cx);
  const double eff =
      g.matmul_efficiency * (width / (width + kWidthHalf)) * (tokens / (tokens + kTokensHalf));
  const double gpu_flops = peak * eff;
  // Context parallelism splits every layer's work c ways (attention too: Megatron balances the
  // causal mask by giving each rank two chunks of the sequence).
  const double layer_fwd = LayerForwardFlops(m, s, b) / D(cx);
  // The slowest stage: with p > 1 the last stage also runs the output layer; p == 1 runs all.
  const double stage_fwd = D(layers_per_stage) * layer_fwd + LogitForwardFlops(m, s / cx, b);
  const double compute_mb = 3.0 * stage_fwd / (D(t) * gpu_flops);
  // Memory-bound element-wise work (norms, activation function, dropout, residual adds, rotary):
  // about kElementwisePasses passes of HBM traffic over the layer's stored (linear) activations;
  // it is what makes small hidden sizes less efficient than their GEMMs alone.
  const double hbm = g.hbm_gbps * 1e9 * kLinkEfficiency;
  const double elementwise_layer =
      kElementwisePasses * ActivationBytesPerLayer(m, s, b, t, t > 1, Recompute::kSelective, cx) / hbm;
  const double elementwise_mb = D(layers_per_stage) * elementwise_layer;
  // Full recompute repeats a layer's forward; selective repeats the attention core (QK^T, AV).
  const double attention_core = 4 * D(b) * D(s) * D(s) * D(m.q_width()) / D(cx);
  const double recompute_mb =
      (D(full_layers) * layer_fwd +
       (other_rc == Recompute::kSelective ? D(other_layers) * attention_core : 0.0)) /
          (D(t) * gpu_flops) +
      D(full_layers) * elementwise_layer / 3.0;  // the forward third of the element-wise passes
  // Tensor parallelism: per layer, 2 all-reduce-equivalents (all-gather + reduce-scatter with
  // sequence parallelism) in forward and 2 in backward, of 2*b*s*h bytes (Narayanan et al. 2021
  // Sec. 3.3; Korthikanti et al. 2022 Sec. 4.2.2); full recompute repeats the forward ones.
  double tp_mb = 0;
  if (t > 1) {
    const bool tp_in_node = t <= req.gpus_per_node;
    const double bw = tp_in_node ? g.nvlink_gbps : g.net_gbps;
    const double lat = tp_in_node ? g.nvlink_latency_us : g.net_latency_us;
    const double one = AllReduceSeconds(2.0 * D(b * s / cx) * D(m.hidden), t, bw, lat);
    tp_mb = (6.0 * D(full_layers) + 4.0 * D(other_layers)) * one;
  }
  // Context parallelism (ring attention, Liu et al. 2023; Megatron-LM's p2p CP): per layer, each
  // rank passes its K/V chunk (2 x b*s/c*kv_width bf16 values, split over t) around the ring in
  // c-1 steps while it computes attention on the chunk it holds; the backward pass moves K/V and
  // their gradients (2x). Only what the attention compute does not hide counts; full recompute
  // repeats the forward exchange. CP groups are t ranks apart: on NVLink while t*c fits a node.
  double cp_mb = 0;
  if (cx > 1) {
    const bool cp_in_node = t * cx <= req.gpus_per_node;
    const double bw = (cp_in_node ? g.nvlink_gbps : g.net_gbps) * 1e9 * kLinkEfficiency;
    const double lat = (cp_in_node ? g.nvlink_latency_us : g.net_latency_us) * 1e-6;
    const double kv_width = D(m.kv_heads * m.head_dim());
    const double chunk_bytes = 2.0 * 2.0 * D(b * s / cx) * kv_width / D(t);
    const double ring = D(cx - 1) * (chunk_bytes / bw + lat);
    const double attention = 4 * D(b) * D(s) * D(s) * D(m.q_width()) / D(cx * t) / gpu_flops;
    const double fwd = std::max(0.0, ring - attention);
    const double bwd = std::max(0.0, 2.0 * ring - 2.0 * attention);
    cp_mb = D(layers_per_stage) * (fwd + bwd) + D(full_layers) * fwd;
  }
  // Expert parallelism (Lepikhin et al. 2020; Megatron-Core's all-to-all dispatcher): per MoE
  // layer and micro-batch, each rank sends its tokens' k copies (b*s/c/t tokens of 2h bytes) to
  // the ranks of their experts and gets them back: 2 all-to-alls forward, 2 backward, (ep-1)/ep
  // of the bytes leaving the rank; full recompute repeats the forward ones. Not overlapped.
  // Expert-parallel ranks are t*c apart: on NVLink while t*c*ep fits a node.
  double ep_mb = 0;
  if (ep > 1) {
    const bool ep_in_node = t * cx * ep <= req.gpus_per_node;
    const double bw = (ep_in_node ? g.nvlink_gbps : g.net_gbps) * 1e9 * kLinkEfficiency;
    const double lat = (ep_in_node ? g.nvlink_latency_us : g.net_latency_us) * 1e-6;
    const double bytes = 2.0 * D(b * s / cx) * D(m.experts_per_token) * D(m.hidden) / D(t) *
                         D(ep - 1) / D(ep);
    const double one = bytes / bw + D(ep - 1) * lat;
    ep_mb = (4.0 * D(layers_per_stage) + 2.0 * D(full_layers)) * one;
  }
  // Pipeline point-to-point: one activation and one gradient of 2*b*s*h bytes per micro-batch and
  // stage boundary, split over the t ranks (scatter/gather, Narayanan et al. 2021 Sec. 4.1),
  // v times as many with interleaving. Stages are t*d ranks apart (rank order tp, dp, pp).
  double p2p_mb = 0;
  if (p > 1) {
    const bool crosses_nodes = t * cx * d >= req.gpus_per_node;
    const double bw = crosses_nodes ? g.net_gbps : g.nvlink_gbps;
    const double lat = crosses_nodes ? g.net_latency_us : g.nvlink_latency_us;
    const double bytes = 2.0 * D(b * s / cx) * D(m.hidden) / D(t);
    p2p_mb = 2.0 * D(v) * (bytes / (bw * 1e9 * kLinkEfficiency) + lat * 1e-6);
  }
  const double stage_mb = compute_mb + elementwise_mb + recompute_mb + tp_mb + cp_mb + ep_mb;
  c.time.compute_s = D(mb) * compute_mb;
  c.time.elementwise_s = D(mb) * elementwise_mb;
  c.time.recompute_s = D(mb) * recompute_mb;
  c.time.tp_comm_s = D(mb) * tp_mb;
  c.time.cp_comm_s = D(mb) * cp_mb;
  c.time.ep_comm_s = D(mb) * ep_mb;
  c.time.p2p_s = D(mb) * p2p_mb;
  // Pipeline bubble (Narayanan et al. 2021): (p-1)/v micro-batch slots of fill and drain.
  c.time.bubble_s = D(p - 1) / D(v) * (stage_mb + p2p_mb);
  // Data parallelism: bf16 gradients of this GPU's parameters, ring all-reduce (or reduce-scatter
  // + all-gather with the distributed optimizer: the same volume). The reduction overlaps with
  // the backward pass of the last micro-batch; the distributed optimizer's parameter all-gather
  // overlaps with the first forward pass (Megatron's --overlap-grad-reduce/--overlap-param-gather).
  if (d * cx > 1) {
    const bool dp_in_node = t * cx * d <= req.gpus_per_node;
    const double bw = dp_in_node ? g.nvlink_gbps : g.net_gbps;
    const double lat = dp_in_node ? g.nvlink_latency_us : g.net_latency_us;
    c.time.dp_comm_s = AllReduceSeconds(2.0 * worst.params, d * cx, bw, lat) +
                       AllReduceSeconds(2.0 * worst.experts, d * cx / ep, bw, lat);
    const double backward_window = (2.0 / 3.0) * (compute_mb + elementwise_mb) + recompute_mb;
    const double forward_window = (1.0 / 3.0) * (compute_mb + elementwise_mb);
    if (l.optimizer_sharding) {
      c.time.dp_comm_exposed_s = std::max(0.0, c.time.dp_comm_s / 2 - backward_window) +
                                 std::max(0.0, c.time.dp_comm_s / 2 - forward_window);
    } else {
      c.time.dp_comm_exposed_s = std::max(0.0, c.time.dp_comm_s - backward_window);
    }
  }
  const double shard = worst.params / D(l.optimizer_sharding ? d * cx : 1) +
                       worst.experts / D(l.optimizer_sharding ? d * cx / ep : 1);
  c.time.optimizer_s = kOptimizerBytesPerParam * shard / (g.hbm_gbps * 1e9 * kLinkEfficiency);
  c.time.total_s = c.time.compute_s + c.time.elementwise_s + c.time.recompute_s + c.time.tp_comm_s +
                   c.time.cp_comm_s + c.time.ep_comm_s + c.time.bubble_s + c.time.p2p_s + c.time.dp_comm_exposed_s + c.time.optimizer_s;
  if (req.calibration) {
    // Every rate at `factor` of the preset's: each time, the exposed parts included
    // (max(0, a/f - b/f) = max(0, a - b)/f), is divided by it; the step time exactly so.
    const double f = req.calibration->factor;
    for (double* x : {&c.time.compute_s, &c.time.elementwise_s, &c.time.recompute_s,
                      &c.time.tp_comm_s, &c.time.cp_comm_s, &c.time.ep_comm_s, &c.time.bubble_s,
                      &c.time.p2p_s, &c.time.dp_comm_s, &c.time.dp_comm_exposed_s,
                      &c.time.optimizer_s, &c.time.total_s}) {
      *x /= f;
    }
  }
  c.step_time_s = c.time.total_s;
  c.samples_per_s = D(req.global_batch) / c.step_time_s;
  c.tokens_per_s = c.samples_per_s * D(s);
  c.mfu = ModelFlopsPerStep(m, s, req.global_batch) / (c.step_time_s * D(req.gpus) * peak);
  return c;
}

namespace {

std::string PinnedLabel(const PlanRequest& r) {
  if (!r.pin_label.empty()) return r.pin_label;
  std::string out;
  auto add = [&](const char* key, const std::optional<int64_t>& v) {
    if (!v) return;
    out += (out.empty() ? "" : ",") + std::string(key) + "=" + std::to_string(*v);
  };
  add("tp", r.tp);
  add("cp", r.cp);
  add("ep", r.ep);
  add("pp", r.pp);
  add("dp", r.dp);
  return "--auto-parallel=" + out;
}

bool Pinned(const PlanRequest& r) { return r.tp || r.cp || r.ep || r.pp || r.dp; }

Status ValidateRequest(const PlanRequest& r) {
  if (r.gpus < 1) return Status::Error("--gpus: must be >= 1 (got " + std::to_string(r.gpus) + ")");
  if (r.gpus_per_node < 1) {
    return Status::Error("--gpus-per-node: must be >= 1 (got " + std::to_string(r.gpus_per_node) +
                         ")");
  }
  if (r.global_batch < 1) {
    return Status::Error("--global-batch: must be >= 1 (got " + std::to_string(r.global_batch) +
                         ")");
  }
  if (r.seq_len < 0)
    return Status::Error("--seq-len: must be >= 1 (got " + std::to_string(r.seq_len) + ")");
  Status model = ValidateModel(r.model);
  if (!model.ok()) return Status::Error("--model: " + r.model.name + ": " + model.message());
  struct Positive {
    const char* option;
    double value;
  } numbers[] = {
      {"--gpu-mem-gib", r.gpu.mem_gib},     {"--gpu-tflops", r.gpu.bf16_tflops},
      {"--nvlink-gbps", r.gpu.nvlink_gbps}, {"--net-gbps", r.gpu.net_gbps},
      {"--hbm-gbps", r.gpu.hbm_gbps},       {"--gpu-efficiency", r.gpu.matmul_efficiency}};
  for (const auto& n : numbers) {
    if (!(n.value > 0) || !std::isfinite(n.value)) {
      return Status::Error(std::string(n.option) + ": must be a positive number (got " +
                           Fixed(n.value, 3) + ")");
    }
  }
  if (r.gpu.matmul_efficiency > 1) return Status::Error("--gpu-efficiency: must be <= 1");
  if (!(r.headroom_fraction >= 0 && r.headroom_fraction < 1)) {
    return Status::Error("headroom_fraction: must be in [0, 1)");
  }
  if (r.top_k < 0) return Status::Error("--top: must be >= 0");
  if (r.calibration && !(r.calibration->factor > 0 && r.calibration->factor <= 2)) {
    return Status::Error("calibration: the factor must be in (0, 2] (got " +
                         Fixed(r.calibration->factor, 3) + ")");
  }
  const std::pair<const char*, const std::optional<int64_t>*> pins[] = {
      {"tp", &r.tp},
      {"cp", &r.cp},
      {"ep", &r.ep},
      {"pp", &r.pp},
      {"dp", &r.dp},
      {"micro_batch", &r.micro_batch},
      {"vpp", &r.vpp}};
  if (r.recompute_layers && *r.recompute_layers < 0)
    return Status::Error("recompute_layers: must be >= 0");
  for (const auto& [key, value] : pins) {
    if (*value && **value < 1) {
      return Status::Error(std::string(key) + ": must be >= 1 (got " + std::to_string(**value) +
                           ")");
    }
  }
  return Status::Ok();
}

// Why a pinned (t, p, d) cannot work, or "" when it can.
std::string PinnedConstraintError(const PlanRequest& r, int64_t s) {
  const ModelArch& m = r.model;
  const std::string label = PinnedLabel(r);
  if (r.tp) {
    const int64_t t = *r.tp;
    if (m.heads % t != 0) {
      return label + ": tp=" + std::to_string(t) + " does not divide the attention heads (" +
             std::to_string(m.heads) + ")";
    }
    if (m.kv_heads % t != 0) {
      return label + ": tp=" + std::to_string(t) + " does not divide the key/value heads (" +
             std::to_string(m.kv_heads) + ")";
    }
    if (t > r.gpus_per_node && !r.allow_cross_node_tp) {
      return label + ": tp=" + std::to_string(t) + " exceeds the " +
             std::to_string(r.gpus_per_node) +
             " GPUs of a node (tensor parallelism must stay on NVLink)";
    }
    if (t <= r.gpus_per_node && r.gpus_per_node % t != 0 && !r.allow_cross_node_tp) {
      return label + ": tp=" + std::to_string(t) + " does not divide the " +
             std::to_string(r.gpus_per_node) +
             " GPUs of a node (a tensor-parallel group would straddle two nodes)";
    }
    if (r.gpus % t != 0) {
      return label + ": tp=" + std::to_string(t) + " does not divide the job's " +
             std::to_string(r.gpus) + " GPUs";
    }
  }
  if (r.pp) {
    const int64_t p = *r.pp;
    if (p > m.layers) {
      return label + ": pp=" + std::to_string(p) + " exceeds the model's " +
             std::to_string(m.layers) + " layers";
    }
    if (m.layers % p != 0 && !r.allow_uneven_stages) {
      return label + ": pp=" + std::to_string(p) + " does not divide the model's " +
             std::to_string(m.layers) + " layers and uneven stages are off (--even-stages)";
    }
    if (!SplitStages(m.layers, p)) {
      return label + ": pp=" + std::to_string(p) + " stages cannot hold the model's " +
             std::to_string(m.layers) + " layers (the first or last stage would hold none)";
    }
  }
  if (r.ep && *r.ep > 1 && !m.moe()) {
    return label + ": ep=" + std::to_string(*r.ep) + " needs a mixture-of-experts model (" +
           m.name + " has no experts)";
  }
  if (r.ep && m.moe() && m.experts % *r.ep != 0) {
    return label + ": ep=" + std::to_string(*r.ep) + " does not divide the model's " +
           std::to_string(m.experts) + " experts";
  }
  if (r.cp && *r.cp > 1 && s % (2 * *r.cp) != 0) {
    return label + ": cp=" + std::to_string(*r.cp) + " needs a sequence length divisible by " +
           std::to_string(2 * *r.cp) + " (got " + std::to_string(s) + ")";
  }
  const int64_t tp = r.tp.value_or(1), pp = r.pp.value_or(1), cp = r.cp.value_or(1);
  const std::string tpp = cp > 1 ? "tp*cp*pp" : "tp*pp";
  if (r.gpus % (tp * cp * pp) != 0) {
    return label + ": " + tpp + "=" + std::to_string(tp * cp * pp) + " does not divide the job's " +
           std::to_string(r.gpus) + " GPUs";
  }
  if (r.tp && r.pp && r.dp && tp * cp * pp * *r.dp != r.gpus) {
    return label + ": " + tpp + "*dp=" + std::to_string(tp * cp * pp * *r.dp) +
           " but the job has " + std::to_string(r.gpus) + " GPUs";
  }
  if (r.dp && r.global_batch % *r.dp != 0) {
    return label + ": dp=" + std::to_string(*r.dp) + " does not divide the global batch (" +
           std::to_string(r.global_batch) + ")";
  }
  if (r.tp && r.pp && !r.dp && r.global_batch % (r.gpus / (tp * cp * pp)) != 0) {
    return label + ": the resulting dp=" + std::to_string(r.gpus / (tp * cp * pp)) +
           " does not divide the global batch (" + std::to_string(r.global_batch) + ")";
  }
  return "";
}

struct SearchSpace {
  std::vector<Layout> layouts;
};

// Whether the search tries context parallelism cx for sequences of s tokens: 1 always; more only
// where every rank keeps at least kContextParallelMinTokens tokens, s divisible by 2*cx.
bool ContextParallelSearched(int64_t s, int64_t cx) {
  return cx == 1 || (s % (2 * cx) == 0 && s / cx >= kContextParallelMinTokens);
}

// Whether p stages of v chunks each can hold the model's layers under the request: evenly, or
// (allow_uneven_stages) as ChunkLayers splits them.
bool StagesAllowed(const PlanRequest& r, int64_t p, int64_t v) {
  if (r.model.layers % (p * v) == 0) return true;
  return r.allow_uneven_stages && !ChunkLayers(r.model.layers, p, v).empty();
}

// Every micro-batch, interleaving, recompute and sharding choice for the sizes in `base`.
void EnumerateKnobs(const PlanRequest& r, const Layout& base, const Recompute (&all_rc)[3],
                    std::vector<Layout>* out) {
  const int64_t p = base.pp, d = base.dp;
  const int64_t per_replica = r.global_batch / d;
  for (int64_t b : Divisors(per_replica)) {
    if (r.micro_batch && b != *r.micro_batch) continue;
    if (b > 64) break;
    const int64_t mb = per_replica / b;
    std::vector<int64_t> vpps = {1};
    if (p > 1) {
      for (int64_t v : Divisors(CeilDiv(r.model.layers, p))) {
        if (v > 1 && mb % p == 0 && StagesAllowed(r, p, v)) vpps.push_back(v);
      }
    }
    for (int64_t v : vpps) {
      if (r.vpp && v != *r.vpp) continue;
      for (Recompute rc : all_rc) {
        if (r.recompute && rc != *r.recompute) continue;
        for (int sh = 0; sh < (d * base.cp > 1 ? 2 : 1); ++sh) {
          if (r.optimizer_sharding && (sh == 1) != *r.optimizer_sharding) continue;
          Layout l = base;
          l.micro_batch = b;
          l.grad_accum = mb;
          l.vpp = v;
          l.recompute = rc;
          l.recompute_layers = rc == Recompute::kFull ? r.recompute_layers.value_or(0) : 0;
          l.optimizer_sharding = sh == 1;
          out->push_back(l);
        }
      }
    }
  }
}

// The expert-parallel sizes the search tries for d*c ranks that hold the same dense weights: 1
// for a dense model; for a mixture of experts every ep dividing both the experts and d*c
// (Megatron carves expert parallelism out of the data- and context-parallel ranks).
std::vector<int64_t> ExpertSizes(const PlanRequest& r, int64_t replicas) {
  if (!r.model.moe()) return {1};
  std::vector<int64_t> out;
  for (int64_t ep : Divisors(r.model.experts)) {
    if (replicas % ep == 0 && (!r.ep || ep == *r.ep)) out.push_back(ep);
  }
  return out;
}

// Enumerates every valid layout of the request; `memory_only` keeps, for each (t, c, p, d, ep),
// only the least-memory knobs (micro-batch 1, full recompute, sharding) and ignores batch
// divisibility.
void Enumerate(const PlanRequest& r, int64_t gpus, bool memory_only, std::vector<Layout>* out) {
  const ModelArch& m = r.model;
  const Recompute all_rc[] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  for (int64_t t : Divisors(gpus)) {
    if (r.tp && t != *r.tp) continue;
    if (m.heads % t != 0 || m.kv_heads % t != 0) continue;
    // Tensor-parallel groups stay inside a node: t divides the GPUs of a node.
    if ((t > r.gpus_per_node || r.gpus_per_node % t != 0) && !r.allow_cross_node_tp) continue;
    for (int64_t cx : Divisors(gpus / t)) {
      if (r.cp ? cx != *r.cp : !ContextParallelSearched(r.seq_len, cx)) continue;
      for (int64_t p : Divisors(gpus / (t * cx))) {
        if (r.pp && p != *r.pp) continue;
        if (p > m.layers) break;
        if (!StagesAllowed(r, p, 1)) continue;
        const int64_t d = gpus / (t * cx * p);
        if (r.dp && d != *r.dp) continue;
        for (int64_t ep : ExpertSizes(r, d * cx)) {
          Layout base;
          base.tp = t;
          base.cp = cx;
          base.pp = p;
          base.dp = d;
          base.ep = ep;
          if (memory_only) {
            Layout l = base;
            l.micro_batch = 1;
            l.recompute = r.recompute.value_or(Recompute::kFull);
            l.optimizer_sharding = r.optimizer_sharding.value_or(d * cx > 1);
            out->push_back(l);
            continue;
          }
          if (r.global_batch % d != 0) continue;
          EnumerateKnobs(r, base, all_rc, out);
        }
      }
    }
  }
}

// The least memory per GPU any layout of `gpus` GPUs needs (ignoring batch divisibility).
bool SmallestMemory(const PlanRequest& r, int64_t gpus, PlanCandidate* best) {
  PlanRequest q = r;
  q.gpus = gpus;
  std::vector<Layout> layouts;
  Enumerate(q, gpus, true, &layouts);
  bool found = false;
  for (const Layout& l : layouts) {
    PlanCandidate c = EvaluateLayout(q, l);
    if (!found || c.memory.total_gib < best->memory.total_gib) {
      *best = c;
      found = true;
    }
  }
  return found;
}

std::string DescribeKnobs(const Layout& l) {
  return "tp=" + std::to_string(l.tp) + (l.cp > 1 ? ", cp=" + std::to_string(l.cp) : "") +
         (l.ep > 1 ? ", ep=" + std::to_string(l.ep) : "") +
         ", pp=" + std::to_string(l.pp) +
         ", dp=" + std::to_string(l.dp) + ", micro-batch " + std::to_string(l.micro_batch) + ", " +
         RecomputeName(l.recompute) + " recompute" +
         (l.recompute_layers > 0 ? " of " + std::to_string(l.recompute_layers) + " layers per chunk"
                                 : "") +
         (l.optimizer_sharding ? ", distributed optimizer" : "");
}

Result<Plan> Search(const PlanRequest& request, bool explain);

// Whether the request plans: how every change a refusal suggests is checked before it is printed.
bool Plans(const PlanRequest& r) { return Search(r, false).ok(); }

std::string Nodes(int64_t gpus, int64_t per_node) {
  return std::to_string(gpus) + " GPUs (" + std::to_string(CeilDiv(gpus, per_node)) + " nodes of " +
         std::to_string(per_node) + ")";
}

// A request without the pinned layout sizes and knobs: what the search finds on its own.
PlanRequest Unpinned(PlanRequest q) {
  q.tp.reset();
  q.cp.reset();
  q.ep.reset();
  q.pp.reset();
  q.dp.reset();
  q.micro_batch.reset();
  q.vpp.reset();
  q.recompute.reset();
  q.recompute_layers.reset();
  q.optimizer_sharding.reset();
  q.pin_label.clear();
  return q;
}

// "; without the pins it plans: <layout> (<GiB> GiB per GPU)" when the search on its own finds a
// plan for a pinned request that cannot work, else "".
std::vector<std::string> FitFixes(const PlanRequest& r, double usable);

std::string WithoutPins(const PlanRequest& r) {
  const PlanRequest q = Unpinned(r);
  auto free = Search(q, false);
  if (free.ok()) {
    return "; without the pins it plans: " + DescribeKnobs(free->chosen.layout) + " (" +
           Fixed(free->chosen.memory.total_gib, 1) + " GiB per GPU)";
  }
  const std::vector<std::string> fixes = FitFixes(q, q.gpu.mem_gib * (1.0 - q.headroom_fraction));
  return "; nothing plans without the pins either" +
         (fixes.empty() ? std::string() : "; it plans with " + Join(fixes, " or with "));
}

// The changes that make a request which fits no layout plan, each planned before it is named:
// uneven stages (when forbidden), more nodes, a GPU type with more memory.
std::vector<std::string> FitFixes(const PlanRequest& r, double usable) {
  std::vector<std::string> fixes;
  if (!r.allow_uneven_stages) {
    PlanRequest q = r;
    q.allow_uneven_stages = true;
    if (Plans(q)) fixes.push_back("uneven pipeline stages (without --even-stages)");
  }
  // More nodes: the first node count whose smallest layout fits (a cheap walk, steps growing
  // with the count), then the first count from there that plans (batch split included).
  const int64_t g = r.gpus_per_node;
  int64_t k = CeilDiv(r.gpus, g) + 1;
  for (; k <= 1000000; k += std::max<int64_t>(1, k / 16)) {
    PlanCandidate c;
    if (SmallestMemory(r, k * g, &c) && c.memory.total_gib <= usable) break;
  }
  for (int tries = 0; k <= 1000000 && tries < 64; ++tries, k += std::max<int64_t>(1, k / 64)) {
    PlanRequest q = r;
    q.gpus = k * g;
    if (Plans(q)) {
      fixes.push_back(Nodes(k * g, g));
      break;
    }
  }
  for (const auto& name : GpuTypeNames()) {
    auto gpu = ResolveGpuType(name);
    if (!gpu.ok() || gpu->mem_gib <= r.gpu.mem_gib) continue;
    PlanRequest q = r;
    q.gpu = *gpu;
    if (Plans(q)) {
      fixes.push_back("a GPU type with more memory (" + name + ")");
      break;
    }
  }
  return fixes;
}

std::string CannotFitMessage(const PlanRequest& r, const PlanCandidate& smallest, double usable) {
  std::ostringstream os;
  os << r.model.name << " (" << Fixed(CountParams(r.model).total / 1e9, 1)
     << "B parameters) does not fit on " << r.gpus << " x " << r.gpu.name
     << ": the smallest layout (" << DescribeKnobs(smallest.layout) << ") needs "
     << Fixed(smallest.memory.total_gib, 1) << " GiB per GPU, " << Fixed(usable, 1)
     << " GiB usable";
  const std::vector<std::string> fixes = FitFixes(r, usable);
  if (fixes.empty()) {
    os << "; no change found that fits (tried " << (r.allow_uneven_stages ? "" : "uneven stages, ")
       << "more nodes and every GPU type with more memory)";
  } else {
    os << "; it plans with " << Join(fixes, " or with ");
  }
  return os.str();
}

// Why no layout splits the global batch, with the data-parallel sizes possible and changes that
// plan.
std::string BatchMessage(const PlanRequest& r, const std::vector<Layout>& any) {
  std::set<int64_t> dps;
  for (const Layout& l : any) dps.insert(l.dp);
  std::vector<std::string> listed;
  for (int64_t d : dps) {
    if (listed.size() == 8) {
      listed.push_back("...");
      break;
    }
    listed.push_back(std::to_string(d));
  }
  std::string out = "--global-batch: " + std::to_string(r.global_batch) +
                    " is not divisible by any data-parallel size possible on " +
                    std::to_string(r.gpus) + " GPUs (dp = " + Join(listed, ", ") +
                    (r.allow_uneven_stages ? "" : "; even pipeline stages only") + ")";
  // The nearest batches some possible dp divides, nearest first, the first that plans.
  std::vector<int64_t> batches;
  for (int64_t d : dps) {
    batches.push_back(CeilDiv(r.global_batch, d) * d);
    if (r.global_batch / d > 0) batches.push_back(r.global_batch / d * d);
  }
  std::sort(batches.begin(), batches.end(), [&](int64_t a, int64_t b) {
    const int64_t da = std::llabs(a - r.global_batch), db = std::llabs(b - r.global_batch);
    return da != db ? da < db : a < b;
  });
  std::vector<std::string> fixes;
  for (size_t i = 0; i < batches.size() && i < 16; ++i) {
    PlanRequest q = r;
    q.global_batch = batches[i];
    if (Plans(q)) {
      fixes.push_back("--global-batch=" + std::to_string(batches[i]));
      break;
    }
  }
  if (!r.allow_uneven_stages) {
    PlanRequest q = r;
    q.allow_uneven_stages = true;
    if (Plans(q)) fixes.push_back("uneven pipeline stages (without --even-stages)");
  }
  if (!fixes.empty()) out += "; it plans with " + Join(fixes, " or with ");
  return out;
}

// Names the component that grew most between the chosen plan and `c`.
std::string SlowerReason(const PlanCandidate& best, const PlanCandidate& c) {
  const double pct = (c.step_time_s / best.step_time_s - 1.0) * 100.0;
  struct Part {
    const char* what;
    double delta;
  } parts[] = {
      {"compute on the slowest stage", c.time.compute_s - best.time.compute_s},
      {"element-wise (memory-bound) work", c.time.elementwise_s - best.time.elementwise_s},
      {"activation recompute", c.time.recompute_s - best.time.recompute_s},
      {"tensor-parallel communication", c.time.tp_comm_s - best.time.tp_comm_s},
      {"pipeline bubble", c.time.bubble_s - best.time.bubble_s},
      {"pipeline point-to-point", c.time.p2p_s - best.time.p2p_s},
      {"exposed data-parallel gradient reduction",
       c.time.dp_comm_exposed_s - best.time.dp_comm_exposed_s},
      {"optimizer step", c.time.optimizer_s - best.time.optimizer_s},
  };
  const Part* worst = &parts[0];
  for (const auto& part : parts) {
    if (part.delta > worst->delta) worst = &part;
  }
  return "slower by " + Fixed(pct, 1) + "%: more " + worst->what + " (+" + Fixed(worst->delta, 3) +
         " s)";
}

bool Better(const PlanCandidate& a, const PlanCandidate& b) {
  if (a.step_time_s != b.step_time_s) return a.step_time_s < b.step_time_s;
  return a.memory.total_gib < b.memory.total_gib;
}

}  // namespace

Result<Plan> PlanJob(const PlanRequest& request) { return Search(request, true); }

namespace {

// The search; `explain`: refusals name changes that plan, and a pinned plan is compared with the
// best one found without its pins (both plan again, with explain off).
Result<Plan> Search(const PlanRequest& request, bool explain) {
  Status valid = ValidateRequest(request);
  if (!valid.ok()) return valid;
  PlanRequest r = request;
  if (r.seq_len == 0) r.seq_len = r.model.seq_len;
  const double usable = r.gpu.mem_gib * (1.0 - r.headroom_fraction);
  if (Pinned(r)) {
    std::string why = PinnedConstraintError(r, r.seq_len);
    if (!why.empty()) return Status::Error(why + (explain ? WithoutPins(r) : ""));
  }
  std::vector<Layout> layouts;
  layouts.reserve(4096);
  Enumerate(r, r.gpus, false, &layouts);
  if (layouts.empty()) {
    // Every (t, p) was valid but the batch split did not work, or nothing was valid at all.
    std::vector<Layout> any;
    Enumerate(r, r.gpus, true, &any);
    if (any.empty()) {
      if (Pinned(r))
        return Status::Error(PinnedLabel(r) + ": no valid layout of " + std::to_string(r.gpus) +
                             " GPUs" + (explain ? WithoutPins(r) : ""));
      return Status::Error("--gpus: no layout of " + std::to_string(r.gpus) +
                           " GPUs satisfies the constraints (tp must divide " +
                           std::to_string(r.model.heads) + " heads and " +
                           std::to_string(r.model.kv_heads) + " kv heads and fit in a node of " +
                           std::to_string(r.gpus_per_node) + "; pp must divide " +
                           std::to_string(r.model.layers) + " layers)");
    }
    if (!explain) return Status::Error("--global-batch: no data-parallel size divides it");
    return Status::Error(BatchMessage(r, any));
  }
  Plan plan;
  plan.model_name = r.model.name;
  plan.params = CountParams(r.model).total;
  plan.layers = r.model.layers;
  plan.experts = r.model.experts;
  plan.experts_per_token = r.model.experts_per_token;
  plan.expert_ffn_hidden = r.model.expert_ffn_hidden;
  plan.shared_experts = r.model.shared_experts;
  plan.active_params = CountParams(r.model).active;
  plan.gpu_name = r.gpu.name;
  plan.gpus = r.gpus;
  plan.gpus_per_node = r.gpus_per_node;
  plan.global_batch = r.global_batch;
  plan.seq_len = r.seq_len;
  plan.mem_usable_gib = usable;
  plan.candidates_evaluated = static_cast<int64_t>(layouts.size());
  plan.calibration = r.calibration;

  // Best fitting candidate per (t, cp, p, d), the fastest one that does not fit, the smallest one.
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>, PlanCandidate> best_per_layout;
  PlanCandidate smallest;
  bool have_smallest = false;
  std::vector<PlanCandidate> unfit;
  auto consider = [&](const PlanCandidate& c) {
    if (!have_smallest || c.memory.total_gib < smallest.memory.total_gib) {
      smallest = c;
      have_smallest = true;
    }
    if (!c.fits) {
      unfit.push_back(c);
      return;
    }
    const Layout& l = c.layout;
    auto key = std::make_tuple(l.tp, l.cp, l.pp, l.dp, l.ep);
    auto it = best_per_layout.find(key);
    if (it == best_per_layout.end()) {
      best_per_layout.emplace(key, c);
    } else if (Better(c, it->second)) {
      it->second = c;
    }
  };
  for (const Layout& l : layouts) {
    PlanCandidate c = EvaluateLayout(r, l);
    consider(c);
    // Full recompute of every layer fits but selective does not: recompute just enough layers of
    // each chunk in full (memory falls linearly with their number).
    const int64_t chunk = CeilDiv(CeilDiv(r.model.layers, l.pp), l.vpp);
    if (l.recompute != Recompute::kFull || !c.fits || chunk < 2 || r.recompute_layers) continue;
    Layout sel_layout = l;
    sel_layout.recompute = Recompute::kSelective;
    const PlanCandidate sel = EvaluateLayout(r, sel_layout);
    if (sel.fits) continue;
    const double saving_per_layer = (sel.memory.total_gib - c.memory.total_gib) / D(chunk);
    if (!(saving_per_layer > 0)) continue;
    int64_t k = static_cast<int64_t>(std::ceil((sel.memory.total_gib - usable) / saving_per_layer));
    for (k = std::max<int64_t>(1, k); k < chunk; ++k) {
      Layout partial = l;
      partial.recompute_layers = k;
      PlanCandidate pc = EvaluateLayout(r, partial);
      if (pc.fits) {
        consider(pc);
        break;
      }
    }
  }
  if (best_per_layout.empty()) {
    if (!explain) return Status::Error("does not fit");
    if (Pinned(r)) {
      return Status::Error(PinnedLabel(r) + ": does not fit: the smallest configuration (" +
                           DescribeKnobs(smallest.layout) + ") needs " +
                           Fixed(smallest.memory.total_gib, 1) + " GiB per GPU, " +
                           Fixed(usable, 1) + " GiB usable on " + r.gpu.name + WithoutPins(r));
    }
    return Status::Error(CannotFitMessage(r, smallest, usable));
  }
  std::vector<PlanCandidate> ranked;
  ranked.reserve(best_per_layout.size());
  for (auto& entry : best_per_layout) ranked.push_back(entry.second);
  std::sort(ranked.begin(), ranked.end(), Better);
  plan.chosen = ranked.front();
  // Of the layouts that would be faster but do not fit, show the one closest to fitting.
  PlanCandidate closest_unfit;
  bool show_unfit = false;
  for (const PlanCandidate& c : unfit) {
    if (c.step_time_s >= plan.chosen.step_time_s) continue;
    if (!show_unfit || c.memory.total_gib < closest_unfit.memory.total_gib) {
      closest_unfit = c;
      show_unfit = true;
    }
  }
  show_unfit = show_unfit && r.top_k > 0;
  const size_t fitting_slots = static_cast<size_t>(r.top_k) - (show_unfit ? 1 : 0);
  for (size_t i = 1; i < ranked.size() && plan.alternatives.size() < fitting_slots; ++i) {
    PlanCandidate alt = ranked[i];
    alt.reason = SlowerReason(plan.chosen, alt);
    plan.alternatives.push_back(alt);
  }
  if (show_unfit) {
    closest_unfit.reason =
        "does not fit: needs " + Fixed(closest_unfit.memory.total_gib, 1) + " GiB per GPU, " +
        Fixed(usable, 1) + " GiB usable (would be " +
        Fixed((1.0 - closest_unfit.step_time_s / plan.chosen.step_time_s) * 100.0, 1) + "% faster)";
    plan.alternatives.push_back(closest_unfit);
  }
  if (explain && Pinned(r)) {
    PlanRequest q = Unpinned(r);
    q.top_k = 0;
    auto free = Search(q, false);
    if (free.ok()) plan.unpinned = free->chosen;
  }
  return plan;
}

}  // namespace
}  // namespace autopar
