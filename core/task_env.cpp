#include "core/task_env.h"

#include <cstdio>
#include <map>

#include "core/hostlist.h"
#include "core/text.h"

namespace autopar {

int64_t DeterministicMasterPort(uint32_t job_id, uint32_t step_id, const SiteConfig& site) {
  const uint64_t key = static_cast<uint64_t>(job_id) + step_id;
  return site.master_port_base + static_cast<int64_t>(key % static_cast<uint64_t>(site.master_port_range));
}

bool UsesAutopar(const JobOptions& resolved) { return !OptionsEnv(resolved).empty(); }

EnvList TorchrunEnv(const TaskContext& task, const SiteConfig& site) {
  auto num = [](int64_t v) { return std::to_string(v); };
  auto hosts = ExpandHostlist(task.step_nodelist);
  const std::string master = hosts.ok() && !hosts->empty() ? hosts->front() : task.node_name;
  // torchrun's names (torch.distributed.run): what env:// initialisation reads.
  return {{"RANK", num(task.rank)},
          {"LOCAL_RANK", num(task.local_rank)},
          {"WORLD_SIZE", num(task.world_size)},
          {"LOCAL_WORLD_SIZE", num(task.local_world_size)},
          {"GROUP_RANK", num(task.node_rank)},
          {"ROLE_RANK", num(task.rank)},
          {"ROLE_WORLD_SIZE", num(task.world_size)},
          {"MASTER_ADDR", master},
          {"MASTER_PORT", num(DeterministicMasterPort(task.job_id, task.step_id, site))},
          {"TORCHELASTIC_RESTART_COUNT", num(task.restart_count)}};
}

EnvList TorchrunToSet(const EnvList& torchrun, const GetEnv& current) {
  std::map<std::string, std::string> ours;  // what autopar set before
  if (auto marker = current(kTorchrunMarker)) {
    for (const auto& item : Split(*marker, ';')) {
      const size_t eq = item.find('=');
      if (eq != std::string::npos) ours[item.substr(0, eq)] = item.substr(eq + 1);
    }
  }
  EnvList out;
  std::string marker;
  for (const auto& [name, value] : torchrun) {
    const auto now = current(name);
    const auto was = ours.find(name);
    if (now && !now->empty() && (was == ours.end() || was->second != *now)) continue;  // the user's
    out.emplace_back(name, value);
    marker += (marker.empty() ? "" : ";") + name + "=" + value;
  }
  out.emplace_back(kTorchrunMarker, marker);
  return out;
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
  if (hosts->empty()) return Status::Error("the step's node list is empty");
  TaskEnv env;
  auto set = [&](const std::string& k, const std::string& v) { env.set.emplace_back(k, v); };
  auto num = [](int64_t v) { return std::to_string(v); };
  env.torchrun = TorchrunEnv(task, site);

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
