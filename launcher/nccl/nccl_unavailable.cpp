// CreateNcclComm in a libautopar built without NCCL (CUDA or NCCL were not found at build time):
// it reports that instead of pretending.
#include "autopar/nccl.h"

namespace autopar {

Result<ncclComm*> CreateNcclComm(JobBootstrap& job, const std::string& tag) {
  (void)job;
  return Status::Error("NCCL: communicator '" + tag +
                       "': this libautopar was built without NCCL (rebuild where CUDA and NCCL "
                       "are found)");
}

}  // namespace autopar
