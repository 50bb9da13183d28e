// LoadNccl: dlopen of NCCL, in the order nccl_library.h gives.
#include "nccl_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace autopar {
namespace {

template <typename Fn>
bool Bind(void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  return *out != nullptr;
}

}  // namespace

Result<NcclLibrary> OpenNccl(const std::string& chosen) {
  std::string tried, why;
  void* handle = nullptr;
  auto attempt = [&](const std::string& file, const std::string& label) {
    tried += (tried.empty() ? "" : ", ") + label;
    handle = dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!handle) why = dlerror();
    return handle != nullptr;
  };
  if (!chosen.empty()) {
    attempt(chosen, "AUTOPAR_NCCL_LIBRARY=" + chosen);
  } else if (!attempt("libnccl.so.2", "libnccl.so.2")) {
#ifdef AUTOPAR_NCCL_BUILT_AGAINST
    attempt(AUTOPAR_NCCL_BUILT_AGAINST, AUTOPAR_NCCL_BUILT_AGAINST);
#endif
  }
  if (!handle) return Status::Error("NCCL: cannot load " + tried + ": " + why);
  NcclLibrary lib;
  ncclResult_t (*get_version)(int*) = nullptr;
  if (!Bind(handle, "ncclGetUniqueId", &lib.get_unique_id) ||
      !Bind(handle, "ncclCommInitRank", &lib.comm_init_rank) ||
      !Bind(handle, "ncclGetErrorString", &lib.error_string) ||
      !Bind(handle, "ncclGetLastError", &lib.last_error) || !Bind(handle, "ncclGetVersion", &get_version)) {
    return Status::Error("NCCL: " + tried + " lacks a symbol of NCCL 2.13 or later: " + dlerror());
  }
  if (get_version(&lib.version) != ncclSuccess) lib.version = 0;
  Dl_info info{};
  lib.path = dladdr(reinterpret_cast<void*>(lib.get_unique_id), &info) && info.dli_fname
                 ? info.dli_fname
                 : tried;
  return lib;
}

std::string NcclLibrary::Error(const char* call, ncclResult_t rc) const {
  const char* last = last_error(nullptr);
  return std::string("NCCL: ") + call + " failed: " + error_string(rc) +
         (last && *last ? std::string(" (") + last + ")" : std::string());
}

Result<const NcclLibrary*> LoadNccl() {
  static std::once_flag once;
  static Result<NcclLibrary>* loaded = nullptr;
  std::call_once(once, [] {
    const char* chosen = std::getenv("AUTOPAR_NCCL_LIBRARY");
    loaded = new Result<NcclLibrary>(OpenNccl(chosen ? chosen : ""));
  });
  if (!*loaded) return loaded->status();
  return &**loaded;
}

}  // namespace autopar
