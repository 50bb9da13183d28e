#include "spank_task.h"

#include <pwd.h>
#include <unistd.h>

#include <vector>

namespace autopar::spank {
namespace {

template <typename T>
Status GetItem(spank_t sp, spank_item_t item, T* out, const char* what) {
  spank_err_t rc = spank_get_item(sp, item, out);
  if (rc != ESPANK_SUCCESS)
    return Status::Error(std::string("cannot read ") + what + ": " + spank_strerror(rc));
  return Status::Ok();
}

}  // namespace

std::string JobGetenv(spank_t sp, const char* name) {
  std::vector<char> buf(4096);
  for (;;) {
    spank_err_t rc = spank_getenv(sp, name, buf.data(), static_cast<int>(buf.size()));
    if (rc == ESPANK_SUCCESS) return std::string(buf.data());
    if (rc != ESPANK_NOSPACE || buf.size() > (1u << 22)) return "";
    buf.resize(buf.size() * 4);
  }
}

Result<TaskContext> ReadTaskContext(spank_t sp) {
  TaskContext t;
  uint32_t global_id = 0, nnodes = 0, nodeid = 0, local_count = 0, total_count = 0;
  int local_id = 0;
  uid_t uid = 0;
  for (Status s : {GetItem(sp, S_JOB_ID, &t.job_id, "job id"),
                   GetItem(sp, S_JOB_STEPID, &t.step_id, "step id"),
                   GetItem(sp, S_TASK_GLOBAL_ID, &global_id, "global task id"),
                   GetItem(sp, S_TASK_ID, &local_id, "local task id"),
                   GetItem(sp, S_JOB_NNODES, &nnodes, "node count"),
                   GetItem(sp, S_JOB_NODEID, &nodeid, "node id"),
                   GetItem(sp, S_JOB_LOCAL_TASK_COUNT, &local_count, "local task count"),
                   GetItem(sp, S_JOB_TOTAL_TASK_COUNT, &total_count, "task count"),
                   GetItem(sp, S_JOB_UID, &uid, "user id")}) {
    if (!s.ok()) return s;
  }
  // Absent before Slurm records a restart; 0 then.
  if (spank_get_item(sp, S_SLURM_RESTART_COUNT, &t.restart_count) != ESPANK_SUCCESS)
    t.restart_count = 0;
  t.rank = global_id;
  t.local_rank = local_id;
  t.world_size = total_count;
  t.local_world_size = local_count;
  t.node_rank = nodeid;
  t.num_nodes = nnodes;
  t.node_name = JobGetenv(sp, "SLURMD_NODENAME");
  t.step_nodelist = JobGetenv(sp, "SLURM_STEP_NODELIST");
  if (t.step_nodelist.empty()) t.step_nodelist = JobGetenv(sp, "SLURM_JOB_NODELIST");
  if (t.step_nodelist.empty()) t.step_nodelist = t.node_name;
  if (t.step_nodelist.empty()) return Status::Error("the task has no SLURM_STEP_NODELIST");

  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found)
    t.user = found->pw_name;
  else
    t.user = std::to_string(uid);
  return t;
}

}  // namespace autopar::spank
