#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "core/hostlist.h"
#include "launcher/launch.h"

namespace autopar {
namespace {

std::optional<long long> ParseNonNegative(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  long long v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

const std::string* Find(const EnvMap& env, const std::string& key) {
  auto it = env.find(key);
  return it == env.end() ? nullptr : &it->second;
}

// The first of `keys` present in env, parsed as a non-negative int.
Result<int> IntVar(const EnvMap& env, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (const std::string* v = Find(env, k)) {
      auto n = ParseNonNegative(*v);
      if (!n || *n > 0x7fffffff) {
        return Status::Error(std::string(k) + ": invalid value '" + *v + "'");
      }
      return static_cast<int>(*n);
    }
  }
  return Status::Error(std::string(*keys.begin()) + ": not set");
}

}  // namespace

Status ValidateRankInfo(const RankInfo& i) {
  auto err = [](const std::string& what, int v, const std::string& bound, int b) {
    return Status::Error(what + " " + std::to_string(v) + " is not below " + bound + " " +
                         std::to_string(b));
  };
  if (i.size < 1) return Status::Error("job size " + std::to_string(i.size) + " is not positive");
  if (i.local_size < 1) {
    return Status::Error("local size " + std::to_string(i.local_size) + " is not positive");
  }
  if (i.num_nodes < 1) {
    return Status::Error("node count " + std::to_string(i.num_nodes) + " is not positive");
  }
  if (i.rank < 0 || i.rank >= i.size) return err("rank", i.rank, "job size", i.size);
  if (i.local_rank < 0 || i.local_rank >= i.local_size) {
    return err("local rank", i.local_rank, "local size", i.local_size);
  }
  if (i.node_rank < 0 || i.node_rank >= i.num_nodes) {
    return err("node rank", i.node_rank, "node count", i.num_nodes);
  }
  if (i.local_size > i.size) {
    return Status::Error("local size " + std::to_string(i.local_size) + " exceeds job size " +
                         std::to_string(i.size));
  }
  return Status::Ok();
}

Result<std::vector<int>> ParseTasksPerNode(const std::string& text) {
  std::vector<int> out;
  auto bad = [&] { return Status::Error("invalid tasks-per-node list '" + text + "'"); };
  size_t pos = 0;
  if (text.empty()) return bad();
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    long long count = 0, repeat = 1;
    size_t paren = item.find('(');
    if (paren == std::string::npos) {
      auto c = ParseNonNegative(item);
      if (!c) return bad();
      count = *c;
    } else {
      auto c = ParseNonNegative(item.substr(0, paren));
      if (!c || item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')') {
        return bad();
      }
      auto r = ParseNonNegative(item.substr(paren + 2, item.size() - paren - 3));
      if (!r || *r < 1 || *r > 65536) return bad();
      count = *c;
      repeat = *r;
    }
    if (count < 1 || count > 0x7fffffff || out.size() + static_cast<size_t>(repeat) > 65536) {
      return bad();
    }
    out.insert(out.end(), static_cast<size_t>(repeat), static_cast<int>(count));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

Result<RankInfo> RankInfoFromSlurmEnv(const EnvMap& env, const std::string& hostname) {
  RankInfo info;
  info.host = hostname;
  if (!Find(env, "SLURM_PROCID")) return info;  // not under Slurm: a single rank
  if (const std::string* h = Find(env, "SLURMD_NODENAME")) info.host = *h;
  auto rank = IntVar(env, {"SLURM_PROCID"});
  if (!rank) return rank.status();
  auto size = IntVar(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"});
  if (!size) return size.status();
  auto local = IntVar(env, {"SLURM_LOCALID"});
  if (!local) return local.status();
  auto node = IntVar(env, {"SLURM_NODEID"});
  if (!node) return node.status();
  auto nodes = IntVar(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES"});
  if (!nodes) return nodes.status();
  const char* tpn_key = Find(env, "SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE"
                                                               : "SLURM_TASKS_PER_NODE";
  const std::string* tpn_text = Find(env, tpn_key);
  if (!tpn_text) return Status::Error("SLURM_STEP_TASKS_PER_NODE: not set");
  auto tpn = ParseTasksPerNode(*tpn_text);
  if (!tpn) return Status::Error(std::string(tpn_key) + ": " + tpn.message());
  if (static_cast<size_t>(*node) >= tpn->size()) {
    return Status::Error(std::string(tpn_key) + ": no entry for node " + std::to_string(*node) +
                         " in '" + *tpn_text + "'");
  }
  info.rank = *rank;
  info.size = *size;
  info.local_rank = *local;
  info.local_size = (*tpn)[static_cast<size_t>(*node)];
  info.node_rank = *node;
  info.num_nodes = *nodes;
  Status st = ValidateRankInfo(info);
  if (!st) return Status::Error("Slurm variables: " + st.message());
  return info;
}

Result<RankInfo> LaunchedRankInfo(const EnvMap& env) {
  RankInfo info;
  struct Field {
    const char* key;
    int* out;
  } fields[] = {{"RANK", &info.rank},
                {"WORLD_SIZE", &info.size},
                {"LOCAL_RANK", &info.local_rank},
                {"LOCAL_WORLD_SIZE", &info.local_size},
                {"AUTOPAR_NODE_RANK", &info.node_rank},
                {"AUTOPAR_NUM_NODES", &info.num_nodes}};
  for (const auto& f : fields) {
    auto v = IntVar(env, {f.key});
    if (!v) return v.status();
    *f.out = *v;
  }
  const std::string* host = Find(env, "AUTOPAR_HOST");
  if (!host || host->empty()) return Status::Error("AUTOPAR_HOST: not set");
  info.host = *host;
  Status st = ValidateRankInfo(info);
  if (!st) return Status::Error("autopar-launch's variables: " + st.message());
  return info;
}

Result<MasterEndpoint> FallbackMasterEndpoint(const EnvMap& env) {
  MasterEndpoint ep;
  const std::string* addr = Find(env, "MASTER_ADDR");
  const std::string* port = Find(env, "MASTER_PORT");
  if (addr && port && !addr->empty()) {
    auto p = ParseNonNegative(*port);
    if (!p || *p < 1 || *p > 65535) {
      return Status::Error("MASTER_PORT: invalid value '" + *port + "'");
    }
    ep.addr = *addr;
    ep.port = static_cast<int>(*p);
    return ep;
  }
  const std::string* nodelist = Find(env, "SLURM_STEP_NODELIST");
  if (!nodelist) nodelist = Find(env, "SLURM_JOB_NODELIST");
  if (!nodelist) {
    return Status::Error("MASTER_ADDR: not set and no SLURM_STEP_NODELIST to derive it from");
  }
  auto hosts = ExpandHostlist(*nodelist);
  if (!hosts) return Status::Error("SLURM_STEP_NODELIST: " + hosts.message());
  if (hosts->empty()) return Status::Error("SLURM_STEP_NODELIST: empty");
  long long job = 0, step = 0;
  if (const std::string* j = Find(env, "SLURM_JOB_ID")) job = ParseNonNegative(*j).value_or(0);
  if (const std::string* s = Find(env, "SLURM_STEP_ID")) step = ParseNonNegative(*s).value_or(0);
  ep.addr = hosts->front();
  ep.port = static_cast<int>(29500 + (job * 7 + step) % 20000);
  return ep;
}

std::string EncodeRendezvous(const RendezvousValue& v) {
  return v.master.addr + " " + std::to_string(v.master.port) + " " + std::to_string(v.resume_step);
}

Result<RendezvousValue> DecodeRendezvous(const std::string& text) {
  auto bad = [&text] {
    return Status::Error("PMIx: malformed rendezvous value '" + text + "' (expected 'ADDR PORT STEP')");
  };
  std::istringstream in(text);
  RendezvousValue v;
  std::string port, step, extra;
  if (!(in >> v.master.addr >> port >> step) || (in >> extra)) return bad();
  char* end = nullptr;
  errno = 0;
  long p = std::strtol(port.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || p <= 0 || p > 65535) return bad();
  v.master.port = static_cast<int>(p);
  errno = 0;
  long long s = std::strtoll(step.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || s < -1) return bad();
  v.resume_step = s;
  return v;
}

}  // namespace autopar
