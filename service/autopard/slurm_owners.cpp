// JobOwnerLookup over libslurm (the daemon's only Slurm edge for now).
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "auth.h"

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
    setenv("SLURM_CONF", conf.c_str(), 1);
    slurm_init(conf.c_str());
  }
  Result<uid_t> Owner(const std::string& job_id) override {
    if (!missing_.empty()) {
      return Status::Error("job " + job_id + ": cannot ask Slurm who owns it (" + missing_ +
                           " is not readable)");
    }
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
  std::string missing_;
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<JobOwnerLookup> MakeSlurmJobOwners(const std::string& slurm_conf) {
  return std::make_unique<SlurmJobOwners>(slurm_conf);
}

}  // namespace autopar
