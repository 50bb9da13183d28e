// Why a rank's program ended, beyond its exit status (docs/health.md): out of memory,
// told by the kernel (the memory cgroup's oom_kill count went up while the program ran and it died
// of SIGKILL) or by the program itself (its error in TORCHELASTIC_ERROR_FILE, the file torchrun's
// @record writes and autopar's Python module writes for an uncaught exception). The pure part is
// core/failure/oom.h. One per launcher; not thread-safe.
//
// The launcher's own error file lives in a directory only its user can enter (mkdtemp, 0700),
// never at a name others can guess in a shared /tmp: a file another user made there first (the
// launcher, not root, cannot remove it from a sticky /tmp) would hand it a false verdict.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "launcher/launch.h"

namespace autopar {

class ProgramErrors {
 public:
  ProgramErrors() = default;
  ProgramErrors(const ProgramErrors&) = delete;
  ProgramErrors& operator=(const ProgramErrors&) = delete;
  ~ProgramErrors();  // removes its own file and directory

  // Before each program start: gives the program its TORCHELASTIC_ERROR_FILE (unless the job set
  // its own: that one is read, never removed), removes what an earlier program left there, and
  // notes the OOM kills so far of the job's own memory cgroup (core/failure/oom.h: a cgroup
  // shared with other jobs tells nothing). `cgroup_root` and `proc_cgroup` (the launcher's
  // /proc/self/cgroup text; read when empty): for tests.
  void Prepare(EnvMap* env, const std::string& cgroup_root = "/sys/fs/cgroup",
               const std::string& proc_cgroup = "");
  // After the program ended on its own with `exit_code` (the shell's: 128+S for signal S): how it
  // ran out of memory, one line, or "" when it did not.
  std::string OutOfMemory(int exit_code);

 private:
  std::string error_file_;
  bool own_file_ = false;
  std::string own_dir_;  // the private directory of the launcher's own file
  std::string counter_file_;  // the memory cgroup's, "" when none could be read
  std::optional<int64_t> kills_before_;
};

}  // namespace autopar
