"""Python stack dumps for autopard's hang reports (issue 6; include/autopar/stack_capture.h).

``install()`` registers ``faulthandler`` on SIGUSR2: when autopard finds the job hung, it sends
SIGUSR2 to each rank that catches it, and the rank writes the stacks of all its threads to
``<AUTOPAR_STACK_DIR or /tmp/autopar-stacks/<job>>/stack-rank<R>.txt`` (appending), which
autopard reads into the job's timeline (`autopar events JOBID`, kind "stack"). autopard sends the
signal only to processes that catch it, so a program that never calls install() is not harmed.

Only the standard library is used; calling install() again does nothing.
"""
import faulthandler
import os
import signal

__all__ = ["install", "dump_path"]

_file = None


def dump_path():
    """Where this rank's dump goes (the same rule as autopard's PythonStackDumpPath)."""
    job = os.environ.get("SLURM_JOB_ID", "nojob")
    d = os.environ.get("AUTOPAR_STACK_DIR") or os.path.join("/tmp/autopar-stacks", job)
    rank = os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0"))
    return os.path.join(d, f"stack-rank{rank}.txt")


def install():
    """Registers the SIGUSR2 stack dump; returns the dump file's path."""
    global _file
    path = dump_path()
    if _file is None:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        _file = open(path, "a", buffering=1)
        faulthandler.register(signal.SIGUSR2, file=_file, all_threads=True, chain=False)
    return path
