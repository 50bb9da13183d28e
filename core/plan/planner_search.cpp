// The planner's layout search: the request checked, every layout that satisfies the constraints
// enumerated and costed (planner.cpp), the fastest that fits chosen with its alternatives, and a
// refusal that names what would plan (docs/planner.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/plan/grad_sharding.h"
#include "core/plan/planner.h"
#include "core/plan/planner_internal.h"
#include "core/text.h"

namespace autopar {
using planner_detail::CeilDiv;
using planner_detail::D;
namespace {

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

// Whether the request asks for FSDP layouts only (--auto-parallel=fsdp[=N], hsdp=S,R).
bool FsdpOnly(const PlanRequest& r) {
  return (r.fsdp && *r.fsdp) || r.fsdp_shard || r.fsdp_replicate;
}

// "fsdp", "fsdp=8", "hsdp=8,4": the FSDP pins as --auto-parallel writes them, or "".
std::string FsdpPinText(const PlanRequest& r) {
  if (r.fsdp_replicate) {
    return "hsdp=" + (r.fsdp_shard ? std::to_string(*r.fsdp_shard) : std::string("?")) + "," +
           std::to_string(*r.fsdp_replicate);
  }
  if (r.fsdp_shard) return "fsdp=" + std::to_string(*r.fsdp_shard);
  return FsdpOnly(r) ? "fsdp" : "";
}

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
  const std::string fsdp = FsdpPinText(r);
  if (!fsdp.empty()) out += (out.empty() ? "" : ",") + fsdp;
  if (r.grad_sharding) {
    out += std::string(out.empty() ? "" : ",") + "grad_sharding=" +
           (*r.grad_sharding ? "on" : "off");
  }
  return "--auto-parallel=" + out;
}

bool Pinned(const PlanRequest& r) { return r.tp || r.cp || r.ep || r.pp || r.dp || FsdpOnly(r); }

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
    return Status::Error("--headroom: must be a fraction in [0, 1) (got " +
                         Fixed(r.headroom_fraction, 3) + ")");
  }
  if (r.top_k < 0) return Status::Error("--top: must be >= 0");
  if (r.calibration && !(r.calibration->factor > 0 && r.calibration->factor <= 2)) {
    return Status::Error("calibration: the factor must be in (0, 2] (got " +
                         Fixed(r.calibration->factor, 3) + ")");
  }
  const std::pair<const char*, const std::optional<int64_t>*> pins[] = {
      {"tp", &r.tp},   {"cp", &r.cp},           {"ep", &r.ep},
      {"pp", &r.pp},   {"dp", &r.dp},           {"micro_batch", &r.micro_batch},
      {"vpp", &r.vpp}, {"fsdp", &r.fsdp_shard}, {"hsdp replicas", &r.fsdp_replicate}};
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

// Why a pinned tp cannot work, or "" when it can (or is not pinned).
std::string TensorPinError(const PlanRequest& r, const std::string& label) {
  if (!r.tp) return "";
  const ModelArch& m = r.model;
  const int64_t t = *r.tp;
  const std::string tp = label + ": tp=" + std::to_string(t);
  if (m.heads % t != 0) {
    return tp + " does not divide the attention heads (" + std::to_string(m.heads) + ")";
  }
  if (m.kv_heads % t != 0) {
    return tp + " does not divide the key/value heads (" + std::to_string(m.kv_heads) + ")";
  }
  if (t > r.gpus_per_node && !r.allow_cross_node_tp) {
    return tp + " exceeds the " + std::to_string(r.gpus_per_node) +
           " GPUs of a node (tensor parallelism must stay on NVLink)";
  }
  if (t <= r.gpus_per_node && r.gpus_per_node % t != 0 && !r.allow_cross_node_tp) {
    return tp + " does not divide the " + std::to_string(r.gpus_per_node) +
           " GPUs of a node (a tensor-parallel group would straddle two nodes)";
  }
  if (r.gpus % t != 0) {
    return tp + " does not divide the job's " + std::to_string(r.gpus) + " GPUs";
  }
  return "";
}

// Why a pinned pp cannot hold the model's layers, or "".
std::string PipelinePinError(const PlanRequest& r, const std::string& label) {
  if (!r.pp) return "";
  const ModelArch& m = r.model;
  const int64_t p = *r.pp;
  const std::string pp = label + ": pp=" + std::to_string(p);
  const std::string layers = std::to_string(m.layers);
  if (p > m.layers) return pp + " exceeds the model's " + layers + " layers";
  if (m.layers % p != 0 && !r.allow_uneven_stages) {
    return pp + " does not divide the model's " + layers +
           " layers and uneven stages are off (--even-stages)";
  }
  if (!SplitStages(m.layers, p)) {
    return pp + " stages cannot hold the model's " + layers +
           " layers (the first or last stage would hold none)";
  }
  return "";
}

