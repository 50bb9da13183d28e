// autopar.so: the SPANK plugin's entry points and nothing else. Every hook catches everything (no
// exception crosses the C ABI) and hands the work to tested code: what it does with an option
// (spank/option_handling.cpp), option parsing and checks (core/options.cpp, core/site_config.cpp)
// and the task environment (core/task_env.cpp).
// spank.h declares the slurm_spank_* hooks outside its own extern "C" block (it is written for C);
// include it with C linkage so that our definitions below match the declarations.
extern "C" {
#include <slurm/spank.h>
}

#include <slurm/slurm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/job_plan.h"
#include "core/options.h"
#include "core/private_dir.h"
#include "core/site_config.h"
#include "core/submit_geometry.h"
#include "core/task_env.h"
#include "spank/option_handling.h"
#include "spank_task.h"

#define AUTOPAR_EXPORT extern "C" __attribute__((visibility("default")))

AUTOPAR_EXPORT const char plugin_name[] = "autopar";
AUTOPAR_EXPORT const char plugin_type[] = "spank";
AUTOPAR_EXPORT const unsigned int plugin_version = SLURM_VERSION_NUMBER;
AUTOPAR_EXPORT const unsigned int spank_plugin_version = 1;

namespace {

using autopar::JobOptions;
using autopar::OptionId;
using autopar::SiteConfig;
using autopar::Status;

// One plugin instance per process (srun, sbatch, slurmstepd): its site config and the options seen.
struct PluginState : autopar::OptionsSeen {
  std::string ckpt_dir_error;  // task_init_privileged's refusal, told in task_init
};

PluginState& State() {
  static PluginState state;
  return state;
}

int Fail(const std::string& message) {
  slurm_error("autopar: %s", message.c_str());
  return -1;
}

// A spare node (or an elastic floor, --min-nodes) is no use unless Slurm keeps the job when one of
// its nodes fails: --no-kill, which
// sets the job's kill_on_node_fail at submit time (no `scontrol update` changes it later). sbatch
// and salloc read SBATCH_NO_KILL/SALLOC_NO_KILL after a script's #SBATCH lines and before their
// command line, and they call SPANK option callbacks at each #SBATCH line and in the command-line
// pass, after the environment was read. So a request for spares is acted on at the #SBATCH line
// (OptionCallback) and, for the command line and the site's default, before any pass (Init). A
// user's own SBATCH_NO_KILL wins.
void RequestNoKill() {
  setenv("SBATCH_NO_KILL", "set", 0);
  setenv("SALLOC_NO_KILL", "set", 0);
}

// This process's command line (sbatch's, salloc's), argv[0] first.
std::vector<std::string> CommandLine() {
  std::vector<std::string> args;
  FILE* f = std::fopen("/proc/self/cmdline", "r");
  if (f == nullptr) return args;
  args.emplace_back();
  for (int c; (c = std::fgetc(f)) != EOF;) {
    if (c == '\0') {
      args.emplace_back();
    } else {
      args.back() += static_cast<char>(c);
    }
  }
  std::fclose(f);
  if (!args.empty() && args.back().empty()) args.pop_back();
  return args;
}

int OptionCallback(int val, const char* optarg, int remote) {
  try {
    const autopar::OptionVerdict v = autopar::TakeOption(State(), static_cast<OptionId>(val), optarg, remote != 0,
                                                         spank_context() == S_CTX_ALLOCATOR);
    if (!v.refusal.empty()) return Fail(v.refusal);
    if (v.request_no_kill) RequestNoKill();
    return 0;
  } catch (const std::exception& e) {
    return Fail(std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail("internal error");
  }
}

// spank_option_register keeps pointers to these strings for the life of the process.
std::vector<struct spank_option>& RegisteredOptions() {
  static std::vector<struct spank_option> opts = [] {
    std::vector<struct spank_option> v;
    for (const autopar::OptionSpec& spec : autopar::OptionTable()) {
      struct spank_option o {};
      o.name = const_cast<char*>(spec.name);
      o.arginfo = const_cast<char*>(spec.arginfo);
      o.usage = const_cast<char*>(spec.usage);
      o.has_arg = spec.optional_arg ? 2 : 1;
      o.val = static_cast<int>(spec.id);
      o.cb = OptionCallback;
      v.push_back(o);
    }
    return v;
  }();
  return opts;
}

int Init(spank_t sp, int ac, char** av) {
  PluginState& st = State();
  auto site = autopar::ParseSiteConfig(std::vector<std::string>(av, av + ac));
  if (site.ok()) {
    st.site = *site;
  } else {
    // A broken plugstack line never stops slurmd, a step or a job that does not use autopar (a
    // failed init would, with `required`): it is told here, in every context, and each of
    // autopar's options is refused naming it. The options are still registered so that scripts
    // with #SBATCH lines get this error instead of "unrecognized option".
    st.site_error = site.message() + " (autopar's options are refused until the line is fixed; "
                    "autopar check-plugstack checks it)";
    // sbatch, salloc and srun tell it once their options are read (InitPostOpt), unless an
    // option's refusal told it already: one line either way.
    const spank_context_t ctx = spank_context();
    if (ctx != S_CTX_ALLOCATOR && ctx != S_CTX_LOCAL) slurm_error("autopar: %s", st.site_error.c_str());
  }
  // The static spank_options table is ignored by sbatch/salloc (man spank); register each option.
  for (struct spank_option& o : RegisteredOptions()) {
    spank_err_t rc = spank_option_register(sp, &o);
    if (rc != ESPANK_SUCCESS)
      return Fail(std::string("cannot register --") + o.name + ": " + spank_strerror(rc));
  }
  if (!st.site_error.empty()) return 0;
  if (spank_context() == S_CTX_ALLOCATOR &&
      (st.site.defaults.survives_node_loss() || autopar::CommandLineSurvivesNodeLoss(CommandLine()))) {
    RequestNoKill();
  }
  return 0;
}

// sbatch's batch script among its arguments: the first that is a readable file starting with
// "#!" ("" for salloc, --wrap or a script on stdin).
std::string BatchScriptText(const std::vector<std::string>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i].empty() || args[i][0] == '-') continue;
    std::ifstream in(args[i]);
    char head[2] = {0, 0};
    if (!in.read(head, 2) || head[0] != '#' || head[1] != '!') continue;
    std::stringstream text;
    text << "#!" << in.rdbuf();
    return text.str();
  }
  return "";
}

