// autopar_man_lists: prints the names the code defines, one "LIST NAME" per line, for the man
// pages' check (tests/man/check_man_pages.py compares them with docs/man/*, both ways):
//   job-option     --NAME of every job option (core/options.cpp OptionTable)
//   plugstack-key  every plugstack.conf argument (core/site_config.cpp SiteConfigKeys)
//   task-env       every variable the SPANK plugin sets in a task (BuildTaskEnv with every
//                  option's variable, PlanTaskEnv, and the DeepSpeed file of spank/plugin.cpp)
//   autopard-key   every autopard.conf key (service/autopard/config.cpp DaemonConfigKeys)
//   launch-option  every autopar-launch option its --help shows (LaunchUsage), each checked
//                  against ParseLaunchArgs
//   launch-env     every variable BuildLaunchEnv sets for the program
// Exits 1 with a line on stderr when the code contradicts itself (an option in the usage that the
// parser refuses, a plan that cannot be made).
#include <cstdio>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/job_plan.h"
#include "core/options.h"
#include "core/plan/planner.h"
#include "core/site_config.h"
#include "core/task_env.h"
#include "launcher/launch.h"
#include "service/autopard/config.h"

namespace autopar {
namespace {

void Print(const char* list, const std::string& name) {
  std::printf("%s %s\n", list, name.c_str());
}

// The variables the plugin sets in a task (spank/plugin.cpp TaskInit): the site's master_ifname
// and spare nodes bring the conditional ones.
bool PrintTaskEnv() {
  std::set<std::string> names;
  for (const OptionSpec& spec : OptionTable()) names.insert(spec.env);
  TaskContext task;
  task.step_nodelist = "node1";
  task.node_name = "node1";
  SiteConfig site;
  site.master_ifname = "eth0";
  JobOptions opts;
  opts.spare_nodes = 1;
  auto env = BuildTaskEnv(task, opts, site);
  if (!env) {
    std::fprintf(stderr, "autopar_man_lists: BuildTaskEnv: %s\n", env.message().c_str());
    return false;
  }
  for (const auto& kv : env->set) names.insert(kv.first);
  for (const auto& kv : env->torchrun) names.insert(kv.first);
  names.insert(kTorchrunMarker);  // TorchrunToSet's record of what autopar set
  // A pipelined plan, so that every plan variable (AUTOPAR_STAGE_LAYERS too) is there.
  JobOptions planned;
  planned.auto_parallel = ParallelSpec{};
  planned.auto_parallel->pp = 2;
  planned.model = "llama-2-7b";
  planned.gpu_type = "a100-80gb";
  planned.global_batch = 64;
  auto plan = PlanStep(planned, 8, 8);
  if (!plan) {
    std::fprintf(stderr, "autopar_man_lists: PlanStep: %s\n", plan.message().c_str());
    return false;
  }
  for (const auto& kv : PlanTaskEnv(*plan, 0)) names.insert(kv.first);
  // And an FSDP plan (HSDP over 2 x 4), for its per-rank variables.
  planned.auto_parallel = *ParseParallelSpec("hsdp=2,4");
  auto fsdp = PlanStep(planned, 8, 8);
  if (!fsdp) {
    std::fprintf(stderr, "autopar_man_lists: PlanStep (hsdp): %s\n", fsdp.message().c_str());
    return false;
  }
  for (const auto& kv : PlanTaskEnv(*fsdp, 0)) names.insert(kv.first);
  names.insert("AUTOPAR_DEEPSPEED_CONFIG_FILE");  // spank/plugin.cpp WriteDeepSpeedConfig
  for (const std::string& n : names) Print("task-env", n);
  return true;
}

// The options of LaunchUsage(): the --names at the start of its option lines ("  --no-bind ...",
// "  --help, --version").
bool PrintLaunchOptions() {
  std::istringstream usage(LaunchUsage());
  const std::regex option_line(R"(^\s+(--[a-z][a-z-]*(=\S+)?(, --[a-z][a-z-]*)*)\b)");
  const std::regex name(R"(--[a-z][a-z-]*[a-z])");
  std::string line;
  bool ok = true;
  while (std::getline(usage, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, option_line)) continue;
    const std::string head = m[1];
    for (std::sregex_iterator it(head.begin(), head.end(), name), end; it != end; ++it) {
      const std::string opt = it->str();
      // The parser must know it: alone, or with a value where it takes one.
      auto alone = ParseLaunchArgs({opt, "prog"});
      auto valued = ParseLaunchArgs({opt + "=1", "prog"});
      if (!alone && !valued) {
        std::fprintf(stderr, "autopar_man_lists: %s is in LaunchUsage() but refused: %s\n",
                     opt.c_str(), alone.message().c_str());
        ok = false;
      }
      Print("launch-option", opt);
    }
  }
  return ok;
}

bool PrintLaunchEnv() {
  LaunchDecisions d;
  d.gpu = GpuChoice{"0", 0, false};
  d.cpus = {0, 1};
  auto changes = BuildLaunchEnv(d, {{"SLURM_JOB_ID", "1"}});
  if (!changes) {
    std::fprintf(stderr, "autopar_man_lists: BuildLaunchEnv: %s\n", changes.message().c_str());
    return false;
  }
  std::set<std::string> names;
  for (const auto& kv : changes->set) names.insert(kv.first);
  for (const auto& kv : changes->defaults) names.insert(kv.first);
  for (const std::string& n : names) Print("launch-env", n);
  return true;
}

}  // namespace
}  // namespace autopar

int main() {
  using namespace autopar;
  for (const OptionSpec& spec : OptionTable()) Print("job-option", std::string("--") + spec.name);
  for (const std::string& key : SiteConfigKeys()) Print("plugstack-key", key);
  for (const std::string& key : DaemonConfigKeys()) Print("autopard-key", key);
  bool ok = PrintTaskEnv();
  ok = PrintLaunchOptions() && ok;
  ok = PrintLaunchEnv() && ok;
  return ok ? 0 : 1;
}
