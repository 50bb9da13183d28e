// A fake Slurm for unit tests of code that uses SlurmActions (guarded_requeue_test.cpp,
// service/failure). Test-only; thread-safe.
#pragma once

#include <functional>
#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "service/slurm_actions/slurm_actions.h"

namespace autopar {

// A Slurm in memory that behaves like slurmctld for the calls autopard makes: a requeue of a
// job that is not running fails, it bumps the restart count, the job becomes PENDING (COMPLETING
// while it cleans up), only pending jobs take new excluded nodes. It can be told to refuse.
class FakeSlurm : public SlurmActions {
 public:
  FakeSlurm() {
    job.job_id = "42";
    job.state = "RUNNING";
    job.batch = true;
    job.requeue_allowed = true;
    job.nodes = "node[1-2]";
    job.batch_host = "node1";
  }
  Result<SlurmJob> LoadJob(const std::string& id) override {
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> l(mu);
      ++loads;
      hook = before_load;
      before_load = nullptr;
    }
    if (hook) hook();
    std::lock_guard<std::mutex> l(mu);
    if (id != job.job_id) return Status::Error("job " + id + ": Invalid job id specified");
    return job;
  }
  Status Requeue(const std::string& id) override {
    std::lock_guard<std::mutex> l(mu);
    if (!refuse_requeue.empty()) return Status::Error(refuse_requeue);
    if (id != job.job_id) return Status::Error("Invalid job id specified");
    if (job.pending()) return Status::Error("Job is pending execution");
    ++requeues;
    job.state = "PENDING";
    job.requeue_flag = false;
    job.completing = true;
    job.restart_count++;
    job.eligible_time = 1000 + 11;  // "now" + cred_expire + 1
    job.nodes.clear();
    return Status::Ok();
  }
  Status Update(const SlurmJobUpdate& u) override {
    std::lock_guard<std::mutex> l(mu);
    updates.push_back(u);
    if (!refuse_update.empty()) return Status::Error(refuse_update);
    if (u.excluded_nodes) {
      if (!job.pending()) return Status::Error("Job is no longer pending execution");
      job.excluded_nodes = *u.excluded_nodes;
    }
    if (u.admin_comment) job.admin_comment = *u.admin_comment;
    if (u.begin_time) job.eligible_time = *u.begin_time;
    if (u.num_tasks) job.tasks = *u.num_tasks;
    return Status::Ok();
  }
  Status Cancel(const std::string& id) override {
    std::lock_guard<std::mutex> l(mu);
    if (!refuse_cancel.empty()) return Status::Error(refuse_cancel);
    if (id != job.job_id) return Status::Error("Invalid job id specified");
    job.state = "CANCELLED";
    return Status::Ok();
  }

  std::vector<std::string> UnreachableNodes(const std::vector<std::string>& nodes,
                                            int) override {
    std::lock_guard<std::mutex> l(mu);
    std::vector<std::string> out;
    for (const auto& n : nodes) {
      for (const auto& d : dead_nodes) {
        if (n == d) out.push_back(n);
      }
    }
    return out;
  }

  Result<std::string> LossEvidence(const std::string& node, int) override {
    std::lock_guard<std::mutex> l(mu);
    for (const auto& w : weak_nodes) {
      if (w == node) return Status::Error("its slurmd did not answer in 1 s (weak evidence)");
    }
    return std::string("slurmd refuses connections");
  }

  Status MarkNodeDown(const std::string& node, const std::string&) override {
    std::lock_guard<std::mutex> l(mu);
    downed.push_back(node);
    return Status::Ok();
  }
  Result<std::pair<std::string, double>> ProcessTracking() override {
    std::lock_guard<std::mutex> l(mu);
    return std::make_pair(proctrack_type, kill_wait_s);
  }

  std::mutex mu;
  std::string proctrack_type = "proctrack/linuxproc";  // as the test cluster's
  double kill_wait_s = 5;
  std::vector<std::string> downed;
  SlurmJob job;
  std::vector<std::string> dead_nodes;
  std::vector<std::string> weak_nodes;  // dead_nodes whose loss is only a probe that timed out
  int loads = 0, requeues = 0;
  std::vector<SlurmJobUpdate> updates;
  std::string refuse_requeue, refuse_update, refuse_cancel;
  std::function<void()> before_load;
};

}  // namespace autopar