// An elastic job's smallest size must have a plan (docs/elastic.md): Slurm may start it with
// the low end of its --nodes range, and --min-nodes lets it shrink to M. Slurm does not tell a
// plugin the job's shape at submit time, so it is read where sbatch reads it (the script's
// #SBATCH lines, then the command line); when the GPUs per node are not given there, srun checks
// it when the step starts instead.
int CheckSmallestPlan(const autopar::JobOptions& opts) {
  if (!opts.auto_parallel) return 0;
  const std::vector<std::string> args = CommandLine();
  autopar::SubmitGeometry g;
  autopar::ReadSubmitGeometry(autopar::SbatchLineArgs(BatchScriptText(args)), &g);
  autopar::ReadSubmitGeometry(std::vector<std::string>(args.begin() + (args.empty() ? 0 : 1), args.end()), &g);
  if (g.gpus_per_node <= 0) return 0;
  const auto [nodes, flag] = autopar::SmallestElasticSize(g, opts);
  if (nodes <= 0) return 0;
  auto plan = autopar::PlanStep(opts, nodes * g.gpus_per_node, g.gpus_per_node, 0,
                                SitePlanningOf(State().site));
  if (plan.ok()) return 0;
  return Fail(flag + ": no plan on " + std::to_string(nodes) + " node(s) (" +
              std::to_string(nodes * g.gpus_per_node) + " GPUs): " + plan.message());
}

// Submit time (sbatch, salloc, srun): the checks that span several options.
int InitPostOpt() {
  PluginState& st = State();
  spank_context_t ctx = spank_context();
  if (ctx != S_CTX_ALLOCATOR && ctx != S_CTX_LOCAL) return 0;
  if (!st.site_error.empty()) {
    // No option of autopar's was given (one would have been refused, naming the line): the job
    // runs as without the plugin, and the site's broken line is told.
    slurm_error("autopar: %s", st.site_error.c_str());
    return 0;
  }
  auto resolved = autopar::ResolveOptions(st.user, st.site);
  if (!resolved.ok()) return Fail(resolved.message());
  if (ctx == S_CTX_ALLOCATOR) return CheckSmallestPlan(*resolved);
  return 0;
}