// Why a pinned ep or cp cannot work with the model and its s-token sequences, or "".
std::string ExpertContextPinError(const PlanRequest& r, const std::string& label, int64_t s) {
  const ModelArch& m = r.model;
  if (r.ep && *r.ep > 1 && !m.moe()) {
    return label + ": ep=" + std::to_string(*r.ep) + " needs a mixture-of-experts model (" +
           m.name + " has no experts)";
  }
  if (r.ep && m.moe() && m.experts % *r.ep != 0) {
    return label + ": ep=" + std::to_string(*r.ep) + " does not divide the model's " +
           std::to_string(m.experts) + " experts";
  }
  // Expert parallelism takes ranks of one pipeline stage (t*d*c of them, Layout::expert_tp).
  const int64_t p = r.pp.value_or(1);
  if (r.ep && m.moe() && r.gpus % p == 0 && (r.gpus / p) % *r.ep != 0) {
    return label + ": ep=" + std::to_string(*r.ep) + " does not divide the " +
           std::to_string(r.gpus / p) + " GPUs of " +
           (r.pp ? "a pipeline stage (tp*dp*cp)" : "the job");
  }
  if (r.cp && *r.cp > 1 && s % (2 * *r.cp) != 0) {
    return label + ": cp=" + std::to_string(*r.cp) + " needs a sequence length divisible by " +
           std::to_string(2 * *r.cp) + " (got " + std::to_string(s) + ")";
  }
  return "";
}

// Why the pinned sizes together do not split the job's GPUs, or their dp the global batch, or "".
std::string SplitPinError(const PlanRequest& r, const std::string& label) {
  const int64_t tp = r.tp.value_or(1), pp = r.pp.value_or(1), cp = r.cp.value_or(1);
  const std::string tpp = cp > 1 ? "tp*cp*pp" : "tp*pp";
  if (r.gpus % (tp * cp * pp) != 0) {
    return label + ": " + tpp + "=" + std::to_string(tp * cp * pp) + " does not divide the job's " +
           std::to_string(r.gpus) + " GPUs";
  }
  if (r.dp && !(r.tp && r.pp) && r.gpus % (tp * cp * pp * *r.dp) != 0) {
    std::vector<std::string> keys;
    for (const auto& [key, v] : {std::pair<const char*, std::optional<int64_t>>{"tp", r.tp},
                                 {"cp", r.cp},
                                 {"pp", r.pp},
                                 {"dp", r.dp}}) {
      if (v) keys.push_back(key);
    }
    return label + ": " + Join(keys, "*") + "=" + std::to_string(tp * cp * pp * *r.dp) +
           " does not divide the job's " + std::to_string(r.gpus) + " GPUs";
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

// Why pinned FSDP cannot work with the other pins, the model or the GPUs, or "".
std::string FsdpPinError(const PlanRequest& r, const std::string& label) {
  if (!FsdpOnly(r)) return "";
  const std::string& fsdp = label;
  if (r.fsdp && !*r.fsdp) return fsdp + ": contradicts FSDP being off";
  if (r.model.moe()) {
    return fsdp + ": FSDP is planned for dense models (" + r.model.name + " has experts)";
  }
  for (const auto& [key, v] :
       {std::pair<const char*, std::optional<int64_t>>{"pp", r.pp}, {"cp", r.cp}, {"ep", r.ep}}) {
    if (v && *v > 1) {
      return fsdp + ": " + key + "=" + std::to_string(*v) +
             ": FSDP is planned without pipeline, context or expert parallelism";
    }
  }
  if (r.fsdp_shard && *r.fsdp_shard < 2)
    return fsdp + ": a shard group of 1 shards nothing (use dp)";
  const int64_t group = r.fsdp_shard.value_or(1) * r.fsdp_replicate.value_or(1);
  const int64_t tp = r.tp.value_or(1);
  if (r.gpus % (tp * group) != 0) {
    return fsdp + ": " + (r.tp ? "tp*" : "") + "shard*replicate=" + std::to_string(tp * group) +
           " does not divide the job's " + std::to_string(r.gpus) + " GPUs";
  }
  if (r.fsdp_shard && r.fsdp_replicate && r.dp && *r.dp != group) {
    return fsdp + ": shard*replicate=" + std::to_string(group) + " but dp=" + std::to_string(*r.dp);
  }
  if (r.fsdp_shard && r.fsdp_replicate && r.global_batch % group != 0) {
    return fsdp + ": the data-parallel size " + std::to_string(group) +
           " does not divide the global batch (" + std::to_string(r.global_batch) + ")";
  }
  return "";
}

// Why pinned ZeRO-2 (grad_sharding on) cannot work with the other pins, the model or the GPUs, or
// "". It is planned with pp = 1 (DeepSpeed's PipelineEngine asserts a ZeRO stage below 2), for
// a dense model, weights whole (not FSDP) and over d*cp > 1 ranks.
std::string GradShardingPinError(const PlanRequest& r) {
  if (!r.grad_sharding || !*r.grad_sharding) return "";
  const std::string label = PinnedLabel(r) + ": ZeRO-2 ";
  GradShardingShape shape{FsdpOnly(r), r.pp.value_or(1), r.model.moe(), std::nullopt};
  const int64_t ranks = r.gpus / (r.tp.value_or(1) * r.pp.value_or(1));
  if (ranks <= 1 || (r.dp.value_or(0) == 1 && r.cp.value_or(1) == 1)) shape.data_ranks = 1;
  const std::string why = GradShardingRefusal(shape);
  if (!why.empty()) return label + why;
  if (r.optimizer_sharding && !*r.optimizer_sharding) {
    return label + "shards the optimizer states too (optimizer sharding is pinned off)";
  }
  return "";
}

// Why a pinned (t, p, d) cannot work, or "" when it can.
std::string PinnedConstraintError(const PlanRequest& r, int64_t s) {
  const std::string label = PinnedLabel(r);
  std::string why = FsdpPinError(r, label);
  if (why.empty()) why = TensorPinError(r, label);
  if (why.empty()) why = PipelinePinError(r, label);
  if (why.empty()) why = ExpertContextPinError(r, label, s);
  if (why.empty()) why = SplitPinError(r, label);
  return why;
}

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

// The data-parallel shardings the search tries for the sizes in `base`, least memory last: none;
// where d*c > 1 the distributed optimizer and, with p = 1 and a dense model, ZeRO-2; as pinned.
// An FSDP layout shards every state itself: none on top.
std::vector<DataParallelSharding> ShardingsFor(const PlanRequest& r, const Layout& base) {
  if (base.fsdp()) return {DataParallelSharding::kNone};
  std::vector<DataParallelSharding> out;
  for (DataParallelSharding s : {DataParallelSharding::kNone, DataParallelSharding::kOptimizer,
                                 DataParallelSharding::kOptimizerGrads}) {
    const bool optimizer = s != DataParallelSharding::kNone;
    const bool grads = s == DataParallelSharding::kOptimizerGrads;
    if (optimizer && base.dp * base.cp <= 1) continue;
    if (grads && !GradShardingRefusal({false, base.pp, r.model.moe(), base.dp * base.cp}).empty()) {
      continue;
    }
    if (r.optimizer_sharding && optimizer != *r.optimizer_sharding) continue;
    if (r.grad_sharding && grads != *r.grad_sharding) continue;
    out.push_back(s);
  }
  return out;
}

// Every micro-batch, interleaving, recompute and sharding choice for the sizes in `base`.
void EnumerateKnobs(const PlanRequest& r, const Layout& base, const Recompute (&all_rc)[3],
                    std::vector<Layout>* out) {
  const int64_t p = base.pp, d = base.dp;
  const int64_t per_replica = r.global_batch / d;
  const std::vector<DataParallelSharding> shardings = ShardingsFor(r, base);
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
        for (DataParallelSharding sharding : shardings) {
          Layout l = base;
          l.micro_batch = b;
          l.grad_accum = mb;
          l.vpp = v;
          l.recompute = rc;
          l.recompute_layers = rc == Recompute::kFull ? r.recompute_layers.value_or(0) : 0;
          l.dp_sharding = sharding;
          l.grad_reduce = r.grad_reduce.value_or(GradReduce::kFp32);
          out->push_back(l);
        }
      }
    }
  }
}

