"""A Python function run as a Slurm job (autopar.jobs.submit(fn, ...)): the call is pickled into a
folder both sides see, the job runs it under autopar-launch (`python3 -m autopar run-function
DIR`), and the outcome comes back through the same folder.

    DIR/call.pkl          (fn, args, kwargs, ranks), written by the submitter with cloudpickle
    DIR/result.pkl        rank 0's outcome: ("ok", value) or ("error", exception, traceback text)
    DIR/result-rank<R>.pkl  every other rank's, when every rank runs the function (ranks="all")
    DIR/<i>/...           the same for task i of a job array (Executor.map_array)

A run that finishes writes its outcome whole (a temporary file renamed over the last one), so a job
requeued or restarted in place leaves the outcome of the run that finished. cloudpickle (Debian's
python3-cloudpickle) is needed on both sides; the rest of autopar stays standard-library only.

Unpickling runs code, so nothing is unpickled from a folder another user could write
(docs/security.md): the folder and every directory above it are checked as autopar.private_dir
checks a checkpoint directory (no symlink, root's or the caller's, not writable by others unless
sticky; the folder itself the caller's and not writable by others; made 0700), and a pickle is read
only from a regular file of the caller's that others cannot write, opened without following a
symlink. Temporary files are created exclusively (O_EXCL, 0600), never opened where they stand.
"""
from __future__ import annotations

import os
import stat
import sys
import traceback
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Tuple

from . import private_dir

RANKS = ("0", "all")


def _cloudpickle() -> Any:
    try:
        import cloudpickle
    except ImportError:
        raise ImportError("autopar.jobs.submit(fn): a function job needs cloudpickle "
                          "(Debian: apt install python3-cloudpickle; pip: pip install cloudpickle)") from None
    return cloudpickle


def write_call(folder: str, fn: Callable[..., Any], args: Iterable[Any], kwargs: Mapping[str, Any],
               ranks: str) -> None:
    """Pickles the call into `folder` (made, 0700: what it holds is the caller's)."""
    if ranks not in RANKS:
        raise ValueError(f"ranks: '{ranks}' is not one of {', '.join(RANKS)}")
    cloudpickle = _cloudpickle()
    _own_folder(folder)
    try:
        data = cloudpickle.dumps((fn, tuple(args), dict(kwargs), ranks))
    except Exception as e:  # what cannot be pickled cannot travel to the job
        raise TypeError(f"submit: the call cannot be pickled: {e}") from None
    _write_whole(os.path.join(folder, "call.pkl"), data)


def result_path(folder: str, rank: int = 0) -> str:
    return os.path.join(folder, "result.pkl" if rank == 0 else f"result-rank{rank}.pkl")


def read_outcome(folder: str, rank: int = 0) -> Optional[Tuple[Any, ...]]:
    """The outcome a finished run left, ("ok", value) or ("error", exception, traceback text), or
    None when no run finished."""
    _own_folder(folder)
    try:
        data = _read_own(result_path(folder, rank))
    except FileNotFoundError:
        return None
    return _cloudpickle().loads(data)


def run(folder: str) -> int:
    """The job's side: runs the call on this task when its rank should; returns the exit status.
    In a job array (Executor.map_array) the folder holds one call per task, DIR/TASK."""
    task = os.environ.get("SLURM_ARRAY_TASK_ID")
    if task is not None and not os.path.exists(os.path.join(folder, "call.pkl")):
        folder = os.path.join(folder, task)
    _own_folder(folder)
    fn, args, kwargs, ranks = _cloudpickle().loads(_read_own(os.path.join(folder, "call.pkl")))
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
    if ranks == "0" and rank != 0:
        return 0
    try:
        outcome: Tuple[Any, ...] = ("ok", fn(*args, **kwargs))
        status = 0
    except BaseException as e:  # noqa: B036 - the caller decides what a SystemExit means
        text = traceback.format_exc()
        sys.stderr.write(text)
        outcome = ("error", _picklable(e, text), text)
        status = 1
    try:
        data = _cloudpickle().dumps(outcome)
    except Exception as e:  # a value that cannot travel back is the call's failure
        text = f"the function's return value cannot be pickled: {e}"
        data = _cloudpickle().dumps(("error", TypeError(text), text))
        status = 1
    _write_whole(result_path(folder, rank), data)
    return status


def _picklable(exc: BaseException, text: str) -> BaseException:
    """`exc` itself when it pickles (its class must exist on the caller's side too), else a
    RuntimeError holding its text."""
    try:
        _cloudpickle().loads(_cloudpickle().dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc} (not picklable; the traceback follows)\n{text}")


def _own_folder(folder: str) -> None:
    """Checks (and makes, 0700) `folder` as the module's docstring says; PermissionError naming it."""
    try:
        private_dir.make_private_dir(os.path.abspath(folder), what="folder")
    except private_dir.PrivateDirError as e:
        raise PermissionError(str(e)) from None


def _read_own(path: str) -> bytes:
    """The bytes of `path`, a regular file of this user's that others cannot write, opened without
    following a symlink (FileNotFoundError when there is none)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise PermissionError(f"{path}: {e.strerror} (a pickle is read only from a file of "
                              "your own, never through a symlink)") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise PermissionError(f"{path}: not a file of uid {os.geteuid()}'s that only it can "
                                  f"write (uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}): "
                                  "not unpickled")
        return f.read()


def _write_whole(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        os.unlink(tmp)  # a leftover of a run that died with this pid: never written through
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
