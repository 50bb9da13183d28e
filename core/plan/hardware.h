// GPU presets for the planner: memory, dense BF16 peak, and link bandwidths.
//
// ResolveGpuType() accepts a preset name, case-insensitive ("a100-40gb", "a100-80gb", "h100-80gb",
// "h200-141gb", plus the aliases listed in docs/planner.md such as "a100", "h100", "h200"). On
// failure the Result carries one line ready to print after "--gpu-type: ", e.g.
// "unknown GPU type 'v99' (known: a100-40gb, a100-80gb, h100-80gb, h200-141gb)".
//
// Units: bandwidths are in GB/s (10^9 bytes per second), per GPU, per direction; memory in GiB;
// compute in TFLOP/s (10^12). Every number can be overridden by the caller (PlanRequest, CLI).
// Pure and thread-safe.
#pragma once

#include <string>
#include <vector>

#include "autopar/status.h"

namespace autopar {

struct GpuSpec {
  std::string name;
  double mem_gib = 0;      // usable device memory as the driver reports it, GiB
  double bf16_tflops = 0;  // dense BF16 tensor-core peak, TFLOP/s
  double nvlink_gbps = 0;  // NVLink bandwidth per GPU per direction, GB/s
  double net_gbps = 0;     // inter-node network bandwidth per GPU per direction, GB/s
  double hbm_gbps = 0;     // device memory bandwidth, GB/s (optimizer step is memory-bound)
  // Fraction of bf16_tflops that large transformer GEMMs reach in practice (the planner scales it
  // down for small per-GPU matrices); see docs/planner.md "Compute".
  double matmul_efficiency = 0;
  double nvlink_latency_us = 0;  // per collective step inside a node
  double net_latency_us = 0;     // per collective step across nodes
  std::string source;            // where the numbers come from
};

Result<GpuSpec> ResolveGpuType(const std::string& name);

// The preset names in a stable order.
std::vector<std::string> GpuTypeNames();

}  // namespace autopar
