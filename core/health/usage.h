// Utilisation and idle allocations (docs/health.md): every rank's autopar-launch samples
// its program's use of the node (CPU cores from /proc, resident memory, and GPU utilisation and
// memory through NVML when a GPU is there) and sends it to its node's autopard; NodeUsage keeps one
// job's samples on one node, journals a summary per interval ("usage") and tells when the
// allocation's share on this node shows neither progress nor use for the job's idle timeout
// ("idle"). Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/failure/timeline.h"

namespace autopar {

struct UsageSample {
  double time = 0;        // seconds since the epoch
  int rank = -1;
  double cpu_cores = 0;   // CPU time over the sample's period / its length (1.0: one core busy)
  double rss_gib = 0;     // resident memory of the program's processes
  std::optional<double> gpu_util;     // percent (NVML), when the rank has a GPU
  std::optional<double> gpu_mem_gib;  // used on the rank's GPU
};

// Below both of these a rank is not using its share of the node.
inline constexpr double kIdleCpuCores = 0.05;
inline constexpr double kIdleGpuUtil = 5.0;  // percent

class NodeUsage {
 public:
  // `interval_s`: a "usage" summary at most this often; `idle_after_s`: 0 turns idle detection
  // off; `start`: when the job's share on this node was first seen.
  NodeUsage(double interval_s, double idle_after_s, double start);
  void Add(const UsageSample& s);
  void Progress(double time);  // a heartbeat of a rank on this node: training moves
  // The events due at `now`, in order: {"usage", fields} (ranks= cpu_cores= (sum over ranks,
  // mean over the interval) cpu_cores_min= cpu_cores_max= (per rank) rss_gib= [gpu_util=
  // gpu_mem_gib=] heartbeats= rank_cpu_cores=RANK:CORES,... (each rank's)) and {"idle", fields}
  // (idle_s= cpu_cores= [gpu_util=] reason=), the latter once per idle stretch.
  std::vector<std::pair<std::string, EventFields>> Due(double now);

 private:
  struct Rank {
    double cpu_sum = 0, gpu_sum = 0, gpu_mem = 0, rss = 0;
    int n = 0, gpu_n = 0;
    double last_cpu = 0;
    std::optional<double> last_gpu;
  };
  double interval_s_, idle_after_s_;
  double window_start_;
  double last_active_;  // the latest progress or use
  bool have_samples_ = false;
  bool idle_told_ = false;
  int64_t heartbeats_ = 0;  // in the window
  std::map<int, Rank> ranks_;  // this window's
};

}  // namespace autopar
