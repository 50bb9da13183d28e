// JobOwnerLookup over libslurm, through the SlurmActions edge (service/slurm_actions) that failure
// handling uses too: main.cpp opens one libslurm wrapper for the daemon and hands it to both.
#include <memory>
#include <utility>

#include "auth.h"
#include "service/slurm_actions/slurm_actions.h"

namespace autopar {
namespace {

class SlurmJobOwners : public JobOwnerLookup {
 public:
  SlurmJobOwners(std::shared_ptr<SlurmActions> slurm, std::string unavailable)
      : slurm_(std::move(slurm)), unavailable_(std::move(unavailable)) {}
  // LoadJob's errors: "job J: not a numeric Slurm job id", "job J: Slurm does not know it (...)".
  Result<uid_t> Owner(const std::string& job_id) override {
    if (!slurm_) {
      return Status::Error("job " + job_id + ": cannot ask Slurm who owns it (" + unavailable_ +
                           ")");
    }
    auto job = slurm_->LoadJob(job_id);
    if (!job.ok()) return job.status();
    return job->user_id;
  }

 private:
  std::shared_ptr<SlurmActions> slurm_;  // thread-safe (serialized calls); null without Slurm
  std::string unavailable_;
};

}  // namespace

std::unique_ptr<JobOwnerLookup> MakeSlurmJobOwners(std::shared_ptr<SlurmActions> slurm,
                                                   const std::string& unavailable) {
  return std::make_unique<SlurmJobOwners>(std::move(slurm), unavailable);
}

}  // namespace autopar
