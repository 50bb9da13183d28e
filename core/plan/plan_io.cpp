// Plan I/O: JSON, the task environment, Megatron-LM arguments, DeepSpeed config, human text.
#include <json/json.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>

#include "core/json_fields.h"
#include "core/plan/planner.h"
#include "core/text.h"

namespace autopar {
namespace {

std::string Thousands(double v) {
  const long long n = std::llround(v);
  std::string digits = std::to_string(n);
  std::string out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count > 0 && count % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++count;
  }
  return out;
}

// 0.87 -> "0.87", 0.3125 -> "0.312": three significant digits, as the factor is measured.
std::string FormatFactor(double f) {
  char buf[32];
  (void)std::snprintf(buf, sizeof(buf), "%.3g", f);
  return buf;
}

std::string Write(const Json::Value& v, bool pretty) {
  Json::StreamWriterBuilder w;
  w["indentation"] = pretty ? "  " : "";
  w["precision"] = 10;
  return Json::writeString(w, v);
}

Json::Value CandidateToJson(const PlanCandidate& c) {
  Json::Value v(Json::objectValue);
  const Layout& l = c.layout;
  v["tp"] = Json::Int64(l.tp);
  v["cp"] = Json::Int64(l.cp);
  v["ep"] = Json::Int64(l.ep);
  v["pp"] = Json::Int64(l.pp);
  v["dp"] = Json::Int64(l.dp);
  v["micro_batch"] = Json::Int64(l.micro_batch);
  v["grad_accum"] = Json::Int64(l.grad_accum);
  v["vpp"] = Json::Int64(l.vpp);
  v["recompute"] = RecomputeName(l.recompute);
  v["recompute_layers"] = Json::Int64(l.recompute_layers);
  v["optimizer_sharding"] = l.optimizer_sharding();
  v["grad_sharding"] = l.grad_sharding();
  v["grad_reduce"] = GradReduceName(l.grad_reduce);
  v["sequence_parallel"] = l.sequence_parallel;
  v["fsdp_shard"] = Json::Int64(l.fsdp_shard);
  v["fsdp_replicate"] = Json::Int64(l.fsdp_replicate());
  v["mem_per_gpu_gib"] = c.memory.total_gib;
  v["step_time_s"] = c.step_time_s;
  v["tokens_per_s"] = c.tokens_per_s;
  v["samples_per_s"] = c.samples_per_s;
  v["mfu"] = c.mfu;
  v["fits"] = c.fits;
  Json::Value mem(Json::objectValue);
  mem["weights_gib"] = c.memory.weights_gib;
  mem["grads_gib"] = c.memory.grads_gib;
  mem["optimizer_gib"] = c.memory.optimizer_gib;
  mem["activations_gib"] = c.memory.activations_gib;
  mem["transient_gib"] = c.memory.transient_gib;
  mem["total_gib"] = c.memory.total_gib;
  v["memory"] = mem;
  Json::Value time(Json::objectValue);
  time["compute_s"] = c.time.compute_s;
  time["elementwise_s"] = c.time.elementwise_s;
  time["recompute_s"] = c.time.recompute_s;
  time["tp_comm_s"] = c.time.tp_comm_s;
  time["tp_comm_hidden_s"] = c.time.tp_comm_hidden_s;
  time["cp_comm_s"] = c.time.cp_comm_s;
  time["ep_comm_s"] = c.time.ep_comm_s;
  time["bubble_s"] = c.time.bubble_s;
  time["p2p_s"] = c.time.p2p_s;
  time["dp_comm_s"] = c.time.dp_comm_s;
  time["dp_comm_exposed_s"] = c.time.dp_comm_exposed_s;
  time["optimizer_s"] = c.time.optimizer_s;
  time["total_s"] = c.time.total_s;
  v["time"] = time;
  if (!c.reason.empty()) v["reason"] = c.reason;
  return v;
}

Json::Value TorchtitanJson(const Plan& plan);  // below, with the other frameworks' arguments
Json::Value AccelerateJson(const Plan& plan);

// Field readers that remember the first error (named by its key path).
class Reader {
 public:
  explicit Reader(std::string* error) : error_(error) {}
  int64_t Int(const Json::Value& obj, const std::string& path, const char* key) {
    const Json::Value& v = obj[key];
    if (!v.isIntegral()) return Fail<int64_t>(path + key, "an integer");
    return v.asInt64();
  }
  double Num(const Json::Value& obj, const std::string& path, const char* key) {
    const Json::Value& v = obj[key];
    if (!v.isNumeric()) return Fail<double>(path + key, "a number");
    return v.asDouble();
  }
  bool Bool(const Json::Value& obj, const std::string& path, const char* key) {
    const Json::Value& v = obj[key];
    if (!v.isBool()) return Fail<bool>(path + key, "true or false");
    return v.asBool();
  }
  std::string Str(const Json::Value& obj, const std::string& path, const char* key) {
    const Json::Value& v = obj[key];
    if (!v.isString()) return Fail<std::string>(path + key, "a string");
    return v.asString();
  }

