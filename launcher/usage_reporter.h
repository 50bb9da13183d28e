// The launcher's side of utilisation (docs/health.md): while the program runs, a thread
// samples its use of the node every interval and sends it to the node's autopard as a
// "usage_sample" event (not journalled: autopard summarises it per node, core/health/usage.h):
//  - CPU: the CPU time of the program's process group (the program and its children, e.g. data
//    loader workers) from /proc, over the interval: cores in use;
//  - memory: their resident size;
//  - GPU: the rank's GPU's utilisation and memory in use through NVML, loaded at run time
//    (libnvidia-ml.so.1), so that the launcher runs the same without a GPU or a driver.
// Not thread-safe itself: Start and Stop from the launcher's main thread.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "launcher/launch.h"

namespace autopar {

class UsageReporter {
 public:
  UsageReporter() = default;
  ~UsageReporter() { Stop(); }
  UsageReporter(const UsageReporter&) = delete;
  UsageReporter& operator=(const UsageReporter&) = delete;

  // Samples `pid`'s process group every `interval_s` (0: nothing) as rank `rank` on `node`;
  // `gpu` is the rank's device as CUDA_VISIBLE_DEVICES names it ("" when none). `env` gives the
  // socket and job (AUTOPAR_SOCKET, SLURM_JOB_ID); nothing is sent without them.
  void Start(pid_t pid, const EnvMap& env, int rank, const std::string& node, const std::string& gpu,
             int interval_s, int64_t generation);
  void Stop();

 private:
  void Run(pid_t pid, EnvMap env, int rank, std::string node, std::string gpu, int interval_s,
           int64_t generation);
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

}  // namespace autopar
