// A job's node-local checkpoint directory, made private to the job's owner (docs/security.md).
//
// The directory a job writes its checkpoints into sits under paths other users share (/tmp, a
// scratch file system). A user who makes one of its components first, or who can replace one,
// would receive the job's files or feed it theirs; a directory made under the job's umask lets
// everyone read them. MakePrivateDir walks the path from "/" by directory descriptors, never
// following a symlink, and checks every component that exists:
//   - a real directory, owned by root or by the owner;
//   - not writable by group or others, unless sticky (as /tmp is: others cannot rename or remove
//     what is not theirs there);
//   - the last component the owner's and not writable by group or others.
// Each missing component is made mode 0700 and the owner's. It is made with the owner's own
// file-system identity (so that the kernel checks that the owner may make it there), except
// under one of `shared_roots`, the static prefixes of the site's own checkpoint-directory
// patterns (plugstack.conf's builtin_ckpt_dir, default_ckpt_dir): a missing component of a
// shared root is made by root, root's, 0755, and the first component below one by root for the
// owner, 0700. A path the owner names never makes root create anything outside those roots.
// Must run as root (it switches the thread's fsuid); the process's umask is not used.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "autopar/status.h"

namespace autopar {

struct DirOwner {
  uid_t uid = 0;
  gid_t gid = 0;
};

// The static prefix of a directory pattern with %-placeholders: its components before the first
// one that holds a '%' ("/tmp/autopar/%u/%j" -> "/tmp/autopar"); "" when the first component
// has one, the whole pattern when none does.
std::string StaticPrefix(const std::string& pattern);

// Makes or checks `path` (absolute) as above. Errors name `what` (e.g. "--ckpt-dir"), the
// component and the reason, in one line.
Status MakePrivateDir(const std::string& what, const std::string& path, const DirOwner& owner,
                      const std::vector<std::string>& shared_roots);

}  // namespace autopar