// The expert-parallel sizes the search tries for d*c ranks that hold the same dense weights and
// tensor-parallel size t: 1 for a dense model; for a mixture of experts every ep dividing the
// experts and d*c (Megatron carves expert parallelism out of the data- and context-parallel
// ranks) or, with whole experts per rank (Layout::expert_tp 1), t*d*c.
std::vector<int64_t> ExpertSizes(const PlanRequest& r, int64_t t, int64_t replicas) {
  if (!r.model.moe()) return {1};
  std::vector<int64_t> out;
  for (int64_t ep : Divisors(r.model.experts)) {
    if ((t * replicas) % ep == 0 && (!r.ep || ep == *r.ep)) out.push_back(ep);
  }
  return out;
}

// The FSDP shard groups the search tries for d data-parallel ranks of a dense model without a
// pipeline: every divisor S >= 2 of d (S = d: FSDP over all of them; S < d: HSDP, d/S replicas),
// as pinned; none when FSDP is off.
std::vector<int64_t> FsdpShards(const PlanRequest& r, int64_t d) {
  std::vector<int64_t> out;
  // Pinned ZeRO-2 keeps the weights whole: no FSDP.
  if ((r.fsdp && !*r.fsdp) || r.model.moe() || (r.grad_sharding && *r.grad_sharding)) return out;
  for (int64_t shard : Divisors(d)) {
    if (shard < 2 || (r.fsdp_shard && shard != *r.fsdp_shard)) continue;
    if (r.fsdp_replicate && d / shard != *r.fsdp_replicate) continue;
    out.push_back(shard);
  }
  return out;
}

// The layouts of one (t, c, p, d, ep[, FSDP shard]) in `base`: with `memory_only` the
// least-memory knobs (micro-batch 1, full recompute, the most sharding allowed) regardless of the
// batch split, else every knob (EnumerateKnobs) when d divides the batch.
void AddLayouts(const PlanRequest& r, const Layout& base, bool memory_only,
                std::vector<Layout>* out) {
  const Recompute all_rc[] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  if (memory_only) {
    const std::vector<DataParallelSharding> shardings = ShardingsFor(r, base);
    if (shardings.empty()) return;
    Layout l = base;
    l.micro_batch = 1;
    l.recompute = r.recompute.value_or(Recompute::kFull);
    l.dp_sharding = shardings.back();
    // The least memory: bf16 gradients unless fp32 is pinned (the search falls back to them).
    l.grad_reduce = r.grad_reduce.value_or(GradReduce::kBf16);
    out->push_back(l);
    return;
  }
  if (r.global_batch % base.dp != 0) return;
  EnumerateKnobs(r, base, all_rc, out);
}

