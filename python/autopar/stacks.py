"""Python stack dumps for autopard's hang reports (core/failure/stack_capture.h).

``install()`` registers ``faulthandler`` on SIGUSR2: when autopard finds the job hung, it sends
SIGUSR2 to each rank that catches it, and the rank writes the stacks of all its threads to
``<AUTOPAR_STACK_DIR or /tmp/autopar-stacks/<job>>/stack-rank<R>.txt`` (appending), which
autopard reads into the job's timeline (`autopar events JOBID`, kind "stack"). autopard sends the
signal only to processes that catch it, so a program without it is not harmed.

It happens by default: importing ``autopar`` inside a Slurm job (SLURM_JOB_ID set) calls
``install_by_default()``, which installs it unless AUTOPAR_STACKS is 0/false/no/off (the opt-out,
e.g. for a program that uses SIGUSR2 itself). Outside a job nothing is installed.

Only the standard library is used; calling install() again does nothing.
"""
from __future__ import annotations

import faulthandler
import os
import signal
import stat as _stat
import sys
from typing import Optional, TextIO

__all__ = ["install", "install_by_default", "dump_path"]

_file: Optional[TextIO] = None
_DEFAULT_ROOT = "/tmp/autopar-stacks"


def dump_path() -> str:
    """Where this rank's dump goes (the same rule as autopard's PythonStackDumpPath)."""
    job = os.environ.get("SLURM_JOB_ID", "nojob")
    d = os.environ.get("AUTOPAR_STACK_DIR") or os.path.join(_DEFAULT_ROOT, job)
    rank = os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0"))
    return os.path.join(d, f"stack-rank{rank}.txt")


def install() -> str:
    """Registers the SIGUSR2 stack dump; returns the dump file's path."""
    global _file
    path = dump_path()
    if _file is None:
        if not os.environ.get("AUTOPAR_STACK_DIR"):
            # The shared parent is like /tmp: every user's jobs make their directory in it.
            try:
                os.mkdir(_DEFAULT_ROOT)
                os.chmod(_DEFAULT_ROOT, 0o1777)
            except FileExistsError:
                pass
        d = os.path.dirname(path)
        os.makedirs(d, mode=0o700, exist_ok=True)
        # /tmp/autopar-stacks is shared by every user: the job's directory must be this user's
        # own, not a symlink, and the dump is never opened through a symlink (another user could
        # have made either first, to read the dumps or to have them written elsewhere).
        st = os.lstat(d)
        if not _stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            raise PermissionError(f"{d}: not a directory of uid {os.getuid()} (made by another user?)")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        _file = os.fdopen(fd, "a", buffering=1)
        faulthandler.register(signal.SIGUSR2, file=_file, all_threads=True, chain=False)
    return path


def install_by_default() -> Optional[str]:
    """install() inside a Slurm job unless AUTOPAR_STACKS opts out; returns the dump file's path
    or None. A failure (e.g. an unwritable directory) is reported once on stderr, not raised: the
    training runs on without stack dumps."""
    if not os.environ.get("SLURM_JOB_ID"):
        return None
    if os.environ.get("AUTOPAR_STACKS", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    try:
        return install()
    except OSError as e:
        sys.stderr.write(f"autopar: stack dumps for hang reports are off: {e}\n")
        return None
