// Paths below a directory, never through a symlink: each component of a relative path is opened
// from its parent's descriptor with O_NOFOLLOW, so a symlink anywhere below `root` (absolute or
// relative, at any component, swapped in at any time) is refused instead of followed. This is
// what openat2(2)'s RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS gives, done on any kernel. `..`, `.`
// and empty components are refused too.
//
// The functions return a descriptor (the caller closes it) or -1 with errno set, as open(2)
// does: ELOOP for a symlink, ENOTDIR for a component that is not a directory, EINVAL for a bad
// path. They act with the calling thread's identity (see AsUser in user_fs.h).
//
// Thread safety: reentrant.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "core/unique_fd.h"

namespace autopar {

// Whether `rel` is a relative path of plain components ("a/b/c": no leading or trailing '/', no
// empty, "." or ".." component).
bool IsPlainRelativePath(std::string_view rel);

// The directory `rel_dir` below `root_fd` ("" is `root_fd` itself, duplicated), created with
// `mode` where missing when `create` (mkdirat, component by component).
int OpenDirBeneath(int root_fd, std::string_view rel_dir, bool create, mode_t mode);

// open(2) of `rel` below `root_fd` with `flags` | O_NOFOLLOW | O_CLOEXEC (and `mode` for
// O_CREAT); its parent directories are created with `dir_mode` when `create_parents`.
int OpenBeneath(int root_fd, std::string_view rel, int flags, mode_t mode = 0,
                bool create_parents = false, mode_t dir_mode = 0700);

// Splits "a/b/c" into "a/b" and "c" ("" and "c" for "c").
std::pair<std::string_view, std::string_view> SplitParent(std::string_view rel);

}  // namespace autopar
