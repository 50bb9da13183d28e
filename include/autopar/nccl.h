// libautopar's C++ API for native programs started by autopar-launch: the job's identity and a
// PMIx broadcast (JobBootstrap), and an NCCL communicator over every rank of the step whose
// ncclUniqueId is made by rank 0 and shared through PMIx (CreateNcclComm).
//
// The program is a PMIx client of the step in its own right (autopar-launch passes the PMIx
// environment through), so it needs no MPI and no hand-rolled TCP exchange. Every rank must make
// the same sequence of Broadcast/CreateNcclComm calls with the same tags (each PMIx Fence is
// collective over the whole step). A JobBootstrap is not thread-safe; create one per process.
// Failures come back as Result/Status with a message naming the PMIx or NCCL call and its error
// string, e.g. "NCCL: ncclCommInitRank failed: unhandled system error (rank 3 on node2) ...".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autopar/status.h"

struct ncclComm;  // nccl.h: typedef struct ncclComm* ncclComm_t;

namespace autopar {

class JobBootstrap {
 public:
  // PMIx_Init as this rank and reads the identity. Fails when no PMIx server is advertised
  // (start the program with srun --mpi=pmix autopar-launch) or PMIx fails.
  static Result<std::unique_ptr<JobBootstrap>> Connect();
  ~JobBootstrap();  // PMIx_Finalize
  JobBootstrap(const JobBootstrap&) = delete;
  JobBootstrap& operator=(const JobBootstrap&) = delete;

  int rank() const;
  int size() const;
  int local_rank() const;
  int local_size() const;
  int node_rank() const;
  int num_nodes() const;
  const std::string& host() const;

  // Collective: returns `root`'s `bytes` on every rank (`bytes` is ignored elsewhere). `tag`
  // names the value ([A-Za-z0-9._-], 1-64 characters); use each tag once per job.
  Result<std::vector<uint8_t>> Broadcast(const std::string& tag, int root,
                                         const std::vector<uint8_t>& bytes);

  struct Impl;

 private:
  explicit JobBootstrap(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Collective: an NCCL communicator over all ranks of the step on the current CUDA device
// (autopar-launch gives each rank one GPU, device 0 of its CUDA_VISIBLE_DEVICES). Rank 0 calls
// ncclGetUniqueId, the id travels through JobBootstrap::Broadcast(tag). Only in a libautopar built
// with NCCL; otherwise it fails saying so. The caller owns the communicator (ncclCommDestroy).
// NCCL is loaded at the first call, not linked: the one the process already holds (the program's,
// PyTorch's), else libnccl.so.2 by the loader's search, else the one libautopar was built
// against; AUTOPAR_NCCL_LIBRARY=PATH chooses one (and only that one).
Result<ncclComm*> CreateNcclComm(JobBootstrap& job, const std::string& tag = "world");

}  // namespace autopar