 private:
  template <typename T>
  T Fail(const std::string& key, const char* what) {
    if (error_->empty()) *error_ = "plan JSON: '" + key + "': missing or not " + what;
    return T();
  }
  std::string* error_;
};

PlanCandidate CandidateFromJson(const Json::Value& v, const std::string& path, Reader& r,
                                std::string* error) {
  PlanCandidate c;
  Layout& l = c.layout;
  l.tp = r.Int(v, path, "tp");
  l.cp = v.isMember("cp") ? r.Int(v, path, "cp") : 1;  // plans written before context parallelism
  l.ep = v.isMember("ep") ? r.Int(v, path, "ep") : 1;  // and before expert parallelism
  l.pp = r.Int(v, path, "pp");
  l.dp = r.Int(v, path, "dp");
  l.micro_batch = r.Int(v, path, "micro_batch");
  l.grad_accum = r.Int(v, path, "grad_accum");
  l.vpp = r.Int(v, path, "vpp");
  auto rc = ParseRecompute(r.Str(v, path, "recompute"));
  if (rc.ok()) {
    l.recompute = *rc;
  } else if (error->empty()) {
    *error = "plan JSON: '" + path + "recompute': " + rc.message();
  }
  l.recompute_layers = r.Int(v, path, "recompute_layers");
  const bool optimizer_sharding = r.Bool(v, path, "optimizer_sharding");
  // Plans written before ZeRO-2 was a choice kept whole gradients.
  const bool grad_sharding = v.isMember("grad_sharding") && r.Bool(v, path, "grad_sharding");
  l.dp_sharding = grad_sharding        ? DataParallelSharding::kOptimizerGrads
                  : optimizer_sharding ? DataParallelSharding::kOptimizer
                                       : DataParallelSharding::kNone;
  if (error->empty() && grad_sharding && !optimizer_sharding) {
    *error = "plan JSON: '" + path +
             "grad_sharding': ZeRO-2 shards the optimizer states too (optimizer_sharding false)";
  }
  // Plans written before the gradient precision was a choice reduced in fp32.
  if (v.isMember("grad_reduce")) {
    auto g = ParseGradReduce(r.Str(v, path, "grad_reduce"));
    if (g.ok()) {
      l.grad_reduce = *g;
    } else if (error->empty()) {
      *error = "plan JSON: '" + path + "grad_reduce': " + g.message();
    }
  }
  l.sequence_parallel = r.Bool(v, path, "sequence_parallel");
  // Plans written before FSDP was modelled have no shard group (0: not FSDP); the replicas follow
  // from dp and are checked below.
  l.fsdp_shard = v.isMember("fsdp_shard") ? r.Int(v, path, "fsdp_shard") : 0;
  const int64_t replicate = v.isMember("fsdp_replicate") ? r.Int(v, path, "fsdp_replicate") : 0;
  c.step_time_s = r.Num(v, path, "step_time_s");
  c.tokens_per_s = r.Num(v, path, "tokens_per_s");
  c.samples_per_s = r.Num(v, path, "samples_per_s");
  c.mfu = r.Num(v, path, "mfu");
  c.fits = r.Bool(v, path, "fits");
  const Json::Value& mem = v["memory"];
  const std::string mp = path + "memory.";
  c.memory.weights_gib = r.Num(mem, mp, "weights_gib");
  c.memory.grads_gib = r.Num(mem, mp, "grads_gib");
  c.memory.optimizer_gib = r.Num(mem, mp, "optimizer_gib");
  c.memory.activations_gib = r.Num(mem, mp, "activations_gib");
  c.memory.transient_gib = r.Num(mem, mp, "transient_gib");
  c.memory.total_gib = r.Num(mem, mp, "total_gib");
  const Json::Value& time = v["time"];
  const std::string tp = path + "time.";
  c.time.compute_s = r.Num(time, tp, "compute_s");
  c.time.elementwise_s = r.Num(time, tp, "elementwise_s");
  c.time.recompute_s = r.Num(time, tp, "recompute_s");
  c.time.tp_comm_s = r.Num(time, tp, "tp_comm_s");
  c.time.tp_comm_hidden_s =
      time.isMember("tp_comm_hidden_s") ? r.Num(time, tp, "tp_comm_hidden_s") : 0.0;
  c.time.cp_comm_s = time.isMember("cp_comm_s") ? r.Num(time, tp, "cp_comm_s") : 0.0;
  c.time.ep_comm_s = time.isMember("ep_comm_s") ? r.Num(time, tp, "ep_comm_s") : 0.0;
  c.time.bubble_s = r.Num(time, tp, "bubble_s");
  c.time.p2p_s = r.Num(time, tp, "p2p_s");
  c.time.dp_comm_s = r.Num(time, tp, "dp_comm_s");
  c.time.dp_comm_exposed_s = r.Num(time, tp, "dp_comm_exposed_s");
  c.time.optimizer_s = r.Num(time, tp, "optimizer_s");
  c.time.total_s = r.Num(time, tp, "total_s");
  if (v.isMember("reason")) c.reason = r.Str(v, path, "reason");
  if (error->empty() &&
      (l.tp < 1 || l.cp < 1 || l.ep < 1 || l.pp < 1 || l.dp < 1 || l.micro_batch < 1 || l.grad_accum < 1 ||
       l.vpp < 1)) {
    *error = "plan JSON: '" + path +
             "': tp, cp, ep, pp, dp, micro_batch, grad_accum and vpp must be >= 1";
  }
  if (error->empty() &&
      (l.fsdp_shard < 0 ||
       (l.fsdp_shard > 0 && (l.dp % l.fsdp_shard != 0 || replicate != l.fsdp_replicate())))) {
    *error = "plan JSON: '" + path + "fsdp_shard': fsdp_shard * fsdp_replicate must be dp (" +
             std::to_string(l.dp) + ")";
  }
  return c;
}

}  // namespace

std::string CalibrationLabel(const PlanCalibration& calibration) {
  return "calibrated x" + FormatFactor(calibration.factor) + " from job " + calibration.job;
}

std::string PlanToJson(const Plan& plan, bool with_alternatives) {
  Json::Value v = CandidateToJson(plan.chosen);
  v["model"] = plan.model_name;
  v["params"] = plan.params;
  v["layers"] = Json::Int64(plan.layers);
  if (plan.experts > 0) {
    Json::Value moe(Json::objectValue);
    moe["experts"] = Json::Int64(plan.experts);
    moe["experts_per_token"] = Json::Int64(plan.experts_per_token);
    moe["expert_ffn_hidden"] = Json::Int64(plan.expert_ffn_hidden);
    moe["shared_experts"] = Json::Int64(plan.shared_experts);
    moe["active_params"] = plan.active_params;
    v["moe"] = moe;
  }
  v["gpu"] = plan.gpu_name;
  v["gpus"] = Json::Int64(plan.gpus);
  v["gpus_per_node"] = Json::Int64(plan.gpus_per_node);
  v["global_batch"] = Json::Int64(plan.global_batch);
  v["seq_len"] = Json::Int64(plan.seq_len);
  v["mem_usable_gib"] = plan.mem_usable_gib;
  v["mem_headroom"] = plan.mem_headroom;
  v["tp_comm_overlap"] = plan.tp_comm_overlap;
  if (plan.grad_reduce_fallback) v["grad_reduce_fallback"] = true;
  v["candidates_evaluated"] = Json::Int64(plan.candidates_evaluated);
  if (plan.calibration) {
    v["calibration"]["factor"] = plan.calibration->factor;
    v["calibration"]["job"] = plan.calibration->job;
  }
  if (plan.above_published) {
    v["above_published"]["mfu"] = plan.above_published->mfu;
    v["above_published"]["run"] = plan.above_published->run;
    v["above_published"]["reason"] = AbovePublishedText(plan);
  }
  if (with_alternatives) {
    Json::Value alts(Json::arrayValue);
    for (const auto& a : plan.alternatives) alts.append(CandidateToJson(a));
    v["alternatives"] = alts;
    if (plan.unpinned) v["unpinned"] = CandidateToJson(*plan.unpinned);
    if (plan.set_aside) v["set_aside"] = CandidateToJson(*plan.set_aside);
    Json::Value& fw = v["frameworks"];
    fw["megatron_args"] = MegatronArgs(plan);
    Json::CharReaderBuilder builder;
    std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
    const std::string ds = DeepSpeedConfigJson(plan);
    reader->parse(ds.data(), ds.data() + ds.size(), &fw["deepspeed_config"], nullptr);
    fw["torchtitan"] = TorchtitanJson(plan);
    fw["accelerate"] = AccelerateJson(plan);
    if (plan.batch_advice) {
      Json::Value advice = CandidateToJson(plan.batch_advice->plan);
      advice["global_batch"] = Json::Int64(plan.batch_advice->global_batch);
      advice["reason"] = BatchAdviceText(plan);
      v["batch_advice"] = advice;
    }
  }
  return Write(v, false);
}

