// The environment a task of a job that uses autopar gets from the SPANK plugin: torchrun's
// variables, so that `srun python train.py` works with torch.distributed's env:// init (a value
// the user set is kept), AUTOPAR_* for every option and the site's NCCL defaults. A job that uses
// none of autopar's options gets nothing (UsesAutopar), unless the site's torchrun_env=all gives
// every job torchrun's variables. Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/options.h"
#include "core/site_config.h"
#include "autopar/status.h"

namespace autopar {

// What Slurm says about one task (spank items and the job's environment).
struct TaskContext {
  uint32_t job_id = 0;
  uint32_t step_id = 0;
  uint32_t restart_count = 0;
  int64_t rank = 0;              // global task id in the step
  int64_t local_rank = 0;        // task id on this node
  int64_t world_size = 1;        // tasks in the step
  int64_t local_world_size = 1;  // tasks of the step on this node
  int64_t node_rank = 0;         // this node's index in the step
  int64_t num_nodes = 1;
  std::string step_nodelist;  // hostlist expression of the step's nodes
  std::string node_name;      // this node's Slurm name
  std::string user;           // the job owner's login name
};

using EnvList = std::vector<std::pair<std::string, std::string>>;

struct TaskEnv {
  EnvList set;             // autopar's own: always set (stale values from the submit shell go)
  EnvList torchrun;        // torchrun's: what the user set wins (TorchrunToSet)
  EnvList unless_present;  // the site's NCCL defaults: the user's own value wins
};

// A job uses autopar when one of its options is set, by the job or by a site default.
bool UsesAutopar(const JobOptions& resolved);

// torchrun's variables of one task (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...).
EnvList TorchrunEnv(const TaskContext& task, const SiteConfig& site);

// Where autopar records the torchrun values it set ("NAME=VALUE;NAME=VALUE..."): a later step
// (an srun in the batch script, which inherits the batch step's values) tells them from the user's.
inline constexpr char kTorchrunMarker[] = "AUTOPAR_TORCHRUN_ENV";

// Which of `torchrun` to set in a task whose environment is `current` (nullopt: unset): a
// variable that is unset, or that holds the value autopar set for an earlier step (the marker
// says so), is set; one the user set (any other value) is kept. The marker itself comes last,
// naming what is set.
using GetEnv = std::function<std::optional<std::string>(const std::string& name)>;
EnvList TorchrunToSet(const EnvList& torchrun, const GetEnv& current);

// MASTER_PORT for a step when no launcher picked a better one: base + (job_id + step_id) % range,
// so that concurrent steps of one job get distinct ports (up to `range` of them).
int64_t DeterministicMasterPort(uint32_t job_id, uint32_t step_id, const SiteConfig& site);

// Expands %j (job id), %n (node name), %u (user) and %% in a --ckpt-dir pattern.
std::string ExpandPathPattern(const std::string& pattern, const TaskContext& task);

// Builds the task's environment from resolved options. Fails only on a malformed step node list.
Result<TaskEnv> BuildTaskEnv(const TaskContext& task, const JobOptions& opts,
                             const SiteConfig& site);

}  // namespace autopar