// Enumerates every valid layout of the request; `memory_only` keeps, for each (t, c, p, d, ep)
// and FSDP shard group, only the least-memory knobs and ignores batch divisibility.
void Enumerate(const PlanRequest& r, int64_t gpus, bool memory_only, std::vector<Layout>* out) {
  const ModelArch& m = r.model;
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
        Layout base;
        base.tp = t;
        base.cp = cx;
        base.pp = p;
        base.dp = d;
        if (!FsdpOnly(r)) {
          for (int64_t ep : ExpertSizes(r, t, d * cx)) {
            base.ep = ep;
            AddLayouts(r, base, memory_only, out);
          }
        }
        if (p != 1 || cx != 1 || (r.ep && *r.ep > 1)) continue;
        base.ep = 1;
        for (int64_t shard : FsdpShards(r, d)) {
          base.fsdp_shard = shard;
          AddLayouts(r, base, memory_only, out);
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

std::string DescribeKnobs(const Layout& l, int64_t layers) {
  return "tp=" + std::to_string(l.tp) + (l.cp > 1 ? ", cp=" + std::to_string(l.cp) : "") +
         (l.ep > 1 ? ", ep=" + std::to_string(l.ep) : "") + ", pp=" + std::to_string(l.pp) +
         ", dp=" + std::to_string(l.dp) + ", micro-batch " + std::to_string(l.micro_batch) + ", " +
         RecomputePhrase(l, layers) +
         (l.optimizer_sharding() ? ", " + ShardingPhrase(l) : "") +
         (l.fsdp() ? ", " + FsdpPhrase(l) : "") +
         (l.grad_reduce == GradReduce::kBf16 ? ", bf16 gradient reduction" : "");
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
  q.grad_sharding.reset();
  q.grad_reduce.reset();
  q.fsdp.reset();
  q.fsdp_shard.reset();
  q.fsdp_replicate.reset();
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
    return "; without the pins it plans: " + DescribeKnobs(free->chosen.layout, r.model.layers) +
           " (" + Fixed(free->chosen.memory.total_gib, 1) + " GiB per GPU)";
  }
  const std::vector<std::string> fixes = FitFixes(q, q.gpu.mem_gib * (1.0 - q.headroom_fraction));
  return "; nothing plans without the pins either" +
         (fixes.empty() ? std::string() : "; it plans with " + Join(fixes, " or with "));
}

// The smallest headroom the refusal of a layout that misses by a few GiB tries (docs/planner.md,
// "Memory per GPU"): below it, fragmentation and NCCL's buffers are not covered.
constexpr double kSmallestSuggestedHeadroom = 0.04;

// Whether ZeRO-2 is a setting the request left out by its pins: gradient sharding pinned off
// while the optimizer states may be sharded (unpinned, the search has tried it; with them pinned
// whole, as --fault-tolerance=step does, it cannot be).
bool ZeroTwoLeftOut(const PlanRequest& r) {
  return r.grad_sharding == false && r.optimizer_sharding != false;
}

// The settings that make the request plan on the same GPUs with the same pins, each planned
// before it is named: ZeRO-2 (when pinned off; it keeps the numerics), bf16 gradient reduction
// (when fp32 is pinned; unpinned, the search has tried it), and the largest headroom from the
// request's down to kSmallestSuggestedHeadroom.
std::vector<std::string> SettingFixes(const PlanRequest& r) {
  std::vector<std::string> fixes;
  if (ZeroTwoLeftOut(r)) {
    PlanRequest q = r;
    q.grad_sharding = true;
    if (Plans(q)) {
      fixes.push_back(
          "ZeRO-2 (--auto-parallel=...,grad_sharding=on, autopar plan --grad-sharding on)");
    }
  }
  if (r.grad_reduce == GradReduce::kFp32) {
    PlanRequest q = r;
    q.grad_reduce = GradReduce::kBf16;
    if (Plans(q)) {
      fixes.push_back(
          "bf16 gradient reduction (--auto-parallel=...,grad_reduce=bf16, autopar plan "
          "--grad-reduce bf16)");
    }
  }
  for (int pct = static_cast<int>(std::ceil(r.headroom_fraction * 100 - 1e-9)) - 1;
       pct >= static_cast<int>(kSmallestSuggestedHeadroom * 100); --pct) {
    PlanRequest q = r;
    q.headroom_fraction = pct / 100.0;
    if (!Plans(q)) continue;
    const std::string f = Fixed(q.headroom_fraction, 2);
    fixes.push_back("a headroom of " + std::to_string(pct) + "% (plugstack.conf plan_headroom=" +
                    f + ", autopar plan --headroom " + f + ")");
    break;
  }
  return fixes;
}

// The changes that make a request which fits no layout plan, each planned before it is named:
// a setting (SettingFixes), uneven stages (when forbidden), more nodes, a GPU type with more
// memory.
std::vector<std::string> FitFixes(const PlanRequest& r, double usable) {
  std::vector<std::string> fixes = SettingFixes(r);
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
     << ": the smallest layout (" << DescribeKnobs(smallest.layout, r.model.layers) << ") needs "
     << Fixed(smallest.memory.total_gib, 1) << " GiB per GPU, " << Fixed(usable, 1)
     << " GiB usable";
  const std::vector<std::string> fixes = FitFixes(r, usable);
  if (fixes.empty()) {
    os << "; no change found that fits (tried " << (ZeroTwoLeftOut(r) ? "ZeRO-2, " : "")
       << (r.grad_reduce == GradReduce::kFp32 ? "bf16 gradient reduction, " : "")
       << "a headroom down to " << Fixed(kSmallestSuggestedHeadroom * 100, 0) << "%, "
       << (r.allow_uneven_stages ? "" : "uneven stages, ")
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
      {c.layout.fsdp() ? "exposed FSDP gathers and reduce-scatters"
                       : "exposed data-parallel gradient reduction",
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

// Faster, then (equally fast) the distributed optimizer over ZeRO-2, then less memory. With one
// micro-batch per step they cost the same time, and ZeRO-2 less memory, but it is one more thing
// to set up in every framework: it is chosen where it is faster (a larger micro-batch or less
// recompute fits) or where it alone fits.
bool Better(const PlanCandidate& a, const PlanCandidate& b) {
  if (a.step_time_s != b.step_time_s) return a.step_time_s < b.step_time_s;
  if (a.layout.grad_sharding() != b.layout.grad_sharding()) return !a.layout.grad_sharding();
  return a.memory.total_gib < b.memory.total_gib;
}

// Whether a's layout is simpler to run than b's: fewer pipeline stages, then a smaller
// tensor-parallel size, then a smaller context-parallel size (each one less to set up, debug and
// balance); equal layouts are not simpler than each other.
bool Simpler(const Layout& a, const Layout& b) {
  return std::make_tuple(a.pp, a.tp, a.cp) < std::make_tuple(b.pp, b.tp, b.cp);
}

// The layout chosen from the fitting candidates ranked fastest first: the simplest of those
// predicted within kTimeModelError of the fastest (the model cannot tell them apart), the faster
// on a tie.
size_t ChooseSimplest(const std::vector<PlanCandidate>& ranked) {
  size_t chosen = 0;
  const double limit = ranked.front().step_time_s * (1.0 + kTimeModelError);
  for (size_t i = 1; i < ranked.size() && ranked[i].step_time_s <= limit; ++i) {
    if (Simpler(ranked[i].layout, ranked[chosen].layout)) chosen = i;
  }
  return chosen;
}

std::string Percent(double fraction) { return Fixed(fraction * 100.0, 1) + "%"; }

// Why a fitting layout faster than the chosen one was not chosen.
std::string FasterButNotSimplerReason(const PlanCandidate& chosen, const PlanCandidate& c) {
  return "faster by " + Percent(1.0 - c.step_time_s / chosen.step_time_s) +
         ", within the model's " + Percent(kTimeModelError) +
         " error: the simpler layout was chosen";
}

}  // namespace

Result<Plan> PlanJob(const PlanRequest& request) { return Search(request, true); }

namespace {

// The layouts of `r` (its pinned knobs included), enumerated.
std::vector<Layout> LayoutsOf(const PlanRequest& r) {
  std::vector<Layout> out;
  Enumerate(r, r.gpus, false, &out);
  return out;
}

// "dp=8" or "dp = 1, 2, 4": the values `of` takes over `layouts`.
std::string ValuesOf(const char* key, const std::vector<Layout>& layouts,
                     int64_t (*of)(const Layout&)) {
  std::set<int64_t> values;
  for (const Layout& l : layouts) values.insert(of(l));
  std::vector<std::string> listed;
  for (int64_t v : values) listed.push_back(std::to_string(v));
  return std::string(key) + (listed.size() == 1 ? "=" : " = ") + Join(listed, ", ");
}

// Why pinned interleaving fits none of `sizes` (the layouts without the pin): the first check of
// EnumerateKnobs that fails for the first of them.
std::string InterleavingPinError(const PlanRequest& r, const std::vector<Layout>& sizes) {
  const int64_t v = *r.vpp;
  const std::string vpp = "vpp=" + std::to_string(v);
  auto piped = std::find_if(sizes.begin(), sizes.end(), [](const Layout& x) { return x.pp > 1; });
  if (piped == sizes.end()) return vpp + " needs pipeline parallelism (pp > 1; pp=1)";
  const Layout& l = *piped;
  const std::string pp = "pp=" + std::to_string(l.pp);
  const int64_t per_stage = CeilDiv(r.model.layers, l.pp);
  if (per_stage % v != 0) {
    return vpp + " does not divide the " + std::to_string(per_stage) + " layers of a stage (" +
           pp + ", " + std::to_string(r.model.layers) + " layers)";
  }
  if (!StagesAllowed(r, l.pp, v)) {
    return vpp + ": " + std::to_string(l.pp * v) + " chunks (" + pp + ") cannot hold the model's " +
           std::to_string(r.model.layers) + " layers" +
           (r.allow_uneven_stages ? "" : " evenly (--even-stages)");
  }
  return vpp + " needs the micro-batches of each data-parallel rank to be a multiple of " + pp +
         " (" + std::to_string(l.grad_accum) + " with micro-batch " +
         std::to_string(l.micro_batch) + ", " + ValuesOf("dp", sizes, [](const Layout& x) {
           return x.dp;
         }) + ")";
}

// Why the pinned knobs (micro-batch, interleaving, optimizer sharding) leave no layout of sizes
// that plan without them, or "": the first of them, in the order the search applies them, that
// empties the search, with the constraint it fails.
std::string KnobPinError(const PlanRequest& r) {
  PlanRequest q = r;
  q.micro_batch.reset();
  q.vpp.reset();
  q.optimizer_sharding.reset();
  std::vector<Layout> sizes = LayoutsOf(q);
  if (sizes.empty()) return "";
  const std::string label = Pinned(r) ? PinnedLabel(r) + ": " : "";
  if (r.micro_batch) {
    q.micro_batch = r.micro_batch;
    if (LayoutsOf(q).empty()) {
      const std::string mb = "micro_batch=" + std::to_string(*r.micro_batch);
      const int64_t b = *r.micro_batch;
      if (std::any_of(sizes.begin(), sizes.end(),
                      [&](const Layout& x) { return (r.global_batch / x.dp) % b == 0; })) {
        return label + mb + " exceeds the 64 sequences the search tries";
      }
      return label + mb + " does not divide the sequences of a data-parallel rank (global batch " +
             std::to_string(r.global_batch) + " / " +
             ValuesOf("dp", sizes, [](const Layout& x) { return x.dp; }) + ")";
    }
    sizes = LayoutsOf(q);
  }
  if (r.vpp) {
    q.vpp = r.vpp;
    if (LayoutsOf(q).empty()) return label + InterleavingPinError(r, sizes);
  }
  if (r.optimizer_sharding) {
    q.optimizer_sharding = r.optimizer_sharding;
    if (LayoutsOf(q).empty()) {
      return label + "optimizer sharding (pinned " +
             std::string(*r.optimizer_sharding ? "on" : "off") +
             ") shards over the data-parallel ranks (dp*cp) and this layout has one";
    }
  }
  return "";
}

// Why nothing was enumerated: a pinned knob that fits no layout of the sizes (KnobPinError), no
// layout of the GPUs satisfies the constraints, or none splits the global batch.
Status NoLayoutError(const PlanRequest& r, bool explain) {
  if (std::string why = KnobPinError(r); !why.empty()) {
    return Status::Error(why + (explain ? WithoutPins(r) : ""));
  }
  std::vector<Layout> any;
  Enumerate(r, r.gpus, true, &any);
  if (any.empty()) {
    const std::string zero2 =
        r.grad_sharding == true ? " (ZeRO-2 needs pp=1 and dp*cp > 1)" : "";
    if (Pinned(r))
      return Status::Error(PinnedLabel(r) + ": no valid layout of " + std::to_string(r.gpus) +
                           " GPUs" + zero2 + (explain ? WithoutPins(r) : ""));
    return Status::Error("--gpus: no layout of " + std::to_string(r.gpus) +
                         " GPUs satisfies the constraints (tp must divide " +
                         std::to_string(r.model.heads) + " heads and " +
                         std::to_string(r.model.kv_heads) + " kv heads and fit in a node of " +
                         std::to_string(r.gpus_per_node) + "; pp must divide " +
                         std::to_string(r.model.layers) + " layers" +
                         (zero2.empty() ? "" : "; ZeRO-2 needs pp=1 and dp*cp > 1") + ")");
  }
  if (!explain) return Status::Error("--global-batch: no data-parallel size divides it");
  return Status::Error(BatchMessage(r, any));
}

// The evaluated layouts the search keeps: the best fitting one per (t, cp, p, d, ep, FSDP shard
// group), every one
// that does not fit, and the one that needs the least memory.
class Candidates {
 public:
  void Add(const PlanCandidate& c) {
    if (!have_smallest_ || c.memory.total_gib < smallest_.memory.total_gib) {
      smallest_ = c;
      have_smallest_ = true;
    }
    if (!c.fits) {
      unfit_.push_back(c);
      return;
    }
    const Layout& l = c.layout;
    auto key = std::make_tuple(l.tp, l.cp, l.pp, l.dp, l.ep, l.fsdp_shard);
    auto it = best_per_layout_.find(key);
    if (it == best_per_layout_.end()) {
      best_per_layout_.emplace(key, c);
    } else if (Better(c, it->second)) {
      it->second = c;
    }
  }

  bool any_fits() const { return !best_per_layout_.empty(); }
  const PlanCandidate& smallest() const { return smallest_; }
  const std::vector<PlanCandidate>& unfit() const { return unfit_; }

  // The best fitting candidate of each (t, cp, p, d, ep, FSDP shard group), best first.
  std::vector<PlanCandidate> Ranked() const {
    std::vector<PlanCandidate> ranked;
    ranked.reserve(best_per_layout_.size());
    for (auto& entry : best_per_layout_) ranked.push_back(entry.second);
    std::sort(ranked.begin(), ranked.end(), Better);
    return ranked;
  }

 private:
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>, PlanCandidate>
      best_per_layout_;
  PlanCandidate smallest_;
  bool have_smallest_ = false;
  std::vector<PlanCandidate> unfit_;
};

// Full recompute of every layer fits but selective does not: the layout that recomputes just
// enough layers of each chunk in full (memory falls linearly with their number), when one fits.
// `full`: `l` evaluated.
std::optional<PlanCandidate> PartialRecompute(const PlanRequest& r, const Layout& l,
                                              const PlanCandidate& full, double usable) {
  const int64_t chunk = CeilDiv(CeilDiv(r.model.layers, l.pp), l.vpp);
  // Pinned full recompute means every layer unless its layers are pinned too (--recompute full
  // alone is what torchtitan, DeepSpeed and Accelerate run: every layer checkpointed).
  if (l.recompute != Recompute::kFull || !full.fits || chunk < 2 || r.recompute_layers ||
      r.recompute) {
    return std::nullopt;
  }
  Layout sel_layout = l;
  sel_layout.recompute = Recompute::kSelective;
  const PlanCandidate sel = EvaluateLayout(r, sel_layout);
  if (sel.fits) return std::nullopt;
  const double saving_per_layer = (sel.memory.total_gib - full.memory.total_gib) / D(chunk);
  if (!(saving_per_layer > 0)) return std::nullopt;
  int64_t k = static_cast<int64_t>(std::ceil((sel.memory.total_gib - usable) / saving_per_layer));
  for (k = std::max<int64_t>(1, k); k < chunk; ++k) {
    Layout partial = l;
    partial.recompute_layers = k;
    PlanCandidate pc = EvaluateLayout(r, partial);
    if (pc.fits) return pc;
  }
  return std::nullopt;
}

Candidates EvaluateAll(const PlanRequest& r, const std::vector<Layout>& layouts, double usable) {
  Candidates out;
  for (const Layout& l : layouts) {
    const PlanCandidate c = EvaluateLayout(r, l);
    out.Add(c);
    if (auto partial = PartialRecompute(r, l, c, usable)) out.Add(*partial);
  }
  return out;
}

// The layouts evaluated again with bf16 gradients: what the search falls back to when no layout
// fits with fp32 and the precision is not pinned (bf16 reduction changes the numerics, so it is
// never taken for speed alone).
Candidates EvaluateWithBf16Grads(const PlanRequest& r, std::vector<Layout> layouts, double usable) {
  for (Layout& l : layouts) l.grad_reduce = GradReduce::kBf16;
  return EvaluateAll(r, layouts, usable);
}

// No layout fits: how much the smallest one needs and, with `explain`, what would fit.
Status DoesNotFitError(const PlanRequest& r, const PlanCandidate& smallest, double usable,
                       bool explain) {
  if (!explain) return Status::Error("does not fit");
  if (Pinned(r)) {
    const std::vector<std::string> fixes = SettingFixes(r);
    return Status::Error(PinnedLabel(r) + ": does not fit: the smallest configuration (" +
                         DescribeKnobs(smallest.layout, r.model.layers) + ") needs " +
                         Fixed(smallest.memory.total_gib, 1) + " GiB per GPU, " + Fixed(usable, 1) +
                         " GiB usable on " + r.gpu.name +
                         (fixes.empty() ? "" : "; it plans with " + Join(fixes, " or with ")) +
                         WithoutPins(r));
  }
  return Status::Error(CannotFitMessage(r, smallest, usable));
}

// A plan of the request before any layout is chosen: what it plans and on what.
Plan PlanOf(const PlanRequest& r, double usable, size_t candidates) {
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
  plan.mem_headroom = r.headroom_fraction;
  plan.tp_comm_overlap = r.tp_comm_overlap;
  plan.candidates_evaluated = static_cast<int64_t>(candidates);
  plan.calibration = r.calibration;
  return plan;
}

// Of the layouts that would be faster than `chosen` but do not fit, the one closest to fitting.
std::optional<PlanCandidate> ClosestFasterUnfit(const std::vector<PlanCandidate>& unfit,
                                                const PlanCandidate& chosen) {
  std::optional<PlanCandidate> closest;
  for (const PlanCandidate& c : unfit) {
    if (c.step_time_s >= chosen.step_time_s) continue;
    if (!closest || c.memory.total_gib < closest->memory.total_gib) closest = c;
  }
  return closest;
}

// The fastest fitting candidate, and up to top_k alternatives, each with why it lost: the next
// fastest fitting ones and, in the last slot, the closest faster one that does not fit.
void Choose(const PlanRequest& r, const Candidates& candidates, double usable, Plan* plan) {
  const std::vector<PlanCandidate> ranked = candidates.Ranked();
  const size_t chosen = ChooseSimplest(ranked);
  plan->chosen = ranked[chosen];
  if (chosen != 0) {
    plan->set_aside = ranked.front();
    plan->set_aside->reason = FasterButNotSimplerReason(plan->chosen, ranked.front());
  }
  std::optional<PlanCandidate> unfit;
  if (r.top_k > 0) unfit = ClosestFasterUnfit(candidates.unfit(), plan->chosen);
  const size_t fitting_slots = static_cast<size_t>(r.top_k) - (unfit ? 1 : 0);
  for (size_t i = 1; i < ranked.size() && plan->alternatives.size() < fitting_slots; ++i) {
    if (i == chosen) continue;
    PlanCandidate alt = ranked[i];
    alt.reason = alt.step_time_s < plan->chosen.step_time_s
                     ? FasterButNotSimplerReason(plan->chosen, alt)
                     : SlowerReason(plan->chosen, alt);
    plan->alternatives.push_back(alt);
  }
  if (unfit) {
    unfit->reason = "does not fit: needs " + Fixed(unfit->memory.total_gib, 1) + " GiB per GPU, " +
                    Fixed(usable, 1) + " GiB usable (would be " +
                    Fixed((1.0 - unfit->step_time_s / plan->chosen.step_time_s) * 100.0, 1) +
                    "% faster)";
    plan->alternatives.push_back(*unfit);
  }
}

// The batches near the request's that allow a data-parallel size larger than `d`, which the
// request's batch rules out: the nearest multiples of each, within kNearbyBatchFraction, nearest
// first (the smaller first on a tie).
std::vector<int64_t> NearbyBatches(const PlanRequest& r, int64_t d) {
  std::vector<Layout> any;
  Enumerate(r, r.gpus, true, &any);
  const int64_t b = r.global_batch;
  const int64_t span = std::max<int64_t>(1, std::llround(D(b) * kNearbyBatchFraction));
  std::set<int64_t> found;
  for (const Layout& l : any) {
    if (l.dp <= d || b % l.dp == 0) continue;
    for (int64_t near : {b / l.dp * l.dp, CeilDiv(b, l.dp) * l.dp}) {
      if (near >= 1 && std::llabs(near - b) <= span) found.insert(near);
    }
  }
  std::vector<int64_t> out(found.begin(), found.end());
  std::stable_sort(out.begin(), out.end(), [&](int64_t x, int64_t y) {
    return std::llabs(x - b) < std::llabs(y - b);
  });
  return out;
}

// A nearby batch whose plan's MFU beats `chosen`'s by more than kBatchAdviceMfuPoints: of the
// nearest such batches, the one that plans best. Every batch advised was planned.
std::optional<BatchAdvice> AdviseBatch(const PlanRequest& r, const PlanCandidate& chosen) {
  std::optional<BatchAdvice> best;
  int searches = 0;
  for (int64_t b : NearbyBatches(r, chosen.layout.dp)) {
    if (best && std::llabs(b - r.global_batch) > std::llabs(best->global_batch - r.global_batch))
      break;  // a farther batch: the nearest that plans well is advised
    if (++searches > kBatchAdviceSearches) break;
    PlanRequest q = r;
    q.global_batch = b;
    q.top_k = 0;
    auto plan = Search(q, false);
    if (!plan.ok() || plan->chosen.mfu - chosen.mfu <= kBatchAdviceMfuPoints) continue;
    if (!best || plan->chosen.mfu > best->plan.mfu) best = BatchAdvice{b, plan->chosen};
  }
  return best;
}

// The best layout the search finds without the request's pins.
std::optional<PlanCandidate> BestUnpinned(const PlanRequest& r) {
  PlanRequest q = Unpinned(r);
  q.top_k = 0;
  auto free = Search(q, false);
  if (!free.ok()) return std::nullopt;
  return free->chosen;
}

// The search; `explain`: refusals name changes that plan, and a pinned plan is compared with the
// best one found without its pins (both plan again, with explain off).
Result<Plan> Search(const PlanRequest& request, bool explain) {
  Status valid = ValidateRequest(request);
  if (!valid.ok()) return valid;
  PlanRequest r = request;
  if (r.seq_len == 0) r.seq_len = r.model.seq_len;
  const double usable = r.gpu.mem_gib * (1.0 - r.headroom_fraction);
  if (std::string why = GradShardingPinError(r); !why.empty()) {
    return Status::Error(why + (explain ? WithoutPins(r) : ""));
  }
  if (Pinned(r)) {
    std::string why = PinnedConstraintError(r, r.seq_len);
    if (!why.empty()) return Status::Error(why + (explain ? WithoutPins(r) : ""));
  }
  std::vector<Layout> layouts;
  layouts.reserve(4096);
  Enumerate(r, r.gpus, false, &layouts);
  if (layouts.empty()) return NoLayoutError(r, explain);
  Candidates candidates = EvaluateAll(r, layouts, usable);
  const bool fallback = !candidates.any_fits() && !r.grad_reduce;
  if (fallback) candidates = EvaluateWithBf16Grads(r, layouts, usable);
  if (!candidates.any_fits()) return DoesNotFitError(r, candidates.smallest(), usable, explain);
  Plan plan = PlanOf(r, usable, layouts.size());
  plan.grad_reduce_fallback = fallback;
  Choose(r, candidates, usable, &plan);
  if (explain && Pinned(r)) plan.unpinned = BestUnpinned(r);
  if (auto ceiling = PublishedCeilingFor(r.gpu.name, plan.params)) {
    if (plan.chosen.mfu > ceiling->mfu) plan.above_published = ceiling;
  }
  if (explain && !Pinned(r) && !r.micro_batch) plan.batch_advice = AdviseBatch(r, plan.chosen);
  return plan;
}

}  // namespace
}  // namespace autopar