Result<Plan> PlanFromJson(const std::string& json) {
  Json::CharReaderBuilder builder;
  Json::Value root;
  std::string errors;
  std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
  if (!reader->parse(json.data(), json.data() + json.size(), &root, &errors)) {
    return Status::Error("plan JSON: not valid JSON: " + JsonParseError(errors));
  }
  if (!root.isObject()) return Status::Error("plan JSON: expected an object");
  std::string error;
  Reader r(&error);
  Plan plan;
  plan.chosen = CandidateFromJson(root, "", r, &error);
  plan.model_name = r.Str(root, "", "model");
  plan.params = r.Num(root, "", "params");
  plan.layers = r.Int(root, "", "layers");
  plan.active_params = plan.params;
  if (root.isMember("moe")) {
    const Json::Value& moe = root["moe"];
    plan.experts = r.Int(moe, "moe.", "experts");
    plan.experts_per_token = r.Int(moe, "moe.", "experts_per_token");
    plan.expert_ffn_hidden = r.Int(moe, "moe.", "expert_ffn_hidden");
    plan.shared_experts = r.Int(moe, "moe.", "shared_experts");
    plan.active_params = r.Num(moe, "moe.", "active_params");
  }
  plan.gpu_name = r.Str(root, "", "gpu");
  plan.gpus = r.Int(root, "", "gpus");
  plan.gpus_per_node = r.Int(root, "", "gpus_per_node");
  plan.global_batch = r.Int(root, "", "global_batch");
  plan.seq_len = r.Int(root, "", "seq_len");
  plan.mem_usable_gib = r.Num(root, "", "mem_usable_gib");
  // Plans written before the overlap was modelled had none.
  plan.tp_comm_overlap = root.isMember("tp_comm_overlap") && r.Bool(root, "", "tp_comm_overlap");
  plan.grad_reduce_fallback =
      root.isMember("grad_reduce_fallback") && r.Bool(root, "", "grad_reduce_fallback");
  // Plans written before the headroom was a setting kept 10% free.
  plan.mem_headroom = root.isMember("mem_headroom") ? r.Num(root, "", "mem_headroom") : 0.10;
  plan.candidates_evaluated = r.Int(root, "", "candidates_evaluated");
  if (root.isMember("alternatives")) {
    const Json::Value& alts = root["alternatives"];
    if (!alts.isArray()) return Status::Error("plan JSON: 'alternatives': not a list");
    for (Json::ArrayIndex i = 0; i < alts.size(); ++i) {
      plan.alternatives.push_back(
          CandidateFromJson(alts[i], "alternatives[" + std::to_string(i) + "].", r, &error));
    }
  }
  if (root.isMember("unpinned")) plan.unpinned = CandidateFromJson(root["unpinned"], "unpinned.", r, &error);
  if (root.isMember("batch_advice")) {
    BatchAdvice advice;
    advice.plan = CandidateFromJson(root["batch_advice"], "batch_advice.", r, &error);
    advice.global_batch = r.Int(root["batch_advice"], "batch_advice.", "global_batch");
    plan.batch_advice = advice;
  }
  if (root.isMember("set_aside")) {
    plan.set_aside = CandidateFromJson(root["set_aside"], "set_aside.", r, &error);
  }
  if (root.isMember("calibration")) {  // plans made with a site calibration file
    PlanCalibration cal;
    cal.factor = r.Num(root["calibration"], "calibration.", "factor");
    cal.job = r.Str(root["calibration"], "calibration.", "job");
    plan.calibration = cal;
  }
  // The ceiling is the built-in one for the plan's GPU type and size (its text is rebuilt).
  if (root.isMember("above_published")) {
    plan.above_published = PublishedCeilingFor(plan.gpu_name, plan.params);
  }
  if (!error.empty()) return Status::Error(error);
  const Layout& l = plan.chosen.layout;
  if (l.ep > 1 && (plan.experts % l.ep != 0 || (l.tp * l.dp * l.cp) % l.ep != 0)) {
    return Status::Error("plan JSON: ep=" + std::to_string(l.ep) +
                         " must divide the experts and tp*dp*cp");
  }
  if (l.tp * l.cp * l.pp * l.dp != plan.gpus) {
    return Status::Error("plan JSON: tp*cp*pp*dp=" + std::to_string(l.tp * l.cp * l.pp * l.dp) +
                         " but gpus=" + std::to_string(plan.gpus));
  }
  return plan;
}