// srun, once the step's allocation is known: plan the step once, for all its tasks. The plan
// travels to every task in AUTOPAR_PLAN_JSON; a layout that cannot fit stops srun here, before
// any training process starts.
// The plan srun logs for the step (and the nearby batch that plans markedly better, if any).
void SayPlan(const autopar::Plan& plan, uint32_t tasks) {
  const autopar::Layout& l = plan.chosen.layout;
  // The global batch is the user's; the gradient accumulation follows the data-parallel size.
  const std::string cp = l.cp > 1 ? " cp=" + std::to_string(l.cp) : "";
  // FSDP's shard group ("fsdp=64"), with HSDP its replicas too ("hsdp=8,4").
  const std::string fsdp =
      !l.fsdp() ? ""
      : l.fsdp_replicate() > 1
          ? " hsdp=" + std::to_string(l.fsdp_shard) + "," + std::to_string(l.fsdp_replicate())
          : " fsdp=" + std::to_string(l.fsdp_shard);
  // A calibrated plan says so (plugstack.conf calibration=PATH, docs/planner.md).
  const std::string calibrated =
      plan.calibration ? " (" + autopar::CalibrationLabel(*plan.calibration) + ")" : "";
  // ZeRO-2 (gradients sharded beside the optimizer states), and gradients reduced in bf16 (fp32
  // is the default, not said): pinned, or the fallback where no layout fits with fp32, which the
  // user should know changes the numerics.
  const std::string grads =
      std::string(l.grad_sharding() ? " grad_sharding=on" : "") +
      (l.grad_reduce != autopar::GradReduce::kBf16 ? ""
       : plan.grad_reduce_fallback                 ? " grad_reduce=bf16 (no layout fits with fp32)"
                                                   : " grad_reduce=bf16");
  slurm_info("autopar: plan for %s on %u GPUs: tp=%lld%s pp=%lld dp=%lld%s micro_batch=%lld "
             "grad_accum=%lld (global batch %lld = %lld x %lld x dp %lld) recompute=%s "
             "optimizer_sharding=%s%s, %.1f GiB/GPU, %.2f s/step%s",
             plan.model_name.c_str(), tasks, static_cast<long long>(l.tp), cp.c_str(),
             static_cast<long long>(l.pp), static_cast<long long>(l.dp), fsdp.c_str(),
             static_cast<long long>(l.micro_batch), static_cast<long long>(l.grad_accum),
             static_cast<long long>(l.micro_batch * l.grad_accum * l.dp),
             static_cast<long long>(l.micro_batch), static_cast<long long>(l.grad_accum),
             static_cast<long long>(l.dp),
             autopar::RecomputeName(l.recompute), l.optimizer_sharding() ? "on" : "off",
             grads.c_str(), plan.chosen.memory.total_gib, plan.chosen.step_time_s,
             calibrated.c_str());
  // A batch that forces a poor layout: the nearby one that plans markedly better.
  if (plan.batch_advice) {
    slurm_info("autopar: --global-batch: %s", autopar::BatchAdviceText(plan).c_str());
  }
  // A prediction above the best published run of its GPU type and size.
  if (plan.above_published) {
    slurm_info("autopar: published: %s", autopar::AbovePublishedText(plan).c_str());
  }
}

