// GPU presets (docs/planner.md, "Hardware").
#include "core/plan/hardware.h"

#include <algorithm>
#include <cctype>

namespace autopar {
namespace {

struct GpuPreset {
  const char* name;
  const char* aliases[3];
  double mem_gib, bf16_tflops, nvlink_gbps, net_gbps, hbm_gbps, matmul_efficiency,
      nvlink_latency_us, net_latency_us;
  const char* source;
};

// Memory: what nvidia-smi reports (A100 40GB 40960 MiB, A100 80GB 81920 MiB, H100 SXM 81559 MiB,
// H200 SXM 143771 MiB). Peak: dense BF16 tensor-core FLOP/s from NVIDIA's data sheets (no
// sparsity). NVLink: 600 GB/s (A100) / 900 GB/s (H100, H200) total per GPU = half per direction.
// HBM bandwidth: data sheets (1555, 2039, 3350, 4800 GB/s).
// Network: one 200 Gb/s HDR (DGX A100) or 400 Gb/s NDR (DGX H100/H200) InfiniBand port per GPU.
// GEMM efficiency (eff): fitted, on A100 to Korthikanti et al.'s four Megatron runs, on H100 to
// the Llama 3 paper's three 405B runs (Table 4); H200 takes H100's (docs/planner.md, "Compute").
// clang-format off
const GpuPreset kGpus[] = {
    // name         aliases                                       GiB    TFLOP/s NVLink net   HBM     eff   lat(us) NVLink, net
    {"a100-40gb",  {"a100-40g", "a100-sxm4-40gb", nullptr},      40.0,  312.0, 300.0, 25.0, 1555.0, 0.85, 5.0, 10.0,
     "NVIDIA A100 Tensor Core GPU data sheet; DGX A100 (8x HDR 200 Gb/s)"},
    {"a100-80gb",  {"a100", "a100-80g", "a100-sxm4-80gb"},        80.0,  312.0, 300.0, 25.0, 2039.0, 0.85, 5.0, 10.0,
     "NVIDIA A100 Tensor Core GPU data sheet; DGX A100 (8x HDR 200 Gb/s)"},
    {"h100-80gb",  {"h100", "h100-80g", "h100-sxm5-80gb"},        79.6,  989.0, 450.0, 50.0, 3350.0, 0.82, 4.0, 8.0,
     "NVIDIA H100 Tensor Core GPU data sheet (SXM); DGX H100 (8x NDR 400 Gb/s)"},
    {"h200-141gb", {"h200", "h200-141g", "h200-sxm-141gb"},      140.4,  989.0, 450.0, 50.0, 4800.0, 0.82, 4.0, 8.0,
     "NVIDIA H200 Tensor Core GPU data sheet (SXM); DGX H200 (8x NDR 400 Gb/s)"},
};
// clang-format on

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::vector<std::string> GpuTypeNames() {
  std::vector<std::string> names;
  for (const auto& g : kGpus) names.emplace_back(g.name);
  return names;
}

Result<GpuSpec> ResolveGpuType(const std::string& name) {
  const std::string key = Lower(name);
  for (const auto& g : kGpus) {
    bool match = key == g.name;
    for (const char* alias : g.aliases) {
      if (alias != nullptr && key == alias) match = true;
    }
    if (!match) continue;
    GpuSpec spec;
    spec.name = g.name;
    spec.mem_gib = g.mem_gib;
    spec.bf16_tflops = g.bf16_tflops;
    spec.nvlink_gbps = g.nvlink_gbps;
    spec.net_gbps = g.net_gbps;
    spec.hbm_gbps = g.hbm_gbps;
    spec.matmul_efficiency = g.matmul_efficiency;
    spec.nvlink_latency_us = g.nvlink_latency_us;
    spec.net_latency_us = g.net_latency_us;
    spec.source = g.source;
    return spec;
  }
  std::string known;
  for (const auto& n : GpuTypeNames()) known += (known.empty() ? "" : ", ") + n;
  return Status::Error("unknown GPU type '" + name + "' (known: " + known + ")");
}

}  // namespace autopar