std::string MegatronArgs(const Plan& plan) {
  const Layout& l = plan.chosen.layout;
  std::ostringstream os;
  os << "--tensor-model-parallel-size " << l.tp << " --pipeline-model-parallel-size " << l.pp
     << " --micro-batch-size " << l.micro_batch << " --global-batch-size " << plan.global_batch
     << " --seq-length " << plan.seq_len;
  if (l.cp > 1) os << " --context-parallel-size " << l.cp << " --cp-comm-type p2p";
  if (plan.experts > 0) {
    os << " --num-experts " << plan.experts << " --moe-router-topk " << plan.experts_per_token
       << " --moe-ffn-hidden-size " << plan.expert_ffn_hidden;
    if (plan.shared_experts > 0) {
      os << " --moe-shared-expert-intermediate-size " << plan.shared_experts * plan.expert_ffn_hidden;
    }
    os << " --expert-model-parallel-size " << l.ep;
    if (l.expert_tp() != l.tp) os << " --expert-tensor-parallel-size " << l.expert_tp();
    os << " --moe-token-dispatcher-type alltoall --moe-grouped-gemm";
  }
  if (l.sequence_parallel) os << " --sequence-parallel";
  // Transformer Engine's TP communication/GEMM overlap, which the time model counts on.
  if (l.tp > 1 && l.sequence_parallel && plan.tp_comm_overlap) os << " --tp-comm-overlap";
  if (l.recompute == Recompute::kSelective) {
    os << " --recompute-granularity selective";
  } else if (l.recompute == Recompute::kFull && l.recompute_layers > 0) {
    // The first k layers of each chunk are recomputed in full, the others keep their activations
    // (the planner costs them with selective recompute, which FlashAttention-style kernels give).
    os << " --recompute-granularity full --recompute-method block --recompute-num-layers "
       << l.recompute_layers;
  } else if (l.recompute == Recompute::kFull) {
    os << " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1";
  }
  if (l.vpp > 1 && plan.layers % (l.pp * l.vpp) == 0) {
    os << " --num-layers-per-virtual-pipeline-stage " << plan.layers / (l.pp * l.vpp);
  } else if (l.pp > 1 && plan.layers % (l.pp * l.vpp) != 0) {
    const std::vector<int64_t> chunks = ChunkLayers(plan.layers, l.pp, l.vpp);
    if (l.vpp == 1 && !chunks.empty()) {
      // Uneven stages: the first and last hold fewer (Megatron-Core 0.9+).
      os << " --decoder-first-pipeline-num-layers " << chunks.front()
         << " --decoder-last-pipeline-num-layers " << chunks.back();
    } else if (!chunks.empty()) {
      // Uneven and interleaved: every virtual stage spelled out (Megatron-Core's layout string;
      // E = embedding, t = a transformer layer, L = the loss; chunk c runs on stage c % pp).
      std::string layout;
      for (size_t c = 0; c < chunks.size(); ++c) {
        if (c > 0) layout += "|";
        if (c == 0) layout += "E";
        layout += "t*" + std::to_string(chunks[c]);
        if (c + 1 == chunks.size()) layout += "L";
      }
      os << " --pipeline-model-parallel-layout \"" << layout << "\"";
    }
  }
  if (l.fsdp() || l.grad_sharding()) {
    // Megatron-FSDP (Megatron-Core): weights, gradients and optimizer states sharded over the
    // data-parallel ranks, or over groups of fsdp_shard with the replicas' optimizer instances;
    // ZeRO-2 is its optim_grads strategy (weights whole, the gradients reduce-scattered after
    // every micro-batch: megatron/core/distributed/fsdp/mcore_fsdp_adapter.py).
    os << " --use-megatron-fsdp --data-parallel-sharding-strategy "
       << (l.fsdp() ? "optim_grads_params" : "optim_grads")
       << " --use-distributed-optimizer --overlap-param-gather --ckpt-format fsdp_dtensor";
    if (l.fsdp_replicate() > 1)
      os << " --num-distributed-optimizer-instances " << l.fsdp_replicate();
  } else if (l.optimizer_sharding()) {
    os << " --use-distributed-optimizer --overlap-param-gather";
  }
  if (l.dp > 1) os << " --overlap-grad-reduce";
  // The gradient precision the memory and time model counted (with --bf16 Megatron accumulates
  // and reduces in fp32 unless told --grad-reduce-in-bf16).
  os << " --bf16"
     << (l.grad_reduce == GradReduce::kBf16 ? " --grad-reduce-in-bf16"
                                            : " --accumulate-allreduce-grads-in-fp32");
  return os.str();
}

std::string DeepSpeedConfigJson(const Plan& plan) {
  const Layout& l = plan.chosen.layout;
  Json::Value v(Json::objectValue);
  v["train_batch_size"] = Json::Int64(plan.global_batch);
  v["train_micro_batch_size_per_gpu"] = Json::Int64(l.micro_batch);
  v["gradient_accumulation_steps"] = Json::Int64(l.grad_accum);
  Json::Value zero(Json::objectValue);
  zero["stage"] = l.fsdp() ? 3 : l.grad_sharding() ? 2 : l.optimizer_sharding() ? 1 : 0;
  if (l.fsdp() || l.grad_sharding()) {
    // ZeRO-3 with its gathers and reduce-scatters overlapped (the time model's prefetch), ZeRO-2
    // with each micro-batch's reduce-scatter behind its backward pass; HSDP is DeepSpeed's MiCS:
    // shards within groups of fsdp_shard, replicated across them.
    zero["overlap_comm"] = true;
    zero["contiguous_gradients"] = true;
    if (l.fsdp_replicate() > 1) zero["mics_shard_size"] = Json::Int64(l.fsdp_shard);
  }
  v["zero_optimization"] = zero;
  Json::Value bf16(Json::objectValue);
  bf16["enabled"] = true;
  v["bf16"] = bf16;
  // Gradients accumulated and reduced in the precision the planner counts (DeepSpeed's default
  // accumulates in the model's bf16).
  v["data_types"]["grad_accum_dtype"] = GradReduceName(l.grad_reduce);
  v["communication_data_type"] = GradReduceName(l.grad_reduce);
  // Which layers are checkpointed is the program's choice (deepspeed.checkpointing wraps what it
  // is given): AUTOPAR_RECOMPUTE_LAYERS says how many per chunk the plan recomputes in full.
  if (l.recompute == Recompute::kFull) {
    Json::Value ac(Json::objectValue);
    ac["partition_activations"] = l.tp > 1;
    ac["contiguous_memory_optimization"] = false;
    ac["number_checkpoints"] = Json::Int64(1);
    v["activation_checkpointing"] = ac;
  }
  return Write(v, false);
}