int LocalUserInit(spank_t sp) {
  PluginState& st = State();
  if (!st.site_error.empty()) return 0;
  auto resolved = autopar::ResolveOptions(st.user, st.site);
  if (!resolved.ok()) return Fail(resolved.message());
  const uint32_t spares = static_cast<uint32_t>(resolved->spare_nodes.value_or(0));
  if (!resolved->auto_parallel && !resolved->survives_node_loss()) return 0;
  uint32_t tasks = 0, nodes = 0;
  if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &tasks) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_NNODES, &nodes) != ESPANK_SUCCESS || tasks == 0 || nodes == 0)
    return Fail("cannot read the step's task and node counts");
  if (spares > 0) {
    if (nodes <= spares) {
      return Fail("--spare-nodes=" + std::to_string(spares) + ": the step has " +
                  std::to_string(nodes) + " node(s); it needs at least " +
                  std::to_string(spares + 1) + " (the program runs on all but the spares)");
    }
    if (tasks % nodes != 0) {
      return Fail("--spare-nodes: needs the same number of tasks on every node (the step has " +
                  std::to_string(tasks) + " tasks on " + std::to_string(nodes) + " nodes)");
    }
    // The program runs on the nodes that are not held in reserve.
    tasks -= spares * (tasks / nodes);
    nodes -= spares;
  }
  if (resolved->min_nodes) {
    const int64_t min_nodes = *resolved->min_nodes;
    const std::string flag = "--min-nodes=" + std::to_string(min_nodes);
    if (nodes < min_nodes) {
      return Fail(flag + ": the step runs on " + std::to_string(nodes) +
                  " node(s), fewer than the minimum it may shrink to");
    }
    if (tasks % nodes != 0) {
      return Fail("--min-nodes: needs the same number of tasks on every node (the step has " +
                  std::to_string(tasks) + " tasks on " + std::to_string(nodes) + " nodes)");
    }
    if (resolved->auto_parallel) {
      // The smallest size the run may shrink to must have a plan, or shrinking would stop it.
      const int64_t per_node = tasks / nodes;
      auto smallest =
          autopar::PlanStep(*resolved, min_nodes * per_node, per_node, 0, SitePlanningOf(st.site));
      if (!smallest.ok()) {
        return Fail(flag + ": no plan on " + std::to_string(min_nodes) + " node(s) (" +
                    std::to_string(min_nodes * per_node) + " GPUs): " + smallest.message());
      }
    }
  }
  if (!resolved->auto_parallel) return 0;
  // One task per GPU; with an uneven distribution the planner assumes the smaller share.
  auto plan = autopar::PlanStep(*resolved, tasks, std::max<uint32_t>(1, tasks / nodes), 0,
                                SitePlanningOf(st.site));
  if (!plan.ok()) return Fail(plan.message());
  SayPlan(*plan, tasks);
  // spank_setenv is valid only in the remote context; srun passes its own environment to the
  // step's tasks, so set it there. (With --export=NONE it does not travel, and task_init plans the
  // step itself: the same inputs give the same plan.)
  const std::string json = autopar::PlanToJson(*plan, false);
  if (setenv("AUTOPAR_PLAN_JSON", json.c_str(), 1) != 0)
    return Fail(std::string("cannot set AUTOPAR_PLAN_JSON: ") + std::strerror(errno));
  return 0;
}

// The task's plan variables: from the step's AUTOPAR_PLAN_JSON (made by srun), or planned here from
// the step itself when the step was not started by srun. The batch script is not a training task.
autopar::Result<autopar::EnvList> TaskPlanEnv(spank_t sp, const autopar::JobOptions& opts,
                                              const autopar::TaskContext& task) {
  if (!opts.auto_parallel || task.step_id == SLURM_BATCH_SCRIPT) return autopar::EnvList{};
  // With spare nodes the program's world is the step's but the spares' tasks. The launcher numbers
  // the ranks of the nodes in use (docs/recovery.md) and sets each rank's plan variables itself;
  // a task in reserve runs no program, so here it gets the last rank's as a placeholder.
  const int64_t world =
      task.world_size - opts.spare_nodes.value_or(0) * task.local_world_size;
  if (world <= 0) return autopar::Status::Error("--spare-nodes: the step has no node to run on");
  std::string json = autopar::spank::JobGetenv(sp, "AUTOPAR_PLAN_JSON");
  if (json.empty()) {
    auto plan =
        autopar::PlanStep(opts, world, task.local_world_size, 0, SitePlanningOf(State().site));
    if (!plan.ok()) return plan.status();
    json = autopar::PlanToJson(*plan, false);
  }
  return autopar::PlanEnvForTask(json, std::min(task.rank, world - 1), world);
}

// DeepSpeed reads its configuration from a file (`deepspeed --deepspeed_config FILE`): write the
// plan's config per node and step, atomically (every task writes the same bytes to its own
// temporary file and renames it into place), and point AUTOPAR_DEEPSPEED_CONFIG_FILE at it.
autopar::Status WriteDeepSpeedConfig(const autopar::TaskContext& task, autopar::EnvList& env) {
  const std::string* json = nullptr;
  for (const auto& kv : env)
    if (kv.first == "AUTOPAR_DEEPSPEED_CONFIG") json = &kv.second;
  if (json == nullptr) return autopar::Status::Ok();
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp && *tmp == '/' ? tmp : "/tmp") + "/autopar-" + task.user;
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return autopar::Status::Error("cannot create " + dir + ": " + std::strerror(errno));
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid())
    return autopar::Status::Error(dir + " is not a directory of this user");
  const std::string path = dir + "/deepspeed-" + std::to_string(task.job_id) + "." +
                           std::to_string(task.step_id) + ".json";
  // A unique temporary name per process: tasks of other nodes may share this directory too.
  std::string part = path + ".XXXXXX";
  const int fd = mkstemp(part.data());
  if (fd < 0) return autopar::Status::Error("cannot write " + part + ": " + std::strerror(errno));
  FILE* f = fdopen(fd, "w");
  if (f == nullptr) {
    close(fd);
    std::remove(part.c_str());
    return autopar::Status::Error("cannot write " + part + ": " + std::strerror(errno));
  }
  const bool written = std::fwrite(json->data(), 1, json->size(), f) == json->size();
  if (std::fclose(f) != 0 || !written || std::rename(part.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(part.c_str());
    return autopar::Status::Error("cannot write " + path + ": " + std::strerror(err));
  }
  env.emplace_back("AUTOPAR_DEEPSPEED_CONFIG_FILE", path);
  return autopar::Status::Ok();
}

