// CreateNcclComm with NCCL: rank 0's ncclUniqueId through PMIx, then ncclCommInitRank.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

#include "autopar/nccl.h"
#include "launcher/nccl_bootstrap.h"
#include "nccl_check.h"

static_assert(NCCL_UNIQUE_ID_BYTES == autopar::kNcclUniqueIdBytes,
              "nccl_bootstrap.h's id size differs from this nccl.h");

namespace autopar {

Result<ncclComm*> CreateNcclComm(JobBootstrap& job, const std::string& tag) {
  std::vector<uint8_t> id_bytes(NCCL_UNIQUE_ID_BYTES);
  ncclUniqueId id;
  if (job.rank() == 0) {
    NCCL_TRY(ncclGetUniqueId(&id), job);
    std::memcpy(id_bytes.data(), id.internal, NCCL_UNIQUE_ID_BYTES);
  }
  auto shared = job.Broadcast(tag, 0, id_bytes);
  if (!shared) return shared.status();
  if (shared->size() != NCCL_UNIQUE_ID_BYTES) {
    return Status::Error("NCCL: the unique id from rank 0 has " + std::to_string(shared->size()) +
                         " bytes, expected " + std::to_string(NCCL_UNIQUE_ID_BYTES));
  }
  std::memcpy(id.internal, shared->data(), NCCL_UNIQUE_ID_BYTES);
  ncclComm_t comm = nullptr;
  NCCL_TRY(ncclCommInitRank(&comm, job.size(), id, job.rank()), job);
  return comm;
}

}  // namespace autopar
