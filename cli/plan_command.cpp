// `autopar plan`: run the planner for a model on given GPUs and print the plan (text or JSON).
#include <boost/program_options.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "commands.h"
#include "core/calibration/calibration.h"
#include "core/plan/hardware.h"
#include "core/plan/model.h"
#include "core/plan/planner.h"

namespace po = boost::program_options;

namespace autopar::cli {
namespace {

constexpr char kPrefix[] = "autopar plan: ";

int UsageError(const std::string& message) {
  std::cerr << kPrefix << message << "\n";
  return 2;
}

Result<int64_t> ParseCount(const std::string& option, const std::string& text, int64_t min) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == text.c_str() || *end != '\0' || errno == ERANGE || v < min) {
    return Status::Error(option + ": invalid value '" + text +
                         "' (expected an integer >= " + std::to_string(min) + ")");
  }
  return static_cast<int64_t>(v);
}

Result<double> ParsePositive(const std::string& option, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v) ||
      v <= 0) {
    return Status::Error(option + ": invalid value '" + text + "' (expected a positive number)");
  }
  return v;
}

std::string Help(const po::options_description& desc) {
  std::ostringstream os;
  os << "usage: autopar plan --model PRESET|SIZE|FILE.json --gpus N --gpu-type T --global-batch B\n"
        "                    [--gpus-per-node G] [--seq-len S] [--top K] [--json] [overrides]\n\n"
        "Chooses tensor/pipeline/data-parallel sizes, micro-batch, activation recompute,\n"
        "optimizer sharding and interleaving from a memory and time model (docs/planner.md).\n\n"
     << desc << "\nmodels: ";
  std::string sep;
  for (const auto& n : ModelPresetNames()) {
    os << sep << n;
    sep = ", ";
  }
  os << "\nGPU types: ";
  sep.clear();
  for (const auto& n : GpuTypeNames()) {
    os << sep << n;
    sep = ", ";
  }
  os << "\n";
  return os.str();
}

// The options of `autopar plan` (its --help lists them).
po::options_description PlanOptions() {
  po::options_description desc("options");
  // Values are read as strings and converted here, so every error names its option.
  desc.add_options()("help,h", "print this help")(
      "model", po::value<std::string>(), "preset name, a size like 7B, or FILE.json (required)")(
      "gpus", po::value<std::string>(), "total GPUs of the job (required)")(
      "gpus-per-node", po::value<std::string>()->default_value("8"), "GPUs per node")(
      "gpu-type", po::value<std::string>(), "GPU preset (required)")(
      "global-batch", po::value<std::string>(), "sequences per optimizer step (required)")(
      "seq-len", po::value<std::string>(), "tokens per sequence (default: the model's)")(
      "top", po::value<std::string>()->default_value("3"), "alternatives to show")(
      "json", "print the plan as JSON")("gpu-mem-gib", po::value<std::string>(),
                                        "override: GPU memory, GiB")(
      "gpu-tflops", po::value<std::string>(), "override: dense BF16 peak, TFLOP/s")(
      "nvlink-gbps", po::value<std::string>(), "override: NVLink per GPU per direction, GB/s")(
      "net-gbps", po::value<std::string>(), "override: network per GPU per direction, GB/s")(
      "hbm-gbps", po::value<std::string>(), "override: HBM bandwidth, GB/s")(
      "gpu-efficiency", po::value<std::string>(), "override: fraction of peak large GEMMs reach")(
      "headroom", po::value<std::string>(),
      "fraction of each GPU's memory kept free for fragmentation, NCCL buffers and the CUDA "
      "context, in [0, 0.5] (default 0.08; sites set it with plan_headroom=)")(
      "calibration", po::value<std::string>(),
      "a site calibration file (autopar calibrate): plans for a GPU type in it use its factor")(
      "tp", po::value<std::string>(), "pin the tensor-parallel size")(
      "cp", po::value<std::string>(), "pin the context-parallel size")(
      "ep", po::value<std::string>(), "pin the expert-parallel size (mixtures of experts)")(
      "pp", po::value<std::string>(), "pin the pipeline-parallel size")(
      "dp", po::value<std::string>(), "pin the data-parallel size")(
      "micro-batch", po::value<std::string>(), "pin the micro-batch size")(
      "vpp", po::value<std::string>(), "pin the interleaving factor (1 = none)")(
      "recompute", po::value<std::string>(),
      "pin recompute: none, selective, full (every layer, unless --recompute-layers)")(
      "recompute-layers", po::value<std::string>(),
      "pin layers per chunk recomputed in full (0 = all)")(
      "optimizer-sharding", po::value<std::string>(),
      "pin optimizer-state sharding: on (the distributed optimizer or ZeRO-2), off")(
      "grad-sharding", po::value<std::string>(),
      "pin ZeRO-2 (gradients sharded beside the optimizer states, weights whole; pp 1, dense "
      "models): on, off (default: searched)")(
      "grad-reduce", po::value<std::string>(),
      "pin the gradient precision: fp32, bf16 (default: fp32, or bf16 when no layout fits with "
      "fp32)")(
      "fsdp", po::value<std::string>(),
      "FSDP (ZeRO-3): on (FSDP layouts only), off (none), or N (shard groups of N GPUs)")(
      "hsdp", po::value<std::string>(), "pin HSDP: S,R (shard groups of S GPUs, R replicas)")(
      "tp-comm-overlap", po::value<std::string>()->default_value("on"),
      "Megatron's --tp-comm-overlap hides 3/4 of the tensor-parallel communication: on, off "
      "(a stack without it)")(
      "dp-comm-overlap", po::value<std::string>()->default_value("on"),
      "the data-parallel (and FSDP) collectives run behind the compute: on, off (as before "
      "Megatron-Core's --overlap-grad-reduce)")(
      "attention", po::value<std::string>()->default_value("fused"),
      "the attention kernel: fused (flash attention: the scores never reach memory), unfused "
      "(Megatron-LM's and Megatron-DeepSpeed's of 2020-2022: the softmax and dropout over the "
      "materialised scores are charged as memory-bound time)")(
      "allow-cross-node-tp", "let tensor parallelism span nodes")(
      "even-stages",
      "pipeline stages must hold the same number of layers (default: uneven"
      " stages are considered, the first and last holding fewer)")(
      "allow-uneven-stages", "uneven pipeline stages (the default; kept for old scripts)");
  return desc;
}

