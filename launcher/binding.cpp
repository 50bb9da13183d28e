#include "binding.h"

#include <dirent.h>
#include <hwloc.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace autopar {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

// The CPUs of this process's cgroup (v2 cpuset.cpus.effective, else v1 cpuset.cpus): Slurm's
// task/cgroup confines the whole step there. Empty when unknown.
std::vector<int> CgroupCpus() {
  std::istringstream lines(ReadFile("/proc/self/cgroup"));
  std::string line;
  while (std::getline(lines, line)) {
    // "0::/path" (v2) or "N:cpuset,...:/path" (v1).
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::string file;
    if (controllers.empty()) {
      file = "/sys/fs/cgroup" + path + "/cpuset.cpus.effective";
    } else if (("," + controllers + ",").find(",cpuset,") != std::string::npos) {
      file = "/sys/fs/cgroup/cpuset" + path + "/cpuset.cpus";
    } else {
      continue;
    }
    auto cpus = ParseCpuList(ReadFile(file));
    if (cpus.ok() && !cpus->empty()) return *cpus;
  }
  return {};
}

std::vector<std::vector<int>> SysfsNumaDomains() {
  std::vector<std::vector<int>> out;
  for (const auto& name : ListDir("/sys/devices/system/node")) {
    if (name.rfind("node", 0) != 0 || name.size() < 5) continue;
    auto cpus = ParseCpuList(ReadFile("/sys/devices/system/node/" + name + "/cpulist"));
    if (cpus.ok() && !cpus->empty()) out.push_back(*cpus);
  }
  return out;
}

std::vector<int> HwlocCpus(hwloc_const_cpuset_t set) {
  std::vector<int> out;
  unsigned id;
  hwloc_bitmap_foreach_begin(id, set) { out.push_back(static_cast<int>(id)); }
  hwloc_bitmap_foreach_end();
  return out;
}

// NUMA domains and, per step GPU, the index of the domain near it (-1 unknown), from hwloc.
void GpuLocality(const std::vector<std::string>& step_gpus,
                 std::vector<std::vector<int>>* domains, std::vector<int>* gpu_domain) {
  gpu_domain->assign(step_gpus.size(), -1);
  std::map<int, std::string> bus_of_minor;
  for (const auto& bus : ListDir("/proc/driver/nvidia/gpus")) {
    int minor = ParseNvidiaDeviceMinor(ReadFile("/proc/driver/nvidia/gpus/" + bus + "/information"));
    if (minor >= 0) bus_of_minor[minor] = bus;
  }
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return;
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return;
  }
  std::vector<hwloc_obj_t> numa;
  for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n));) {
    numa.push_back(n);
    domains->push_back(HwlocCpus(n->cpuset));
  }
  for (size_t g = 0; g < step_gpus.size(); ++g) {
    char* end = nullptr;
    long minor = std::strtol(step_gpus[g].c_str(), &end, 10);
    if (end == step_gpus[g].c_str() || *end != '\0') continue;
    auto it = bus_of_minor.find(static_cast<int>(minor));
    if (it == bus_of_minor.end()) continue;
    hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(topo, it->second.c_str());
    if (!pci) continue;
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, pci);
    if (!anc || !anc->cpuset) continue;
    for (size_t d = 0; d < numa.size(); ++d) {
      if (hwloc_bitmap_intersects(numa[d]->cpuset, anc->cpuset)) {
        (*gpu_domain)[g] = static_cast<int>(d);
        break;
      }
    }
  }
  hwloc_topology_destroy(topo);
}

}  // namespace

int ParseNvidiaDeviceMinor(const std::string& information_text) {
  std::istringstream lines(information_text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("Device Minor:", 0) != 0) continue;
    std::string v = line.substr(13);
    char* end = nullptr;
    long m = std::strtol(v.c_str(), &end, 10);
    if (end != v.c_str() && m >= 0 && m < 1 << 20) return static_cast<int>(m);
  }
  return -1;
}

CpuBinding ChooseCpuBinding(const RankInfo& rank, const std::vector<std::string>& step_gpus) {
  CpuBinding b;
  std::vector<int> affinity = AffinityCpus();
  std::vector<int> allowed = CgroupCpus();
  if (allowed.empty()) allowed = affinity;
  // Only CPUs this task may actually run on.
  std::vector<int> usable;
  std::set_intersection(allowed.begin(), allowed.end(), affinity.begin(), affinity.end(),
                        std::back_inserter(usable));
  if (usable.size() < allowed.size()) {
    // Slurm (task/affinity, or the user's --cpu-bind) already gave this task its own CPUs.
    b.note = "CPUs already bound by Slurm to " + FormatCpuList(affinity);
    return b;
  }
  CpuSplitInput in;
  in.allowed = usable;
  in.local_size = rank.local_size;
  if (!step_gpus.empty()) {
    std::vector<int> gpu_domain;
    GpuLocality(step_gpus, &in.domains, &gpu_domain);
    for (int r = 0; r < rank.local_size; ++r) {
      auto g = SelectGpu(step_gpus, r, rank.local_size);
      in.rank_domain.push_back(g ? gpu_domain[static_cast<size_t>(g->index)] : -1);
    }
  } else {
    in.domains = SysfsNumaDomains();
  }
  auto sets = SplitCpus(in);
  if (sets.empty()) {
    b.note = "no CPUs to bind";
    return b;
  }
  b.cpus = sets[static_cast<size_t>(rank.local_rank)];
  if (usable.size() < static_cast<size_t>(rank.local_size)) {
    b.note = "fewer CPUs (" + std::to_string(usable.size()) + ") than local ranks (" +
             std::to_string(rank.local_size) + "): CPUs are shared";
  }
  return b;
}

}  // namespace autopar
