#include "core/health/usage.h"

#include <algorithm>

#include "core/text.h"

namespace autopar {

NodeUsage::NodeUsage(double interval_s, double idle_after_s, double start)
    : interval_s_(interval_s), idle_after_s_(idle_after_s), window_start_(start), last_active_(start) {}

void NodeUsage::Add(const UsageSample& s) {
  have_samples_ = true;
  Rank& r = ranks_[s.rank];
  r.cpu_sum += s.cpu_cores;
  r.rss = s.rss_gib;
  ++r.n;
  r.last_cpu = s.cpu_cores;
  r.last_gpu = s.gpu_util;
  if (s.gpu_util) {
    r.gpu_sum += *s.gpu_util;
    ++r.gpu_n;
  }
  if (s.gpu_mem_gib) r.gpu_mem = *s.gpu_mem_gib;
  const bool used = s.cpu_cores >= kIdleCpuCores || (s.gpu_util && *s.gpu_util >= kIdleGpuUtil);
  if (used) {
    last_active_ = std::max(last_active_, s.time);
    idle_told_ = false;
  }
}

void NodeUsage::Progress(double time) {
  ++heartbeats_;
  last_active_ = std::max(last_active_, time);
  idle_told_ = false;
}

std::vector<std::pair<std::string, EventFields>> NodeUsage::Due(double now) {
  std::vector<std::pair<std::string, EventFields>> out;
  std::optional<EventFields> idle;  // measured before the summary starts a new window
  if (idle_after_s_ > 0 && have_samples_ && !idle_told_ && now - last_active_ >= idle_after_s_) {
    idle_told_ = true;
    EventFields f = {{"idle_s", FormatFixed(now - last_active_, 1)}};
    double cpu = 0;
    std::optional<double> gpu;
    for (const auto& [rank, r] : ranks_) {
      cpu += r.last_cpu;
      if (r.last_gpu) gpu = gpu.value_or(0) + *r.last_gpu;
    }
    f.emplace_back("cpu_cores", FormatFixed(cpu, 2));
    if (gpu) f.emplace_back("gpu_util", FormatFixed(*gpu, 1));
    f.emplace_back("reason", "no progress (heartbeat) and under " + FormatFixed(kIdleCpuCores, 2) +
                                 " CPU cores and " + FormatFixed(kIdleGpuUtil, 0) +
                                 "% GPU per rank for " + FormatFixed(now - last_active_, 0) +
                                 " s (--idle-timeout=" + FormatFixed(idle_after_s_, 0) + ")");
    idle = std::move(f);
  }
  if (now - window_start_ >= interval_s_ && !ranks_.empty()) {
    double cpu = 0, cpu_min = 1e300, cpu_max = 0, rss = 0, gpu = 0, gpu_mem = 0;
    int gpu_ranks = 0;
    std::vector<std::string> per_rank;
    for (const auto& [rank, r] : ranks_) {
      const double mean = r.n > 0 ? r.cpu_sum / r.n : 0;
      per_rank.push_back(std::to_string(rank) + ":" + FormatFixed(mean, 2));
      cpu += mean;
      cpu_min = std::min(cpu_min, mean);
      cpu_max = std::max(cpu_max, mean);
      rss += r.rss;
      if (r.gpu_n > 0) {
        gpu += r.gpu_sum / r.gpu_n;
        gpu_mem += r.gpu_mem;
        ++gpu_ranks;
      }
    }
    EventFields f = {{"ranks", std::to_string(ranks_.size())},
                     {"cpu_cores", FormatFixed(cpu, 2)},
                     {"cpu_cores_min", FormatFixed(cpu_min, 2)},
                     {"cpu_cores_max", FormatFixed(cpu_max, 2)},
                     {"rss_gib", FormatFixed(rss, 2)}};
    if (gpu_ranks > 0) {
      f.emplace_back("gpu_util", FormatFixed(gpu / gpu_ranks, 1));
      f.emplace_back("gpu_mem_gib", FormatFixed(gpu_mem, 2));
    }
    f.emplace_back("heartbeats", std::to_string(heartbeats_));
    f.emplace_back("rank_cpu_cores", Join(per_rank, ","));
    out.emplace_back("usage", std::move(f));
    ranks_.clear();
    heartbeats_ = 0;
    window_start_ = now;
  }
  if (idle) out.emplace_back("idle", std::move(*idle));
  return out;
}

}  // namespace autopar
