#include "launcher/usage_reporter.h"

#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "core/failure/launch_events.h"
#include "core/failure/task_process.h"
#include "core/text.h"

namespace autopar {
namespace {

struct GroupUse {
  uint64_t cpu_ticks = 0;
  int64_t rss_pages = 0;
  int processes = 0;
};

// The live processes of process group `pgrp` (the program runs in its own, child_process.h). One
// that is exiting (a zombie, or its memory already released) is left out: a sample taken while
// the program ends would otherwise report it with no memory.
GroupUse ProcessGroupUse(pid_t pgrp) {
  GroupUse use;
  DIR* d = opendir("/proc");
  if (!d) return use;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
    std::stringstream ss;
    ss << in.rdbuf();
    auto s = ParseProcStat(ss.str());
    if (!s || s->pgrp != pgrp || s->state == 'Z' || s->state == 'X' || s->rss_pages <= 0) continue;
    use.cpu_ticks += s->cpu_ticks;
    use.rss_pages += s->rss_pages;
    ++use.processes;
  }
  closedir(d);
  return use;
}

// NVML, loaded at run time; the few calls used, with their C signatures (nvml.h).
struct Nvml {
  using Device = void*;
  struct Utilization { unsigned int gpu, memory; };
  struct Memory { unsigned long long total, free, used; };
  int (*init)() = nullptr;
  int (*by_index)(unsigned int, Device*) = nullptr;
  int (*by_uuid)(const char*, Device*) = nullptr;
  int (*utilization)(Device, Utilization*) = nullptr;
  int (*memory)(Device, Memory*) = nullptr;
  bool ok = false;
};

const Nvml& LoadNvml() {
  static Nvml nvml;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;  // no driver: no GPU numbers
    nvml.init = reinterpret_cast<int (*)()>(dlsym(h, "nvmlInit_v2"));
    nvml.by_index = reinterpret_cast<int (*)(unsigned int, Nvml::Device*)>(
        dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
    nvml.by_uuid = reinterpret_cast<int (*)(const char*, Nvml::Device*)>(
        dlsym(h, "nvmlDeviceGetHandleByUUID"));
    nvml.utilization = reinterpret_cast<int (*)(Nvml::Device, Nvml::Utilization*)>(
        dlsym(h, "nvmlDeviceGetUtilizationRates"));
    nvml.memory =
        reinterpret_cast<int (*)(Nvml::Device, Nvml::Memory*)>(dlsym(h, "nvmlDeviceGetMemoryInfo"));
    nvml.ok = nvml.init && nvml.by_index && nvml.by_uuid && nvml.utilization && nvml.memory &&
              nvml.init() == 0;
  });
  return nvml;
}

// The rank's GPU's utilisation (percent) and memory in use (GiB); nullopt without NVML or GPU.
std::optional<std::pair<double, double>> GpuUse(const std::string& device) {
  if (device.empty()) return std::nullopt;
  const Nvml& nvml = LoadNvml();
  if (!nvml.ok) return std::nullopt;
  Nvml::Device dev = nullptr;
  // CUDA_VISIBLE_DEVICES names a GPU by its index or its UUID ("GPU-..."); NVML's index order is
  // the PCI bus order, which is CUDA's under CUDA_DEVICE_ORDER=PCI_BUS_ID (Slurm's GRES uses it).
  char* end = nullptr;
  const unsigned long index = std::strtoul(device.c_str(), &end, 10);
  const int rc = end != device.c_str() && *end == '\0'
                     ? nvml.by_index(static_cast<unsigned int>(index), &dev)
                     : nvml.by_uuid(device.c_str(), &dev);
  if (rc != 0) return std::nullopt;
  Nvml::Utilization u{};
  Nvml::Memory m{};
  if (nvml.utilization(dev, &u) != 0 || nvml.memory(dev, &m) != 0) return std::nullopt;
  return std::make_pair(static_cast<double>(u.gpu), static_cast<double>(m.used) / (1 << 30));
}

}  // namespace

void UsageReporter::Start(pid_t pid, const EnvMap& env, int rank, const std::string& node,
                          const std::string& gpu, int interval_s, int64_t generation) {
  Stop();
  if (interval_s <= 0 || !env.count("AUTOPAR_SOCKET") || !env.count("SLURM_JOB_ID")) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread(&UsageReporter::Run, this, pid, env, rank, node, gpu, interval_s, generation);
}

void UsageReporter::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void UsageReporter::Run(pid_t pid, EnvMap env, int rank, std::string node, std::string gpu,
                        int interval_s, int64_t generation) {
  const double ticks_per_s = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page_gib = static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 30);
  const GetEnv getenv = [&env](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  GroupUse last = ProcessGroupUse(pid);
  auto last_time = std::chrono::steady_clock::now();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::seconds(interval_s), [this] { return stop_; })) return;
    }
    const GroupUse now = ProcessGroupUse(pid);
    const auto now_time = std::chrono::steady_clock::now();
    if (now.processes == 0) return;  // the program is gone
    const double span = std::chrono::duration<double>(now_time - last_time).count();
    const double ticks = now.cpu_ticks >= last.cpu_ticks ? static_cast<double>(now.cpu_ticks - last.cpu_ticks) : 0;
    EventFields f = {{"cpu_cores", FormatFixed(span > 0 ? ticks / ticks_per_s / span : 0, 3)},
                     {"rss_gib", FormatFixed(static_cast<double>(now.rss_pages) * page_gib, 3)},
                     {"processes", std::to_string(now.processes)}};
    if (auto g = GpuUse(gpu)) {
      f.emplace_back("gpu_util", FormatFixed(g->first, 1));
      f.emplace_back("gpu_mem_gib", FormatFixed(g->second, 3));
    }
    if (generation >= 0) f.emplace_back("generation", std::to_string(generation));
    (void)SendJobEvent(getenv, JobEventRequest(getenv, event_kind::kUsageSample, rank, -1, node, f),
                       2000);
    last = now;
    last_time = now_time;
  }
}

}  // namespace autopar