namespace {

// torchtitan's JobConfig sections (torchtitan/config/configs.py). An FSDP plan is its FSDP2
// (data_parallel_shard_degree) with HSDP's replicas (data_parallel_replicate_degree). Otherwise
// its data parallelism is DDP (data_parallel_replicate_degree) only without any other
// parallelism and without sharding; else FSDP over all of d, which shards weights and gradients
// as well as the optimizer: at most the memory planned, with parameter gathers a ZeRO-1 plan's
// time does not count (plan with FSDP, --auto-parallel=fsdp, to have them counted). ZeRO-2 is
// FSDP2 that keeps the gathered weights from the forward to the backward pass
// (fsdp_reshard_after_forward never): the whole bf16 weights the plan counts, gathered once per
// micro-batch where the plan counts once per step.
Json::Value TorchtitanJson(const Plan& plan) {
  const Layout& l = plan.chosen.layout;
  const bool ddp = l.tp == 1 && l.pp == 1 && l.cp == 1 && !l.optimizer_sharding() && !l.fsdp();
  Json::Value v(Json::objectValue);
  Json::Value& par = v["parallelism"];
  // FSDP: shard groups of fsdp_shard (FSDP2's dp_shard) replicated fsdp_replicate times (HSDP).
  par["data_parallel_replicate_degree"] = Json::Int64(l.fsdp() ? l.fsdp_replicate()
                                                      : ddp    ? l.dp
                                                               : 1);
  par["data_parallel_shard_degree"] = Json::Int64(l.fsdp() ? l.fsdp_shard : ddp ? 1 : l.dp);
  par["tensor_parallel_degree"] = Json::Int64(l.tp);
  par["context_parallel_degree"] = Json::Int64(l.cp);
  par["expert_parallel_degree"] = Json::Int64(l.ep);
  par["pipeline_parallel_degree"] = Json::Int64(l.pp);
  if (l.grad_sharding()) par["fsdp_reshard_after_forward"] = "never";
  if (l.pp > 1) {
    par["pipeline_parallel_schedule"] = l.vpp > 1 ? "Interleaved1F1B" : "1F1B";
    par["pipeline_parallel_microbatch_size"] = Json::Int64(l.micro_batch);
    if (plan.layers % (l.pp * l.vpp) == 0) {
      par["pipeline_parallel_layers_per_stage"] = Json::Int64(plan.layers / (l.pp * l.vpp));
    }
  }
  // With a pipeline every micro-batch of a step is one local batch the schedule splits; without
  // one torchtitan accumulates global / (local * dp) micro-batches.
  v["training"]["local_batch_size"] =
      Json::Int64(l.pp > 1 ? l.micro_batch * l.grad_accum : l.micro_batch);
  v["training"]["global_batch_size"] = Json::Int64(plan.global_batch);
  v["training"]["seq_len"] = Json::Int64(plan.seq_len);
  if (!ddp && l.dp > 1) {
    // bf16 gathers, reduce-scatters in the planned precision (torchtitan applies both only when
    // data_parallel_shard_degree > 1; under DDP it reduces fp32 gradients, TorchtitanArgs says).
    v["training"]["mixed_precision_param"] = "bfloat16";
    v["training"]["mixed_precision_reduce"] =
        l.grad_reduce == GradReduce::kBf16 ? "bfloat16" : "float32";
  }
  v["activation_checkpoint"]["mode"] = RecomputeName(l.recompute);
  if (l.recompute == Recompute::kSelective) v["activation_checkpoint"]["selective_ac_option"] = "op";
  return v;
}

// Accelerate's config file: for an FSDP or ZeRO-2 plan its FSDP2 plugin (fsdp_config; ZeRO-2
// without resharding after forward, FSDP1's SHARD_GRAD_OP) with the ParallelismConfig sizes
// (dp_shard, dp_replicate, tp, and cp when above 1); otherwise its Megatron-LM plugin
// (megatron_lm_config), which has no key for context or expert parallelism or full recompute.
Json::Value AccelerateJson(const Plan& plan) {
  const Layout& l = plan.chosen.layout;
  const bool fsdp2 = l.fsdp() || l.grad_sharding();
  Json::Value v(Json::objectValue);
  v["distributed_type"] = fsdp2 ? "FSDP" : "MEGATRON_LM";
  v["mixed_precision"] = "bf16";
  v["num_processes"] = Json::Int64(plan.gpus);
  if (fsdp2) {
    Json::Value& f = v["fsdp_config"];
    f["fsdp_version"] = 2;
    f["fsdp_auto_wrap_policy"] = "TRANSFORMER_BASED_WRAP";
    f["fsdp_reshard_after_forward"] = l.fsdp();
    f["fsdp_activation_checkpointing"] = l.recompute == Recompute::kFull;
    f["fsdp_state_dict_type"] = "SHARDED_STATE_DICT";
    Json::Value& p = v["parallelism_config"];
    p["parallelism_config_dp_shard_size"] = Json::Int64(l.fsdp() ? l.fsdp_shard : l.dp);
    p["parallelism_config_dp_replicate_size"] = Json::Int64(l.fsdp() ? l.fsdp_replicate() : 1);
    p["parallelism_config_tp_size"] = Json::Int64(l.tp);
    if (l.cp > 1) p["parallelism_config_cp_size"] = Json::Int64(l.cp);
    return v;
  }
  Json::Value& m = v["megatron_lm_config"];
  m["megatron_lm_tp_degree"] = Json::Int64(l.tp);
  m["megatron_lm_pp_degree"] = Json::Int64(l.pp);
  m["megatron_lm_num_micro_batches"] = Json::Int64(l.grad_accum);
  m["megatron_lm_sequence_parallelism"] = l.sequence_parallel;
  m["megatron_lm_recompute_activations"] = l.recompute == Recompute::kSelective;
  m["megatron_lm_use_distributed_optimizer"] = l.optimizer_sharding();
  return v;
}

// Full recompute of only some layers (Megatron's --recompute-method block) where a framework's
// key checkpoints every layer (torchtitan's activation_checkpoint.mode full, Accelerate's
// fsdp_activation_checkpointing): what that key runs, and how to plan what it runs. "" otherwise.
std::string PartialRecomputeNote(const Plan& plan, const char* key) {
  const Layout& l = plan.chosen.layout;
  if (l.recompute != Recompute::kFull || l.recompute_layers <= 0) return "";
  return std::string(" (") + key + " recomputes every layer; the plan, " +
         RecomputePhrase(l, plan.layers) + ", is predicted faster than that: plan with " +
         "--recompute full for what it runs)";
}

std::string Scalar(const Json::Value& v) {
  if (v.isString()) return v.asString();
  if (v.isBool()) return v.asBool() ? "true" : "false";
  return std::to_string(v.asInt64());
}

}  // namespace