// Errors are the line to print after kPrefix.
Status ParseCommandLine(int argc, char** argv, const po::options_description& desc,
                        po::variables_map* vm) {
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), *vm);
    po::notify(*vm);
  } catch (const po::unknown_option& e) {
    return Status::Error(e.get_option_name() + ": unknown option (see 'autopar plan --help')");
  } catch (const po::error& e) {
    return Status::Error(e.what());
  }
  return Status::Ok();
}

std::string Str(const po::variables_map& vm, const char* key) { return vm[key].as<std::string>(); }

// The job's size: GPUs, GPUs per node, global batch, sequence length; and --top.
Status ReadCounts(const po::variables_map& vm, PlanRequest* req) {
  struct CountOption {
    const char* key;
    int64_t min;
    int64_t* out;
  } counts[] = {{"gpus", 1, &req->gpus},
                {"gpus-per-node", 1, &req->gpus_per_node},
                {"global-batch", 1, &req->global_batch}};
  for (const auto& c : counts) {
    auto v = ParseCount(std::string("--") + c.key, Str(vm, c.key), c.min);
    if (!v.ok()) return v.status();
    *c.out = *v;
  }
  if (vm.count("seq-len")) {
    auto v = ParseCount("--seq-len", Str(vm, "seq-len"), 1);
    if (!v.ok()) return v.status();
    req->seq_len = *v;
  }
  auto top = ParseCount("--top", Str(vm, "top"), 0);
  if (!top.ok()) return top.status();
  req->top_k = static_cast<int>(std::min<int64_t>(*top, 1000));
  return Status::Ok();
}

// The GPU preset's numbers the options override (the GPU is then named "(modified)"), and the
// memory headroom.
Status ReadGpuOverrides(const po::variables_map& vm, PlanRequest* req) {
  struct NumberOption {
    const char* key;
    double* out;
  } numbers[] = {
      {"gpu-mem-gib", &req->gpu.mem_gib},     {"gpu-tflops", &req->gpu.bf16_tflops},
      {"nvlink-gbps", &req->gpu.nvlink_gbps}, {"net-gbps", &req->gpu.net_gbps},
      {"hbm-gbps", &req->gpu.hbm_gbps},       {"gpu-efficiency", &req->gpu.matmul_efficiency}};
  bool modified = false;
  for (const auto& n : numbers) {
    if (!vm.count(n.key)) continue;
    auto v = ParsePositive(std::string("--") + n.key, Str(vm, n.key));
    if (!v.ok()) return v.status();
    *n.out = *v;
    modified = true;
  }
  if (vm.count("headroom")) {
    const std::string text = Str(vm, "headroom");
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(v >= 0 && v <= 0.5)) {
      return Status::Error("--headroom: invalid value '" + text +
                           "' (expected a fraction of the GPU's memory in [0, 0.5])");
    }
    req->headroom_fraction = v;
  }
  if (modified) req->gpu.name += " (modified)";
  return Status::Ok();
}

