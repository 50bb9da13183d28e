#include "core/task_env.h"

#include <cstdio>

#include "core/hostlist.h"

namespace autopar {

int64_t DeterministicMasterPort(uint32_t job_id, const SiteConfig& site) {
  return site.master_port_base + static_cast<int64_t>(job_id) % site.master_port_range;
}

std::string ExpandPathPattern(const std::string& pattern, const TaskContext& task) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    switch (pattern[++i]) {
      case 'j': out += std::to_string(task.job_id); break;
      case 'n': out += task.node_name; break;
      case 'u': out += task.user; break;
      case '%': out += '%'; break;
      default: out += '%'; out += pattern[i];
    }
  }
  return out;
}

Result<TaskEnv> BuildTaskEnv(const TaskContext& task, const JobOptions& opts,
                             const SiteConfig& site) {
  auto hosts = ExpandHostlist(task.step_nodelist);
  if (!hosts) return hosts.status();
  TaskEnv env;
  auto set = [&](const std::string& k, const std::string& v) { env.set.emplace_back(k, v); };
  auto num = [](int64_t v) { return std::to_string(v); };

  // torchrun's names (torch.distributed.run): what env:// initialisation reads.
  set("RANK", num(task.rank));
  set("LOCAL_RANK", num(task.local_rank));
  set("WORLD_SIZE", num(task.world_size));
  set("LOCAL_WORLD_SIZE", num(task.local_world_size));
  set("GROUP_RANK", num(task.node_rank));
  set("ROLE_RANK", num(task.rank));
  set("ROLE_WORLD_SIZE", num(task.world_size));
  set("MASTER_ADDR", hosts->front());
  set("MASTER_PORT", num(DeterministicMasterPort(task.job_id, site)));
  set("TORCHELASTIC_RESTART_COUNT", num(task.restart_count));

  for (auto& [k, v] : OptionsEnv(opts)) {
    if (k == GetOptionSpec(OptionId::kCkptDir).env) v = ExpandPathPattern(v, task);
    set(k, v);
  }
  if (opts.survives_node_loss()) {
    // The job's steps (srun in the batch script reads it) outlive a failed node, so that the
    // launchers left can go on without it (docs/recovery.md).
    set("SLURM_NO_KILL", "set");
  }
  set("AUTOPAR_SOCKET", SocketPathForNode(site, task.node_name));
  if (!site.master_ifname.empty()) set("AUTOPAR_MASTER_IFNAME", site.master_ifname);
  // The site's straggler thresholds, read by autopard from rank 0's environment (docs/health.md).
  char margin[32];
  std::snprintf(margin, sizeof margin, "%g", site.straggler_margin);
  set("AUTOPAR_STRAGGLER_MARGIN", margin);
  set("AUTOPAR_STRAGGLER_WINDOWS", num(site.straggler_windows));
  env.unless_present = site.nccl_env;
  return env;
}

}  // namespace autopar
