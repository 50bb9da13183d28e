// The binding edge of autopar-launch: reads the step's allowed CPUs (cgroup cpuset, else the
// affinity mask), the node's NUMA domains and, on GPU nodes, each GPU's NUMA locality (hwloc,
// with the GPU's PCI bus id from the NVIDIA driver's /proc entries), and returns the CPU set of
// one local rank via SplitCpus(). Not thread-safe (reads process-wide state); cheap without GPUs
// (a few small /sys reads; hwloc's topology is only loaded when the step has GPUs).
#pragma once

#include <string>
#include <vector>

#include "launcher/launch.h"

namespace autopar {

struct CpuBinding {
  std::vector<int> cpus;  // the rank's CPUs; empty: leave the affinity as it is
  std::string note;       // why nothing was bound, or "" (for --verbose)
};

// `step_gpus` are the step's GPU ids in CUDA_VISIBLE_DEVICES order as the NVIDIA driver numbers
// them (SLURM_STEP_GPUS when Slurm renumbered CUDA_VISIBLE_DEVICES), empty without GPUs.
CpuBinding ChooseCpuBinding(const RankInfo& rank, const std::vector<std::string>& step_gpus);

// Parses the "Device Minor:" line of /proc/driver/nvidia/gpus/<bus>/information; -1 if absent.
int ParseNvidiaDeviceMinor(const std::string& information_text);

}  // namespace autopar
