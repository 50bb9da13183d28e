// The environment every task of a job gets from the SPANK plugin: torchrun's variables, so that
// `srun python train.py` works with torch.distributed's env:// init, plus AUTOPAR_* for every option
// and the site's NCCL defaults. Pure; thread-compatible.
#pragma once

#include <cstdint>
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
  EnvList set;             // always set (stale values from the submit shell are replaced)
  EnvList unless_present;  // the site's NCCL defaults: the user's own value wins
};

// MASTER_PORT for a job when no launcher picked a better one: base + job_id % range.
int64_t DeterministicMasterPort(uint32_t job_id, const SiteConfig& site);

// Expands %j (job id), %n (node name), %u (user) and %% in a --ckpt-dir pattern.
std::string ExpandPathPattern(const std::string& pattern, const TaskContext& task);

// Builds the task's environment from resolved options. Fails only on a malformed step node list.
Result<TaskEnv> BuildTaskEnv(const TaskContext& task, const JobOptions& opts,
                             const SiteConfig& site);

}  // namespace autopar