// Whether the node's autopard accepts a connection on `socket`, trying for up to `wait_ms` (a
// daemon restarting is back within a second or two). Error: why the last try failed.
Status ProbeAutopard(const std::string& socket, int wait_ms) {
  sockaddr_un addr{};
  if (socket.size() >= sizeof addr.sun_path) return Status::Error("the path is too long");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket.c_str(), socket.size() + 1);
  std::string why;
  for (int waited = 0;; waited += 250) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::Error(std::string("socket: ") + std::strerror(errno));
    const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    why = rc == 0 ? "" : std::strerror(errno);
    ::close(fd);
    if (rc == 0) return Status::Ok();
    if (waited >= wait_ms) break;
    ::usleep(250 * 1000);
  }
  return Status::Error(why);
}

// A job whose options need autopard must not run without it unnoticed: its task fails (or, with
// on_autopard_missing=warn, says so) when the node's autopard does not answer.
// `given`: the job's own options (named in the message); `resolved`: with the site's defaults.
// `absent`: set when the job runs on without autopard (warn).
int CheckAutopard(const autopar::JobOptions& given, const autopar::JobOptions& resolved,
                  const autopar::TaskContext& task, const SiteConfig& site, bool* absent) {
  std::vector<std::string> needs = autopar::OptionsNeedingAutopard(resolved);
  if (needs.empty()) return 0;
  if (auto own = autopar::OptionsNeedingAutopard(given); !own.empty()) needs = own;
  const std::string socket = autopar::SocketPathForNode(site, task.node_name);
  Status up = ProbeAutopard(socket, 5000);
  if (up.ok()) return 0;
  std::string names;
  for (const auto& n : needs) names += (names.empty() ? "" : ", ") + n;
  const std::string message = task.node_name + ": autopard does not answer on " + socket + " (" +
                              up.message() + "); " + names + " need" +
                              (needs.size() == 1 ? "s" : "") + " it";
  if (site.fail_without_autopard) {
    return Fail(message + " (plugstack on_autopard_missing=fail)");
  }
  slurm_error("autopar: warning: %s: the job runs without them (on_autopard_missing=warn)",
              message.c_str());
  *absent = true;
  return 0;
}

int SetAll(spank_t sp, const autopar::EnvList& env) {
  for (const auto& [name, value] : env) {
    spank_err_t rc = spank_setenv(sp, name.c_str(), value.c_str(), 1);
    if (rc != ESPANK_SUCCESS) return Fail("cannot set " + name + ": " + spank_strerror(rc));
  }
  return 0;
}

// The job's node-local checkpoint directory, made by root for the job's owner only (0700) before
// the task drops its privileges, every component on the way checked (core/private_dir.h). A
// refusal is told in task_init, where the task's stderr reaches the user, and fails the task.
int TaskInitPrivileged(spank_t sp) {
  PluginState& st = State();
  st.ckpt_dir_error.clear();
  if (!st.option_error.empty() || !st.site_error.empty()) return 0;  // told in task_init
  auto resolved = autopar::ResolveOptions(st.user, st.site);
  if (!resolved.ok() || !resolved->ckpt_dir) return 0;
  auto task = autopar::spank::ReadTaskContext(sp);
  if (!task.ok()) return 0;  // task_init fails on it
  uid_t uid = 0;
  gid_t gid = 0;
  if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS) {
    st.ckpt_dir_error = "--ckpt-dir: the job's owner is not known";
    return 0;
  }
  std::vector<std::string> roots{autopar::StaticPrefix(st.site.builtin_ckpt_dir)};
  if (st.site.defaults.ckpt_dir) roots.push_back(autopar::StaticPrefix(*st.site.defaults.ckpt_dir));
  const std::string dir = autopar::ExpandPathPattern(*resolved->ckpt_dir, *task);
  autopar::Status s = autopar::MakePrivateDir("--ckpt-dir", dir, autopar::DirOwner{uid, gid}, roots);
  if (!s.ok()) st.ckpt_dir_error = s.message();
  return 0;
}

