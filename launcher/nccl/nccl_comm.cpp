// CreateNcclComm with NCCL: rank 0's ncclUniqueId through PMIx, then ncclCommInitRank, both from
// the process's NCCL (nccl_library.h: loaded when first needed, not linked).
#include <cstring>

#include "autopar/nccl.h"
#include "launcher/nccl_bootstrap.h"
#include "nccl_library.h"

static_assert(NCCL_UNIQUE_ID_BYTES == autopar::kNcclUniqueIdBytes,
              "nccl_bootstrap.h's id size differs from this nccl.h");

namespace autopar {

namespace {
Status Located(const std::string& what, JobBootstrap& job) {
  return Status::Error(what + " [rank " + std::to_string(job.rank()) + " on " + job.host() + "]");
}
}  // namespace

Result<ncclComm*> CreateNcclComm(JobBootstrap& job, const std::string& tag) {
  auto nccl = LoadNccl();
  if (!nccl) return Located(nccl.status().message(), job);
  std::vector<uint8_t> id_bytes(NCCL_UNIQUE_ID_BYTES);
  ncclUniqueId id;
  if (job.rank() == 0) {
    if (ncclResult_t rc = (*nccl)->get_unique_id(&id); rc != ncclSuccess) {
      return Located((*nccl)->Error("ncclGetUniqueId", rc), job);
    }
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
  if (ncclResult_t rc = (*nccl)->comm_init_rank(&comm, job.size(), id, job.rank()); rc != ncclSuccess) {
    return Located((*nccl)->Error("ncclCommInitRank", rc), job);
  }
  return comm;
}

}  // namespace autopar