std::string TorchtitanArgs(const Plan& plan) {
  const Json::Value v = TorchtitanJson(plan);
  std::string out;
  for (const char* section : {"parallelism", "training", "activation_checkpoint"}) {
    for (const std::string& key : v[section].getMemberNames()) {
      out += (out.empty() ? "--" : " --") + std::string(section) + "." + key + " " +
             Scalar(v[section][key]);
    }
  }
  const Layout& l = plan.chosen.layout;
  if (l.grad_reduce == GradReduce::kBf16 && l.dp > 1 &&
      v["parallelism"]["data_parallel_shard_degree"].asInt64() == 1) {
    out += " (no key for bf16 gradient reduction under DDP: torchtitan reduces fp32 gradients)";
  }
  return out + PartialRecomputeNote(plan, "activation_checkpoint.mode full");
}

std::string AccelerateConfig(const Plan& plan) {
  const Json::Value v = AccelerateJson(plan);
  std::string out = "distributed_type: " + Scalar(v["distributed_type"]) +
                    ", mixed_precision: bf16, num_processes: " + Scalar(v["num_processes"]);
  for (const char* section : {"fsdp_config", "parallelism_config", "megatron_lm_config"}) {
    if (!v.isMember(section)) continue;
    out += ", " + std::string(section) + ": {";
    std::string sep;
    for (const std::string& key : v[section].getMemberNames()) {
      out += sep + key + ": " + Scalar(v[section][key]);
      sep = ", ";
    }
    out += "}";
  }
  const Layout& l = plan.chosen.layout;
  if (l.fsdp() || l.grad_sharding()) {
    if (l.recompute == Recompute::kSelective) {
      out += " (no key for selective recompute: apply it in the training script)";
    }
    out += PartialRecomputeNote(plan, "fsdp_activation_checkpointing");
    // Its FSDP plugin derives the reduce dtype from mixed_precision (bf16) and has no key for it
    // (accelerate's FullyShardedDataParallelPlugin.set_mixed_precision).
    if (l.grad_reduce == GradReduce::kFp32) {
      out += " (no key for fp32 gradient reduction: mixed_precision bf16 reduces in bf16; pass "
             "FullyShardedDataParallelPlugin(mixed_precision_policy={reduce_dtype: float32}) in "
             "the training script)";
    }
    return out;
  }
  if (l.grad_reduce == GradReduce::kBf16) {
    out += " (no key for bf16 gradient reduction: pass --grad-reduce-in-bf16 with the Megatron-LM "
           "arguments)";
  }
  if (l.cp > 1 || l.ep > 1 || l.recompute == Recompute::kFull) {
    out += " (no key for " + std::string(l.cp > 1 ? "context parallelism" : "") +
           (l.cp > 1 && (l.ep > 1 || l.recompute == Recompute::kFull) ? ", " : "") +
           (l.ep > 1 ? "expert parallelism" : "") +
           (l.ep > 1 && l.recompute == Recompute::kFull ? ", " : "") +
           (l.recompute == Recompute::kFull ? "full recompute" : "") +
           ": pass them with the Megatron-LM arguments)";
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> PlanTaskEnv(const Plan& plan, int rank) {
  const Layout& l = plan.chosen.layout;
  std::vector<std::pair<std::string, std::string>> env = {
      {"AUTOPAR_TP", std::to_string(l.tp)},
      {"AUTOPAR_CP", std::to_string(l.cp)},
      {"AUTOPAR_EP", std::to_string(l.ep)},
      {"AUTOPAR_PP", std::to_string(l.pp)},
      {"AUTOPAR_DP", std::to_string(l.dp)},
      {"AUTOPAR_MICRO_BATCH", std::to_string(l.micro_batch)},
      {"AUTOPAR_GRAD_ACCUM", std::to_string(l.grad_accum)},
      {"AUTOPAR_GLOBAL_BATCH", std::to_string(plan.global_batch)},
      {"AUTOPAR_SEQ_LEN", std::to_string(plan.seq_len)},
      {"AUTOPAR_RECOMPUTE", RecomputeName(l.recompute)},
      {"AUTOPAR_RECOMPUTE_LAYERS", std::to_string(l.recompute_layers)},
      {"AUTOPAR_OPTIMIZER_SHARDING", l.optimizer_sharding() ? "1" : "0"},
      {"AUTOPAR_GRAD_SHARDING", l.grad_sharding() ? "1" : "0"},
      {"AUTOPAR_GRAD_REDUCE", GradReduceName(l.grad_reduce)},
      {"AUTOPAR_VPP", std::to_string(l.vpp)},
      {"AUTOPAR_FSDP_SHARD", std::to_string(l.fsdp_shard)},
      {"AUTOPAR_FSDP_REPLICATE", std::to_string(l.fsdp_replicate())},
  };
  const int64_t world = l.tp * l.cp * l.pp * l.dp;
  if (rank >= 0 && rank < world) {
    // Megatron-LM's order: tp fastest, then cp, dp, pp.
    const int64_t r = rank;
    env.emplace_back("AUTOPAR_TP_RANK", std::to_string(r % l.tp));
    env.emplace_back("AUTOPAR_CP_RANK", std::to_string((r / l.tp) % l.cp));
    // Expert-parallel ranks: Megatron's expert order etp, ep, expert-dp, pp (etp = tp: ep
    // consecutive ranks of the cp x dp block; etp = 1: ep consecutive ranks).
    env.emplace_back("AUTOPAR_EP_RANK", std::to_string((r / l.expert_tp()) % l.ep));
    const int64_t dp_rank = (r / (l.tp * l.cp)) % l.dp;
    env.emplace_back("AUTOPAR_DP_RANK", std::to_string(dp_rank));
    if (l.fsdp()) {
      // torchtitan's mesh order (dp_replicate, dp_shard, cp, tp): shard ranks consecutive.
      env.emplace_back("AUTOPAR_FSDP_SHARD_RANK", std::to_string(dp_rank % l.fsdp_shard));
      env.emplace_back("AUTOPAR_FSDP_REPLICATE_RANK", std::to_string(dp_rank / l.fsdp_shard));
    }
    env.emplace_back("AUTOPAR_PP_RANK", std::to_string(r / (l.tp * l.cp * l.dp)));
  }
  // The layers of each pipeline stage, in stage order ("7,8,8,...,7"): for frameworks that take
  // a partition of their own (DeepSpeed's PipelineModule).
  std::vector<std::string> per_stage;
  for (int64_t n : StageLayerCounts(plan.layers, l.pp, l.vpp)) per_stage.push_back(std::to_string(n));
  if (!per_stage.empty()) env.emplace_back("AUTOPAR_STAGE_LAYERS", Join(per_stage, ","));
  env.emplace_back("AUTOPAR_PLAN_JSON", PlanToJson(plan, false));
  env.emplace_back("AUTOPAR_MEGATRON_ARGS", MegatronArgs(plan));
  env.emplace_back("AUTOPAR_DEEPSPEED_CONFIG", DeepSpeedConfigJson(plan));
  return env;
}

namespace {
// "stages:      7 + 8 x 14 + 7 layers (uneven: ...)\n" for uneven pipelines, else "".
std::string StagesLine(const Plan& plan) {
  const Layout& l = plan.chosen.layout;
  if (l.pp < 2 || plan.layers % (l.pp * l.vpp) == 0) return "";
  const std::vector<int64_t> stages = StageLayerCounts(plan.layers, l.pp, l.vpp);
  if (stages.empty()) return "";
  std::string text;
  for (size_t i = 0; i < stages.size();) {
    size_t j = i;
    while (j < stages.size() && stages[j] == stages[i]) ++j;
    if (!text.empty()) text += " + ";
    text += (j - i > 1 ? std::to_string(j - i) + " x " : "") + std::to_string(stages[i]);
    i = j;
  }
  return "stages:      " + text + " layers (uneven: the stages with the embedding and the output" +
         " layer hold fewer; costed as the largest)\n";
}
}  // namespace

namespace {
// "headroom:    8% of 80.0 GiB (6.4 GiB) kept free for ...\n".
std::string HeadroomLine(const Plan& plan) {
  const double gpu_gib = plan.mem_usable_gib / (1.0 - plan.mem_headroom);
  char pct[32];
  (void)std::snprintf(pct, sizeof(pct), "%.3g", plan.mem_headroom * 100);
  return std::string("headroom:    ") + pct + "% of " + FormatFixed(gpu_gib, 1) + " GiB (" +
         FormatFixed(gpu_gib - plan.mem_usable_gib, 1) +
         " GiB) kept free for allocator fragmentation, NCCL buffers and the CUDA context\n";
}
}  // namespace

namespace {
// "fsdp:        HSDP 8 x 4: weights, gradients and optimizer states ...\n" for FSDP plans, else "".
std::string FsdpLine(const Plan& plan) {
  const Layout& l = plan.chosen.layout;
  if (!l.fsdp()) return "";
  const std::string replicas =
      l.fsdp_replicate() > 1 ? ", each shard replicated " + std::to_string(l.fsdp_replicate()) +
                                   " times (its gradients all-reduced over the replicas)"
                             : "";
  return "fsdp:        " + FsdpPhrase(l) +
         ": weights, gradients and optimizer states sharded over groups of " +
         std::to_string(l.fsdp_shard) + " GPUs" + replicas +
         "; per micro-batch every layer all-gathered in bf16 before its forward and its backward "
         "and its gradients reduce-scattered in " + GradReduceName(l.grad_reduce) +
         ", behind the compute but the first gather and "
         "the last reduce-scatter (two layers and the embedding/output gathered at a time: "
         "transient)\n";
}

// "zero-2:      optimizer states and gradients sharded over ...\n" for ZeRO-2 plans, else "".
std::string ZeroTwoLine(const Plan& plan) {
  const Layout& l = plan.chosen.layout;
  if (!l.grad_sharding()) return "";
  return "zero-2:      optimizer states and gradients sharded over the " +
         std::to_string(l.dp * l.cp) +
         " data-parallel ranks, weights whole; the gradients reduce-scattered in " +
         GradReduceName(l.grad_reduce) +
         " after every micro-batch (behind its backward pass; one unit's gradients, a layer or "
         "the embedding and output, unsharded at a time: transient) and the bf16 weights all-gathered after the optimizer step\n";
}

// What the plan hands each framework, one line each.
std::string FrameworkLines(const Plan& plan) {
  return "arguments:\n  Megatron-LM: " + MegatronArgs(plan) + "\n  DeepSpeed:   " +
         DeepSpeedConfigJson(plan) + "\n  torchtitan:  " + TorchtitanArgs(plan) +
         "\n  Accelerate:  " + AccelerateConfig(plan) + "\n";
}
}  // namespace

std::string BatchAdviceText(const Plan& plan) {
  if (!plan.batch_advice) return "";
  const BatchAdvice& a = *plan.batch_advice;
  const Layout& l = a.plan.layout;
  const int64_t delta = a.global_batch - plan.global_batch;
  return "--global-batch=" + std::to_string(a.global_batch) + " (" + (delta > 0 ? "+" : "") +
         std::to_string(delta) + ") plans tp=" + std::to_string(l.tp) +
         (l.cp > 1 ? " cp=" + std::to_string(l.cp) : "") + " pp=" + std::to_string(l.pp) +
         " dp=" + std::to_string(l.dp) + " at " + FormatFixed(a.plan.mfu * 100, 1) +
         "% MFU against " + FormatFixed(plan.chosen.mfu * 100, 1) + "% for " +
         std::to_string(plan.global_batch) + " (it allows a data-parallel size above " +
         std::to_string(plan.chosen.layout.dp) + ")";
}

namespace {
// "under 10B", "50-200B", "200B and more".
std::string SizeRange(const PublishedCeiling& c) {
  auto billions = [](double p) { return FormatFixed(p / 1e9, 0) + "B"; };
  if (c.min_params <= 0) return "under " + billions(c.max_params);
  if (c.max_params >= 1e15) return billions(c.min_params) + " and more";
  return FormatFixed(c.min_params / 1e9, 0) + "-" + billions(c.max_params);
}
}  // namespace

std::string AbovePublishedText(const Plan& plan) {
  if (!plan.above_published) return "";
  const PublishedCeiling& c = *plan.above_published;
  return FormatFixed(plan.chosen.mfu * 100, 1) + "% is above the best MFU published for " + c.gpu +
         " at " + SizeRange(c) + " parameters, " + FormatFixed(c.mfu * 100, 1) + "% (" + c.run +
         "): the model assumes the fused kernels of the runs it was fitted on and a step without "
         "data loading, evaluation or checkpoints, and was within 5 points of the published runs "
         "it was checked on; expect less";
}

namespace {
// "tp=4 pp=4 dp=4, micro-batch 1 x 128 accumulation steps, selective recompute, ...".
std::string LayoutText(const Layout& x, int64_t layers) {
  std::string s = "tp=" + std::to_string(x.tp) +
                  (x.cp > 1 ? " cp=" + std::to_string(x.cp) : std::string()) +
                  (x.ep > 1 ? " ep=" + std::to_string(x.ep) : std::string()) +
                  " pp=" + std::to_string(x.pp) + " dp=" + std::to_string(x.dp) +
                  ", micro-batch " + std::to_string(x.micro_batch) + " x " +
                  std::to_string(x.grad_accum) + " accumulation steps, " +
                  RecomputePhrase(x, layers);
  if (x.vpp > 1) s += ", interleaved x" + std::to_string(x.vpp);
  if (x.optimizer_sharding()) s += ", " + ShardingPhrase(x);
  if (x.fsdp()) s += ", " + FsdpPhrase(x);
  if (x.sequence_parallel) s += ", sequence parallel";
  if (x.grad_reduce == GradReduce::kBf16) s += ", bf16 gradient reduction";
  return s;
}

// "gradients:   accumulated and reduced in bf16 ...\n" when the plan reduces in bf16, else "".
std::string GradReduceLine(const Plan& plan) {
  if (plan.chosen.layout.grad_reduce != GradReduce::kBf16) return "";
  return std::string("gradients:   accumulated and reduced in bf16 (2 bytes per parameter, half "
                     "the data-parallel bytes of fp32; it changes the numerics): ") +
         (plan.grad_reduce_fallback
              ? "no layout fits with fp32 (grad_reduce=fp32 refuses instead)\n"
              : "as pinned\n");
}
}  // namespace

std::string PlanToText(const Plan& plan) {
  const PlanCandidate& c = plan.chosen;
  const Layout& l = c.layout;
  auto knobs = [&](const Layout& x) { return LayoutText(x, plan.layers); };
  std::ostringstream os;
  const std::string size =
      plan.params >= 1e9 ? FormatFixed(plan.params / 1e9, 2) + "B" : FormatFixed(plan.params / 1e6, 1) + "M";
  os << "model:       " << plan.model_name << " (" << size << " parameters)\n"
     << "hardware:    " << plan.gpus << " x " << plan.gpu_name << " (" << plan.gpus_per_node
     << " per node)\n"
     << "batch:       " << plan.global_batch << " sequences x " << plan.seq_len << " tokens\n"
     << "layout:      " << knobs(l) << "\n"
     << StagesLine(plan) << "memory/GPU:  " << FormatFixed(c.memory.total_gib, 1) << " GiB of "
     << FormatFixed(plan.mem_usable_gib, 1) << " usable = weights "
     << FormatFixed(c.memory.weights_gib, 1) << " + grads " << FormatFixed(c.memory.grads_gib, 1)
     << " + optimizer " << FormatFixed(c.memory.optimizer_gib, 1) << " + activations "
     << FormatFixed(c.memory.activations_gib, 1) << " + transient "
     << FormatFixed(c.memory.transient_gib, 1) << "\n"
     << HeadroomLine(plan) << GradReduceLine(plan) << FsdpLine(plan) << ZeroTwoLine(plan)
     << "step time:   " << FormatFixed(c.step_time_s, 3)
     << " s = compute " << FormatFixed(c.time.compute_s, 3) << " + element-wise "
     << FormatFixed(c.time.elementwise_s, 3) << " + recompute "
     << FormatFixed(c.time.recompute_s, 3) << " + TP comm " << FormatFixed(c.time.tp_comm_s, 3)
     << (c.time.tp_comm_hidden_s > 0
             ? " (of " + FormatFixed(c.time.tp_comm_s + c.time.tp_comm_hidden_s, 3) + ")"
             : std::string())
     << (l.cp > 1 ? " + CP comm " + FormatFixed(c.time.cp_comm_s, 3) : std::string())
     << (l.ep > 1 ? " + EP comm " + FormatFixed(c.time.ep_comm_s, 3) : std::string())
     << " + bubble " << FormatFixed(c.time.bubble_s, 3) << " + p2p " << FormatFixed(c.time.p2p_s, 3)
     << " + DP comm " << FormatFixed(c.time.dp_comm_exposed_s, 3) << " (of "
     << FormatFixed(c.time.dp_comm_s, 3) << ")"
     << (l.fsdp() ? " [FSDP gathers and reduce-scatters]" : "") << " + optimizer "
     << FormatFixed(c.time.optimizer_s, 3) << "\n"
     << "throughput:  " << Thousands(c.tokens_per_s) << " tokens/s, "
     << FormatFixed(c.samples_per_s, 2) << " samples/s, MFU " << FormatFixed(c.mfu * 100, 1)
     << "%\n";
  if (plan.batch_advice) os << "advice:      " << BatchAdviceText(plan) << "\n";
  if (plan.above_published) os << "published:   " << AbovePublishedText(plan) << "\n";
  if (plan.set_aside) {
    const PlanCandidate& f = *plan.set_aside;
    os << "simpler:     chosen over " << knobs(f.layout) << ": " << FormatFixed(f.step_time_s, 3)
       << " s, " << FormatFixed(f.memory.total_gib, 1) << " GiB, MFU "
       << FormatFixed(f.mfu * 100, 1) << "% -- " << f.reason << "\n";
  }
  if (plan.calibration) {
    os << "calibration: " << CalibrationLabel(*plan.calibration) << " (the site's measured "
       << plan.gpu_name << " efficiency: every predicted time / "
       << FormatFactor(plan.calibration->factor) << ")\n";
  }
  if (!plan.alternatives.empty()) {
    os << "alternatives (" << plan.candidates_evaluated << " configurations evaluated):\n";
    int i = 1;
    for (const auto& a : plan.alternatives) {
      os << "  " << i++ << ". " << knobs(a.layout) << ": " << FormatFixed(a.step_time_s, 3) << " s, "
         << FormatFixed(a.memory.total_gib, 1) << " GiB, MFU " << FormatFixed(a.mfu * 100, 1) << "% -- "
         << a.reason << "\n";
    }
  }
  if (plan.unpinned) {
    const PlanCandidate& b = *plan.unpinned;
    const double pct = (c.step_time_s / b.step_time_s - 1.0) * 100.0;
    os << "best found:  " << knobs(b.layout) << ": " << FormatFixed(b.step_time_s, 3) << " s, "
       << FormatFixed(b.memory.total_gib, 1) << " GiB, MFU " << FormatFixed(b.mfu * 100, 1)
       << "% -- the pinned layout is "
       << (std::abs(pct) < 0.05 ? std::string("as fast")
                                : FormatFixed(std::abs(pct), 1) + (pct > 0 ? "% slower" : "% faster"))
       << "\n";
  }
  os << FrameworkLines(plan);
  return os.str();
}

}  // namespace autopar
