#include <csignal>
#include <cctype>
#include <sys/wait.h>

#include "launcher/launch.h"

namespace autopar {

Result<EnvChanges> BuildLaunchEnv(const LaunchDecisions& d, const EnvMap& current) {
  EnvChanges ch;
  auto num = [](long long v) { return std::to_string(v); };
  const RankInfo& r = d.rank;
  // torchrun's names (torch/distributed/run.py and elastic/agent/server/api.py).
  ch.set["RANK"] = num(r.rank);
  ch.set["LOCAL_RANK"] = num(r.local_rank);
  ch.set["WORLD_SIZE"] = num(r.size);
  ch.set["LOCAL_WORLD_SIZE"] = num(r.local_size);
  ch.set["GROUP_RANK"] = num(r.node_rank);
  ch.set["GROUP_WORLD_SIZE"] = num(r.num_nodes);
  ch.set["ROLE_RANK"] = num(r.rank);
  ch.set["ROLE_WORLD_SIZE"] = num(r.size);
  ch.set["ROLE_NAME"] = "default";
  ch.set["MASTER_ADDR"] = d.master.addr;
  ch.set["MASTER_PORT"] = num(d.master.port);
  std::string restarts = "0";
  if (auto it = current.find("SLURM_RESTART_COUNT"); it != current.end()) {
    const std::string& v = it->second;
    bool ok = !v.empty() && v.size() < 10;
    for (char c : v) ok = ok && std::isdigit(static_cast<unsigned char>(c));
    if (!ok) return Status::Error("SLURM_RESTART_COUNT: invalid value '" + v + "'");
    restarts = v;
  }
  ch.set["TORCHELASTIC_RESTART_COUNT"] = restarts;
  if (auto it = current.find("SLURM_JOB_ID"); it != current.end()) {
    ch.set["TORCHELASTIC_RUN_ID"] = it->second;
  }
  ch.set["AUTOPAR_NODE_RANK"] = num(r.node_rank);
  ch.set["AUTOPAR_NUM_NODES"] = num(r.num_nodes);
  ch.set["AUTOPAR_HOST"] = r.host;
  if (d.gpu) ch.set["CUDA_VISIBLE_DEVICES"] = d.gpu->device;
  if (!d.cpus.empty()) {
    ch.set["AUTOPAR_CPUS"] = FormatCpuList(d.cpus);
    ch.defaults["OMP_NUM_THREADS"] = num(static_cast<long long>(d.cpus.size()));
  }
  // NCCL defaults; site values were exported by the SPANK plugin already and, like the user's,
  // are never overwritten.
  ch.defaults["NCCL_DEBUG"] = "WARN";
  ch.defaults["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1";
  return ch;
}

EnvMap ApplyEnvChanges(EnvMap env, const EnvChanges& changes) {
  for (const auto& [k, v] : changes.set) env[k] = v;
  for (const auto& [k, v] : changes.defaults) env.emplace(k, v);
  return env;
}

std::string LaunchMessagePrefix(int rank, const std::string& host) {
  return "autopar-launch: rank " + (rank < 0 ? std::string("?") : std::to_string(rank)) + " on " +
         (host.empty() ? std::string("?") : host) + ": ";
}

int ExitCodeFromWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

bool ForwardSignalFromSlurm(const std::string& proctrack_type) {
  return proctrack_type == "proctrack/pgid";
}

std::string ProctrackTypeFromSlurmConf(const std::string& conf_text) {
  std::string found;
  size_t pos = 0;
  while (pos < conf_text.size()) {
    size_t eol = conf_text.find('\n', pos);
    std::string line = conf_text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? conf_text.size() : eol + 1;
    if (size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    size_t b = 0;
    while (b < line.size() && std::isspace(static_cast<unsigned char>(line[b]))) ++b;
    static const std::string kKey = "proctracktype";
    if (line.size() < b + kKey.size()) continue;
    bool match = true;
    for (size_t i = 0; i < kKey.size() && match; ++i) {
      match = std::tolower(static_cast<unsigned char>(line[b + i])) == kKey[i];
    }
    if (!match) continue;
    size_t eq = b + kKey.size();
    while (eq < line.size() && std::isspace(static_cast<unsigned char>(line[eq]))) ++eq;
    if (eq >= line.size() || line[eq] != '=') continue;
    std::string v = line.substr(eq + 1);
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
    size_t vb = 0;
    while (vb < v.size() && std::isspace(static_cast<unsigned char>(v[vb]))) ++vb;
    found = v.substr(vb);  // the last assignment wins, as in slurm.conf
  }
  return found;
}

}  // namespace autopar
