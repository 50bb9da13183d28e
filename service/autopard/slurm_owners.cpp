// JobOwnerLookup over libslurm, through the SlurmActions edge (service/slurm_actions) that failure
// handling uses too: one libslurm wrapper for the daemon.
#include <memory>

#include "auth.h"
#include "autopar/slurm_actions.h"

namespace autopar {
namespace {

class SlurmJobOwners : public JobOwnerLookup {
 public:
  explicit SlurmJobOwners(const std::string& slurm_conf)
      : slurm_(MakeLibSlurmActions(slurm_conf)) {}
  // LoadJob's errors: "job J: not a numeric Slurm job id", "job J: Slurm does not know it (...)".
  Result<uid_t> Owner(const std::string& job_id) override {
    auto job = slurm_->LoadJob(job_id);
    if (!job.ok()) return job.status();
    return job->user_id;
  }

 private:
  std::unique_ptr<SlurmActions> slurm_;  // thread-safe (serialized calls)
};

}  // namespace

std::unique_ptr<JobOwnerLookup> MakeSlurmJobOwners(const std::string& slurm_conf) {
  return std::make_unique<SlurmJobOwners>(slurm_conf);
}

}  // namespace autopar
