"""A directory private to this process's user, checked on the way (docs/security.md): the Python
side of core/private_dir.h, for the checkpoint directory a program writes into.

Every component of the path that exists is opened by directory descriptor without following a
symlink and must be a directory owned by root or by this user and not writable by group or others
unless sticky (as /tmp is); the directory itself must be this user's and not writable by group or
others. What is missing is made 0700, whatever the umask. A directory that fails is refused with
one line that names it and the reason. Standard library only."""
from __future__ import annotations

import errno
import os
import stat

__all__ = ["PrivateDirError", "make_private_dir"]


class PrivateDirError(OSError):
    """A component of the directory could be read or replaced by another user."""


def _refuse(what: str, path: str, why: str) -> PrivateDirError:
    return PrivateDirError(f"{what}: {path}: {why} (refused: another user could read or replace "
                           "the job's files there)")


def _check(what: str, path: str, st: os.stat_result, uid: int, last: bool) -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(what, path, "is not a directory")
    others_write = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    mode = f"{stat.S_IMODE(st.st_mode):04o}"
    if last:
        if st.st_uid != uid:
            raise _refuse(what, path, f"is owned by uid {st.st_uid}, not by the job's owner (uid {uid})")
        if others_write:
            raise _refuse(what, path, f"is writable by group or others (mode {mode})")
    elif st.st_uid not in (0, uid):
        raise _refuse(what, path, f"is owned by uid {st.st_uid}, not by root or the job's owner "
                                  f"(uid {uid})")
    elif others_write and not st.st_mode & stat.S_ISVTX:
        raise _refuse(what, path, f"is writable by group or others and not sticky (mode {mode})")


def make_private_dir(path: str, what: str = "AUTOPAR_CKPT_DIR") -> str:
    """Checks (and makes what is missing of) `path`, an absolute directory, as the module's
    docstring says; returns `path`. Raises PrivateDirError naming `what` and the component."""
    if not os.path.isabs(path):
        raise PrivateDirError(f"{what}: {path}: not an absolute path")
    names = [n for n in path.split("/") if n]
    if any(n in (".", "..") for n in names):
        raise PrivateDirError(f"{what}: {path}: '.' and '..' are not allowed")
    uid = os.geteuid()
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _check(what, "/", os.fstat(fd), uid, last=not names)
        here = ""
        for i, name in enumerate(names):
            here += "/" + name
            made = False
            try:
                nxt = os.open(name, flags, dir_fd=fd)
            except FileNotFoundError:
                try:
                    os.mkdir(name, 0o700, dir_fd=fd)
                    made = True
                except FileExistsError:
                    pass
                except OSError as e:
                    raise PrivateDirError(f"{what}: cannot make {here}: {e.strerror}") from None
                nxt = _open_checked(what, here, name, flags, fd)
            except OSError as e:
                raise _opened_error(what, here, e) from None
            os.close(fd)
            fd = nxt
            if made:
                os.fchmod(fd, 0o700)  # the umask and a setgid parent decide nothing
            _check(what, here, os.fstat(fd), uid, last=i + 1 == len(names))
    finally:
        os.close(fd)
    return path


def _open_checked(what: str, here: str, name: str, flags: int, parent: int) -> int:
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError as e:
        raise _opened_error(what, here, e) from None


def _opened_error(what: str, here: str, e: OSError) -> PrivateDirError:
    if e.errno in (errno.ELOOP, errno.ENOTDIR):
        return _refuse(what, here, "is a symlink or not a directory")
    return PrivateDirError(f"{what}: cannot open {here}: {e.strerror}")