int TaskInit(spank_t sp) {
  PluginState& st = State();
  // Errors from user_init do not reach srun's terminal (pyxis works around the same Slurm
  // behaviour by failing in task_init); task_init runs in the task, whose stderr the user sees.
  if (!st.option_error.empty()) return Fail(st.option_error);
  if (!st.site_error.empty()) return 0;  // a job without autopar's options: untouched
  if (!st.ckpt_dir_error.empty()) return Fail(st.ckpt_dir_error);
  auto resolved = autopar::ResolveOptions(st.user, st.site);
  if (!resolved.ok()) return Fail(resolved.message());
  const bool uses = autopar::UsesAutopar(*resolved);
  // A job that uses none of autopar's options is untouched: not one variable changes, unless the
  // site gives every job torchrun's variables (torchrun_env=all).
  if (!uses && !st.site.torchrun_env_all) return 0;
  auto task = autopar::spank::ReadTaskContext(sp);
  if (!task.ok()) return Fail(task.message());
  auto current = [sp](const std::string& name) -> std::optional<std::string> {
    std::string v = autopar::spank::JobGetenv(sp, name.c_str());
    if (v.empty()) return std::nullopt;
    return v;
  };
  if (!uses) return SetAll(sp, autopar::TorchrunToSet(autopar::TorchrunEnv(*task, st.site), current));
  bool no_autopard = false;
  if (int rc = CheckAutopard(st.user, *resolved, *task, st.site, &no_autopard); rc != 0) return rc;
  auto env = autopar::BuildTaskEnv(*task, *resolved, st.site);
  if (!env.ok()) return Fail(env.message());
  // Without autopard (warn) its clients fail at once instead of waiting for it to come back.
  if (no_autopard) env->set.emplace_back("AUTOPAR_DAEMON_RETRY_S", "0");
  auto plan_env = TaskPlanEnv(sp, *resolved, *task);
  if (!plan_env.ok()) return Fail(plan_env.message());
  if (autopar::Status s = WriteDeepSpeedConfig(*task, *plan_env); !s.ok()) return Fail(s.message());
  env->set.insert(env->set.end(), plan_env->begin(), plan_env->end());
  const autopar::EnvList torchrun = autopar::TorchrunToSet(env->torchrun, current);
  // AUTOPAR_* values that the job does not set now are stale (copied from the submitting shell,
  // e.g. from inside another job): remove them so that the launcher and the program see only this
  // job's truth.
  char** job_env = nullptr;
  if (spank_get_item(sp, S_JOB_ENV, &job_env) == ESPANK_SUCCESS && job_env) {
    std::vector<std::string> stale;
    for (char** e = job_env; *e; ++e) {
      const std::string entry(*e);
      const std::string name = entry.substr(0, entry.find('='));
      if (name.rfind("AUTOPAR_", 0) != 0) continue;
      bool ours = name == autopar::kTorchrunMarker;
      for (const auto& kv : env->set) ours = ours || kv.first == name;
      if (!ours) stale.push_back(name);
    }
    for (const std::string& name : stale) spank_unsetenv(sp, name.c_str());
  }
  if (int rc = SetAll(sp, env->set); rc != 0) return rc;
  if (int rc = SetAll(sp, torchrun); rc != 0) return rc;
  for (const auto& [name, value] : env->unless_present) {
    spank_err_t rc = spank_setenv(sp, name.c_str(), value.c_str(), 0);
    if (rc != ESPANK_SUCCESS && rc != ESPANK_ENV_EXISTS)
      return Fail("cannot set " + name + ": " + spank_strerror(rc));
  }
  return 0;
}

template <typename F>
int Guard(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Fail(std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail("internal error");
  }
}

}  // namespace

AUTOPAR_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
  return Guard([&] { return Init(sp, ac, av); });
}

AUTOPAR_EXPORT int slurm_spank_init_post_opt(spank_t, int, char**) {
  return Guard([] { return InitPostOpt(); });
}

AUTOPAR_EXPORT int slurm_spank_local_user_init(spank_t sp, int, char**) {
  return Guard([&] { return LocalUserInit(sp); });
}

AUTOPAR_EXPORT int slurm_spank_task_init_privileged(spank_t sp, int, char**) {
  return Guard([&] { return TaskInitPrivileged(sp); });
}

AUTOPAR_EXPORT int slurm_spank_task_init(spank_t sp, int, char**) {
  return Guard([&] { return TaskInit(sp); });
}
