// The floor under autopar-launch's overhead (bench/launch/run.sh): a bare PMIx client that does
// only what the launcher cannot skip — PMIx_Init, rank 0's Put/Commit of one string, a collecting
// Fence, a Get of that string, the program as a child (vfork/exec/wait), PMIx_Finalize. Same
// compiler flags and PMIx library as autopar-launch; no hwloc, no autopar code.
//   srun --mpi=pmix bench-pmix-floor [--init-only] -- true
// --init-only: PMIx_Init and PMIx_Finalize around the child, nothing else (no Put/Fence/Get).
#include <pmix.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int Exchange(const pmix_proc_t& self) {
  if (self.rank == 0) {
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_STRING;
    v.data.string = const_cast<char*>("127.0.0.1 29500 -1");
    if (PMIx_Put(PMIX_GLOBAL, "autopar.master", &v) != PMIX_SUCCESS) return 1;
  }
  if (PMIx_Commit() != PMIX_SUCCESS) return 1;
  pmix_proc_t all;
  PMIX_LOAD_PROCID(&all, self.nspace, PMIX_RANK_WILDCARD);
  pmix_info_t info;
  bool collect = true;
  PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  if (PMIx_Fence(&all, 1, &info, 1) != PMIX_SUCCESS) return 1;
  pmix_proc_t root;
  PMIX_LOAD_PROCID(&root, self.nspace, 0);
  pmix_value_t* got = nullptr;
  if (PMIx_Get(&root, "autopar.master", nullptr, 0, &got) != PMIX_SUCCESS) return 1;
  PMIX_VALUE_RELEASE(got);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("PMIX_MCA_gds", "hash", 0);
  pmix_proc_t self;
  if (PMIx_Init(&self, nullptr, 0) != PMIX_SUCCESS) return 1;
  int first = 1;
  const bool init_only = first < argc && std::strcmp(argv[first], "--init-only") == 0;
  if (init_only) ++first;
  if (!init_only && Exchange(self) != 0) return 1;
  if (first < argc && std::strcmp(argv[first], "--") == 0) ++first;
  int status = 0;
  if (first < argc) {
    pid_t pid = vfork();
    if (pid == 0) {
      execvp(argv[first], argv + first);
      _exit(127);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid) status = 1 << 8;
  }
  PMIx_Finalize(nullptr, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
