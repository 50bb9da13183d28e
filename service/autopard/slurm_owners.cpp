// JobOwnerLookup over libslurm, through the SlurmActions edge (service/slurm_actions) that failure
// handling uses too: one libslurm wrapper for the daemon.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "auth.h"
#include "autopar/slurm_actions.h"

namespace autopar {
namespace {

class SlurmJobOwners : public JobOwnerLookup {
 public:
  explicit SlurmJobOwners(const std::string& slurm_conf) {
    std::string conf = slurm_conf;
    if (conf.empty()) {
      const char* env = std::getenv("SLURM_CONF");
      conf = env && *env ? env : "/etc/slurm/slurm.conf";
    }
    // libslurm exits the process (fatal) when it finds no configuration: without one, only
    // privileged peers (root, SlurmUser) can be served.
    if (access(conf.c_str(), R_OK) != 0) {
      missing_ = conf;
      std::fprintf(stderr, "autopard: warning: %s not readable: job owners cannot be looked up; "
                   "only root and SlurmUser may use this daemon\n", conf.c_str());
      return;
    }
    slurm_ = MakeLibSlurmActions(slurm_conf);
  }
  // LoadJob's errors: "job J: not a numeric Slurm job id", "job J: Slurm does not know it (...)".
  Result<uid_t> Owner(const std::string& job_id) override {
    if (!slurm_) {
      return Status::Error("job " + job_id + ": cannot ask Slurm who owns it (" + missing_ +
                           " is not readable)");
    }
    auto job = slurm_->LoadJob(job_id);
    if (!job.ok()) return job.status();
    return job->user_id;
  }

 private:
  std::string missing_;
  std::unique_ptr<SlurmActions> slurm_;  // thread-safe (serialized calls); null without Slurm
};

}  // namespace

std::unique_ptr<JobOwnerLookup> MakeSlurmJobOwners(const std::string& slurm_conf) {
  return std::make_unique<SlurmJobOwners>(slurm_conf);
}

}  // namespace autopar
