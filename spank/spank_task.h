// Reads what Slurm knows about the current task (spank items and the job's environment) into the
// pure core's TaskContext. Only valid in the remote context, from slurm_spank_task_init.
#pragma once

// spank.h declares the slurm_spank_* hooks outside its own extern "C" block (it is written for C);
// include it with C linkage so that our definitions below match the declarations.
extern "C" {
#include <slurm/spank.h>
}

#include <string>

#include "autopar/status.h"
#include "core/task_env.h"

namespace autopar::spank {

Result<TaskContext> ReadTaskContext(spank_t sp);

// The value of a variable in the job's environment, or "" when unset.
std::string JobGetenv(spank_t sp, const char* name);

}  // namespace autopar::spank