// The pinned sizes, named in errors as they were given ("--tp 3 --pp 2").
Status ReadPinnedSizes(const po::variables_map& vm, PlanRequest* req) {
  struct PinOption {
    const char* key;
    std::optional<int64_t>* out;
  } pins[] = {{"tp", &req->tp},  {"cp", &req->cp}, {"ep", &req->ep},
              {"pp", &req->pp},  {"dp", &req->dp}, {"micro-batch", &req->micro_batch},
              {"vpp", &req->vpp}};
  for (const auto& p : pins) {
    if (!vm.count(p.key)) continue;
    auto v = ParseCount(std::string("--") + p.key, Str(vm, p.key), 1);
    if (!v.ok()) return v.status();
    *p.out = *v;
  }
  for (const char* key : {"tp", "cp", "ep", "pp", "dp"}) {
    if (!vm.count(key)) continue;
    req->pin_label +=
        (req->pin_label.empty() ? "--" : " --") + std::string(key) + " " + Str(vm, key);
  }
  return Status::Ok();
}

// --fsdp on|off|N and --hsdp S,R; named in errors as given.
Status ReadFsdpPins(const po::variables_map& vm, PlanRequest* req) {
  if (vm.count("fsdp") && vm.count("hsdp")) return Status::Error("--hsdp: contradicts --fsdp");
  if (vm.count("fsdp")) {
    const std::string v = Str(vm, "fsdp");
    if (v == "on" || v == "off") {
      req->fsdp = v == "on";
    } else {
      auto n = ParseCount("--fsdp", v, 2);
      if (!n.ok()) {
        return Status::Error("--fsdp: invalid value '" + v +
                             "' (on, off, or N >= 2: the GPUs of a shard group)");
      }
      req->fsdp = true;
      req->fsdp_shard = *n;
    }
    if (v != "off") {
      req->pin_label += (req->pin_label.empty() ? "--" : " --") + std::string("fsdp ") + v;
    }
  }
  if (vm.count("hsdp")) {
    const std::string v = Str(vm, "hsdp");
    const size_t comma = v.find(',');
    auto s = ParseCount("--hsdp", v.substr(0, comma), 2);
    auto r = comma == std::string::npos ? s : ParseCount("--hsdp", v.substr(comma + 1), 1);
    if (comma == std::string::npos || !s.ok() || !r.ok()) {
      return Status::Error("--hsdp: invalid value '" + v +
                           "' (expected S,R: shard groups of S >= 2 GPUs, R >= 1 replicas)");
    }
    req->fsdp = true;
    req->fsdp_shard = *s;
    req->fsdp_replicate = *r;
    req->pin_label += (req->pin_label.empty() ? "--" : " --") + std::string("hsdp ") + v;
  }
  return Status::Ok();
}

// --NAME, when given, parsed into `out`; a value `parse` refuses is one line naming the option
// and its `choices`.
template <typename T>
Status ReadChoice(const po::variables_map& vm, const char* name,
                  Result<T> (*parse)(const std::string&), const char* choices,
                  std::optional<T>* out) {
  if (!vm.count(name)) return Status::Ok();
  auto v = parse(Str(vm, name));
  if (!v.ok()) {
    return Status::Error(std::string("--") + name + ": invalid value '" + Str(vm, name) + "' (" +
                         choices + ")");
  }
  *out = *v;
  return Status::Ok();
}

