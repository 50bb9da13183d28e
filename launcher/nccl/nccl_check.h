// NCCLCHECK/CUDACHECK-style helpers (after nccl-tests): turn an NCCL or CUDA error into a Status
// naming the call, file:line, the error string, ncclGetLastError() and the rank and host; they
// return instead of exiting (only main() exits).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "autopar/status.h"

namespace autopar {

inline Status NcclError(const char* call, ncclResult_t rc, const char* file, int line, int rank,
                        const std::string& host) {
  const char* last = ncclGetLastError(nullptr);
  return Status::Error(std::string("NCCL: ") + call + " failed: " + ncclGetErrorString(rc) +
                       (last && *last ? std::string(" (") + last + ")" : std::string()) +
                       " [rank " + std::to_string(rank) + " on " + host + ", " + file + ":" +
                       std::to_string(line) + "]");
}

inline Status CudaError(const char* call, cudaError_t rc, const char* file, int line, int rank,
                        const std::string& host) {
  return Status::Error(std::string("CUDA: ") + call + " failed: " + cudaGetErrorString(rc) +
                       " [rank " + std::to_string(rank) + " on " + host + ", " + file + ":" +
                       std::to_string(line) + "]");
}

}  // namespace autopar

#define NCCL_TRY(call, job)                                                               \
  do {                                                                                    \
    ncclResult_t nccl_rc_ = (call);                                                       \
    if (nccl_rc_ != ncclSuccess)                                                          \
      return ::autopar::NcclError(#call, nccl_rc_, __FILE__, __LINE__, (job).rank(),      \
                                  (job).host());                                          \
  } while (0)

#define CUDA_TRY(call, job)                                                               \
  do {                                                                                    \
    cudaError_t cuda_rc_ = (call);                                                        \
    if (cuda_rc_ != cudaSuccess)                                                          \
      return ::autopar::CudaError(#call, cuda_rc_, __FILE__, __LINE__, (job).rank(),      \
                                  (job).host());                                          \
  } while (0)
