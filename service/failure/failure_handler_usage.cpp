// FailureHandler's utilisation and idle allocations (docs/health.md); see
// failure_handler.h and core/health/usage.h.
#include <cstdlib>

#include "core/failure/timeline.h"
#include "core/text.h"
#include "failure_handler.h"

namespace autopar {
namespace {

// A job's share of this node ends when its launchers stop sending samples for this long.
constexpr double kUsageForgetS = 120;

std::optional<double> Real(const EventFields& f, const char* key) {
  for (const auto& [k, v] : f) {
    if (k != key) continue;
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (end != v.c_str() && *end == '\0') return d;
  }
  return std::nullopt;
}

}  // namespace

void FailureHandler::OnUsageSample(const JournalEvent& e, pid_t pid) {
  auto ctx = ContextOf(pid);
  if (!ctx || ctx->job_id != e.job_id) return;  // not a task of that job: nothing to watch
  const EventFields f = ParseEventFields(e.detail);
  UsageSample s;
  s.time = clock_();
  s.rank = e.rank;
  s.cpu_cores = Real(f, "cpu_cores").value_or(0);
  s.rss_gib = Real(f, "rss_gib").value_or(0);
  s.gpu_util = Real(f, "gpu_util");
  s.gpu_mem_gib = Real(f, "gpu_mem_gib");
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord& job = jobs_[e.job_id];
  job.seen = s.time;
  UsageWatch& w = job.usage;
  if (!w.usage || ctx->restart_count > w.restart_count) {
    w.restart_count = ctx->restart_count;
    w.usage = std::make_unique<NodeUsage>(config_.progress_interval_s, ctx->idle_timeout_s, s.time);
  } else if (ctx->restart_count < w.restart_count) {
    return;  // a late sample of an earlier run
  }
  w.last_sample = s.time;
  w.usage->Add(s);
}

void FailureHandler::TickUsage(double now) {
  std::vector<std::pair<std::string, std::pair<std::string, EventFields>>> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, job] : jobs_) {
      UsageWatch& w = job.usage;
      if (!w.usage) continue;
      if (now - w.last_sample > kUsageForgetS) {
        w.usage.reset();  // the job's programs ended on this node
        continue;
      }
      for (auto& ev : w.usage->Due(now)) due.emplace_back(id, std::move(ev));
    }
  }
  // The journal calls back into OnEvent: never under mu_.
  for (const auto& [job, ev] : due) {
    EventFields f = ev.second;
    f.insert(f.begin(), {"node", config_.node});
    Emit(job, ev.first, -1, -1, FormatEventFields(f));
  }
}

}  // namespace autopar