// The pinned knobs (recompute, its layers, the distributed optimizer, ZeRO-2, the gradient
// precision) and the stage rules.
Status ReadPinnedKnobs(const po::variables_map& vm, PlanRequest* req) {
  if (Status st = ReadChoice(vm, "recompute", ParseRecompute, "none, selective, full",
                             &req->recompute);
      !st) {
    return st;
  }
  if (vm.count("recompute-layers")) {
    auto v = ParseCount("--recompute-layers", Str(vm, "recompute-layers"), 0);
    if (!v.ok()) return v.status();
    req->recompute_layers = *v;
  }
  if (vm.count("optimizer-sharding")) {
    const std::string v = Str(vm, "optimizer-sharding");
    if (v == "on" || v == "1" || v == "true") {
      req->optimizer_sharding = true;
    } else if (v == "off" || v == "0" || v == "false") {
      req->optimizer_sharding = false;
    } else {
      return Status::Error("--optimizer-sharding: invalid value '" + v + "' (on, off)");
    }
  }
  if (vm.count("grad-sharding")) {
    const std::string v = Str(vm, "grad-sharding");
    if (v != "on" && v != "off") {
      return Status::Error("--grad-sharding: invalid value '" + v + "' (on, off)");
    }
    req->grad_sharding = v == "on";
    // Named in the refusals of the pin, as the sizes are.
    req->pin_label += (req->pin_label.empty() ? "--" : " --") + std::string("grad-sharding ") + v;
  }
  if (Status st = ReadChoice(vm, "grad-reduce", ParseGradReduce, "fp32, bf16", &req->grad_reduce);
      !st) {
    return st;
  }
  const std::string overlap = Str(vm, "tp-comm-overlap");
  if (overlap != "on" && overlap != "off") {
    return Status::Error("--tp-comm-overlap: invalid value '" + overlap + "' (on, off)");
  }
  req->tp_comm_overlap = overlap == "on";
  const std::string dp_overlap = Str(vm, "dp-comm-overlap");
  if (dp_overlap != "on" && dp_overlap != "off") {
    return Status::Error("--dp-comm-overlap: invalid value '" + dp_overlap + "' (on, off)");
  }
  req->dp_comm_overlap = dp_overlap == "on";
  const std::string attention = Str(vm, "attention");
  if (attention != "fused" && attention != "unfused") {
    return Status::Error("--attention: invalid value '" + attention + "' (fused, unfused)");
  }
  req->unfused_attention = attention == "unfused";
  req->allow_cross_node_tp = vm.count("allow-cross-node-tp") > 0;
  if (vm.count("even-stages") && vm.count("allow-uneven-stages")) {
    return Status::Error("--even-stages: contradicts --allow-uneven-stages");
  }
  req->allow_uneven_stages = vm.count("even-stages") == 0;
  return Status::Ok();
}

// The request the options describe; errors are the line to print after kPrefix.
Result<PlanRequest> RequestFromOptions(const po::variables_map& vm) {
  auto model = ResolveModel(Str(vm, "model"));
  if (!model.ok()) return Status::Error("--model: " + model.message());
  auto gpu = ResolveGpuType(Str(vm, "gpu-type"));
  if (!gpu.ok()) return Status::Error("--gpu-type: " + gpu.message());
  PlanRequest req;
  req.model = *model;
  req.gpu = *gpu;
  if (Status s = ReadCounts(vm, &req); !s) return s;
  if (Status s = ReadGpuOverrides(vm, &req); !s) return s;
  if (Status s = ReadPinnedSizes(vm, &req); !s) return s;
  if (Status s = ReadPinnedKnobs(vm, &req); !s) return s;
  if (Status s = ReadFsdpPins(vm, &req); !s) return s;
  if (vm.count("calibration")) {
    auto file = ReadCalibrationFile(Str(vm, "calibration"));
    if (!file.ok()) return Status::Error("--calibration: " + file.message());
    req.calibration = file->For(gpu->name);  // the preset's name, also with overrides
  }
  return req;
}

// Plans and prints; the exit status.
int PrintPlan(const PlanRequest& req, bool json) {
  auto plan = PlanJob(req);
  if (!plan.ok()) {
    // Request errors name an option (exit 2); "does not fit" is a planning result (exit 1).
    const std::string& msg = plan.message();
    std::cerr << kPrefix << msg << "\n";
    return msg.rfind("--", 0) == 0 && msg.find("does not fit") == std::string::npos ? 2 : 1;
  }
  if (json) {
    std::cout << PlanToJson(*plan) << "\n";
  } else {
    std::cout << PlanToText(*plan);
  }
  return 0;
}

}  // namespace

int RunPlanCommand(int argc, char** argv) {
  const po::options_description desc = PlanOptions();
  po::variables_map vm;
  if (Status s = ParseCommandLine(argc, argv, desc, &vm); !s) return UsageError(s.message());
  if (vm.count("help")) {
    std::cout << Help(desc);
    return 0;
  }
  for (const char* required : {"model", "gpus", "gpu-type", "global-batch"}) {
    if (!vm.count(required)) return UsageError(std::string("--") + required + ": required");
  }
  auto req = RequestFromOptions(vm);
  if (!req.ok()) return UsageError(req.message());
  return PrintPlan(*req, vm.count("json") > 0);
}

}  // namespace autopar::cli
