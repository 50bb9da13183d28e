// NCCL, loaded when a program first asks libautopar for a communicator (dlopen), not linked: a
// program that never makes one (the C API's job identity, broadcasts and checkpoints) starts
// without NCCL or CUDA on the node, and one that does uses the NCCL its process already holds
// (the one PyTorch or the program itself loaded), so the communicator and its collectives come
// from one library. Where from, first found:
//   1. AUTOPAR_NCCL_LIBRARY (a path: this one or an error naming it);
//   2. libnccl.so.2 by the dynamic loader's search (already loaded, LD_LIBRARY_PATH, ld.so.cache);
//   3. the libnccl this libautopar was built against (PyPI's nvidia-nccl wheel or a CUDA toolkit).
#pragma once

#include <nccl.h>

#include <string>

#include "autopar/status.h"

namespace autopar {

struct NcclLibrary {
  std::string path;  // what was loaded (dladdr of a symbol)
  int version = 0;   // ncclGetVersion: 2.30.7 is 23007
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = nullptr;
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  const char* (*error_string)(ncclResult_t) = nullptr;
  const char* (*last_error)(ncclComm_t) = nullptr;

  // "NCCL: <call> failed: <error string> (<last error>)".
  std::string Error(const char* call, ncclResult_t rc) const;
};

// Loads NCCL: `chosen` (AUTOPAR_NCCL_LIBRARY's value) when not empty, else as above.
Result<NcclLibrary> OpenNccl(const std::string& chosen);

// The process's NCCL, loaded once (thread-safe); later calls return the same one, or the same
// error: "NCCL: cannot load <what was tried>: <dlerror>".
Result<const NcclLibrary*> LoadNccl();

}  // namespace autopar
