// JobOwnerLookup over libslurm (the daemon's only Slurm edge for now).
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include <cstdlib>
#include <mutex>

#include "auth.h"

namespace autopar {
namespace {

class SlurmJobOwners : public JobOwnerLookup {
 public:
  explicit SlurmJobOwners(const std::string& slurm_conf) {
    if (!slurm_conf.empty()) setenv("SLURM_CONF", slurm_conf.c_str(), 1);
    slurm_init(slurm_conf.empty() ? nullptr : slurm_conf.c_str());
  }
  Result<uid_t> Owner(const std::string& job_id) override {
    char* end = nullptr;
    unsigned long id = std::strtoul(job_id.c_str(), &end, 10);
    if (job_id.empty() || *end != '\0' || id == 0 || id > 0xfffffff0ul) {
      return Status::Error("job " + job_id + ": not a numeric Slurm job id");
    }
    // libslurm's RPC layer is thread-safe, but keep one request at a time: this is rare and
    // cached.
    std::lock_guard<std::mutex> lock(mu_);
    job_info_msg_t* msg = nullptr;
    if (slurm_load_job(&msg, static_cast<uint32_t>(id), SHOW_ALL) != SLURM_SUCCESS || !msg) {
      return Status::Error("job " + job_id + ": Slurm does not know it (" +
                           slurm_strerror(slurm_get_errno()) + ")");
    }
    if (msg->record_count < 1) {
      slurm_free_job_info_msg(msg);
      return Status::Error("job " + job_id + ": Slurm does not know it");
    }
    uid_t uid = msg->job_array[0].user_id;
    slurm_free_job_info_msg(msg);
    return uid;
  }

 private:
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<JobOwnerLookup> MakeSlurmJobOwners(const std::string& slurm_conf) {
  return std::make_unique<SlurmJobOwners>(slurm_conf);
}

}  // namespace autopar
