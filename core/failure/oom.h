// Out of memory (docs/health.md): how a program's end is told to be an OOM. Two ways,
// both read by the rank's autopar-launch when its program ends:
//  - the kernel's OOM killer ended it (SIGKILL): the memory cgroup the launcher and its program
//    share (Slurm's task/cgroup puts each task in one; --mem and ConstrainRAMSpace set its limit)
//    counts it in `oom_kill` (cgroup v2 memory.events, v1 memory.oom_control);
//  - the program failed with an out-of-memory error (CUDA's "out of memory", Python's
//    MemoryError, PyTorch's allocators): it wrote the error to TORCHELASTIC_ERROR_FILE, the
//    file torchrun's @record uses, which autopar-launch sets for each program (autopar's Python
//    module writes it for an uncaught exception, python/autopar/errors.py).
// Pure: text in, facts out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace autopar {

// The files that may hold the memory cgroup's oom_kill count for a process of job `job_id`,
// from its /proc/PID/cgroup text, most specific first: v1 (the "memory" controller's line) under
// <root>/memory, v2 (the "0::" line) under <root> and <root>/unified (hybrid mounts). Only a
// cgroup of the job's own counts: one whose path has a "job_<job_id>" component, as Slurm's
// task/cgroup names them (v1 /slurm/uid_U/job_J/step_S/task_T, v2 .../job_J/step_S/user/task_T).
// A cgroup shared with other jobs (a node without task/cgroup: slurmd's) counts their OOM kills
// too (the count is hierarchical), and a program killed by anyone else would be taken for OOM.
std::vector<std::string> OomCounterFiles(const std::string& proc_cgroup, const std::string& job_id,
                                         const std::string& root = "/sys/fs/cgroup");
// The `oom_kill N` count of a memory.events or memory.oom_control text; nullopt without one.
std::optional<int64_t> OomKillCount(const std::string& text);

// The memory per GPU the next plan must fit in after a plan that predicted `planned_gib` ran out:
// 15% less (a second OOM takes 15% of that again). The planner then chooses a smaller
// micro-batch, more recompute or more sharding, whatever is fastest within it.
inline constexpr double kOomReplanFactor = 0.85;
inline double OomReplanMemGib(double planned_gib) { return planned_gib * kOomReplanFactor; }

// Whether an error message says that memory ran out (CUDA, PyTorch's CPU allocator, Python,
// C++'s std::bad_alloc, errno ENOMEM).
bool IsOutOfMemoryMessage(const std::string& message);
// The message of a torchelastic error file ({"message": {"message": "...", ...}} or
// {"message": "..."}), its first line, at most `max_chars`; "" when the text is not one.
std::string ErrorFileMessage(const std::string& json_text, size_t max_chars = 200);

}  // namespace autopar
