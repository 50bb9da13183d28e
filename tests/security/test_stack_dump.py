"""Attack: autopard (root) reads a hung rank's Python stack dump from the path the user chose.

The second account (autopar-test2) runs a Python training program (programs/hang_swap.py) that
imports autopar (faulthandler on SIGUSR2, autopar.stacks), heartbeats a few steps through
autopar.ckpt.heartbeat and then hangs; its job has --heartbeat-timeout=2 and AUTOPAR_STACK_DIR
set to a directory of the user's. autopard declares the hang and captures the rank's stacks
(core/failure/stack_capture.cpp): it sends SIGUSR2 and reads AUTOPAR_STACK_DIR/stack-rank0.txt.
The program's own SIGUSR2 handler then replaces that file with
(a) a symlink to a root-only secret, (b) a FIFO, (c) a symlink to /dev/zero, (d) an 8 GiB sparse
file.

What must hold:
- `autopar events JOB` as the user shows nothing of the secret;
- no event the user sees carries the rank's kernel stack (`kernel_stack=`: kernel addresses and
  symbols, which only root and SlurmUser may read);
- while the capture of (b), (c), (d) is under way autopard answers another user's (root's) status
  request within 3 s; for (b) and (c) it also still detects another job's hang on the node (root's
  job, which heartbeats and stops: its `heartbeat_missed` must come within 15 s), i.e. one user's
  file does not stall every job's failure handling; afterwards autopard is the same process,
  alive, and its peak RSS grew by less than 256 MiB (it did not read what the file holds).

After the fix autopard reads the dump with the rank's owner's rights, a regular file only, without
blocking, at most a bounded size; and the kernel stack goes to a root-only event.

About 1 minute when autopard holds.
"""
import os
import time
from pathlib import Path

import pytest

from conftest import (PROGRAMS, PYTHON, SOURCE_DIR, USER, cancel, need_binaries, root_events,
                      root_sbatch, user_events, user_sbatch, wait_running)

NODE = "node1"
PROGRAM = PROGRAMS / "hang_swap.py"
SPARSE_BYTES = 8 << 30


def wait_file(path: Path, timeout: float, what: str, log: Path):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.exists():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} within {timeout}s; the job's output:\n"
                         f"{log.read_text()[-3000:] if log.exists() else '(none)'}")


def wait_events(job, kind, timeout, reader):
    deadline = time.time() + timeout
    while True:
        evs = reader(job)
        found = [e for e in evs if e["kind"] == kind]
        if found or time.time() > deadline:
            return evs, found
        time.sleep(0.5)


def bystander_hang_detected(node: str) -> str:
    """Root's job on `node` heartbeats and stops; returns None when its hang was detected within
    15 s (it takes about 5 s: a 2 s timeout, 1 s ticks), else what went wrong."""
    program = ("from autopar import ckpt; import time\n"
               "for i in range(4): ckpt.heartbeat(i); time.sleep(0.2)\n"
               "ckpt.flush_heartbeats(); time.sleep(300)\n")
    b = root_sbatch("-w", node, "-n1", "--heartbeat-timeout=2", "-t", "3", "-o", "/dev/null",
                    f"--export=ALL,PYTHONPATH={SOURCE_DIR}/python", "--wrap",
                    f"srun env AUTOPAR_STACKS=0 {PYTHON} -c '{program}'")
    try:
        wait_running(b)
        _, missed = wait_events(b, "heartbeat_missed", 15, lambda j: root_events(j, node))
        return None if missed else f"the hang of root's job {b} on {node} was not detected in 15 s"
    finally:
        cancel(b)


def unblock_fifo(path: Path):
    """A reader blocked in open() of the FIFO at `path` gets EOF, and the path becomes a plain
    empty file (so that a reader polling it does not block again)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        fd = None  # no reader waits (ENXIO), or no FIFO there
    try:
        tmp = path.with_suffix(".unblock")
        tmp.write_text("")
        os.replace(tmp, path)
    except OSError:
        pass
    if fd is not None:
        os.close(fd)


MODES = ["symlink-secret", "fifo", "symlink-devzero", "sparse"]


@pytest.mark.parametrize("mode", MODES)
def test_swapped_stack_dump(mode, secret, user_dir, autopard_guard):
    need_binaries()
    guard = autopard_guard(NODE)
    stacks = user_dir / "stacks"
    marker = user_dir / "swapped"
    out = user_dir / "out.txt"
    target = str(secret.path) if mode == "symlink-secret" else str(SPARSE_BYTES)
    # The plugin drops AUTOPAR_* variables it did not set from the tasks' environment: the task
    # sets its own (the variable autopard reads from the rank's /proc/PID/environ).
    job = user_sbatch("-w", NODE, "-n1", "--heartbeat-timeout=2", "-t", "3", "-o", str(out),
                      f"--chdir={user_dir}", "--wrap",
                      f"srun env AUTOPAR_STACK_DIR={stacks} {PYTHON} {PROGRAM} {mode} {target} "
                      f"{marker}")
    dump = stacks / "stack-rank0.txt"
    try:
        wait_file(marker, 40, "autopard did not ask the hung rank for its stacks (SIGUSR2)", out)
        problems = []
        if mode != "symlink-secret":
            # The capture reads the swapped file now: autopard must still serve everyone else.
            for _ in range(2):
                guard.assert_serving(within=3.0)
                time.sleep(1.0)
        if mode in ("fifo", "symlink-devzero"):
            why = bystander_hang_detected(NODE)
            if why:
                problems.append(why + f" while autopard read {USER}'s {mode} dump")
        wait_events(job, "stack", 10, lambda j: user_events(j, NODE)[0])
        evs, text = user_events(job, NODE)
        guard.assert_alive()
        guard.assert_no_big_allocation()
        shown = secret.leaks(text)
        assert not shown, (f"`autopar events {job}` as {USER} shows the root-only secret "
                           f"({shown}): "
                           f"{[e['detail'][:300] for e in evs if e['kind'] == 'stack']}")
        kernel = [e for e in evs if "kernel_stack=" in e.get("detail", "")]
        assert not kernel, (f"{USER} sees the kernel stack of their rank (root's to read): "
                            f"{[(e['kind'], e['detail'][:300]) for e in kernel]}")
        assert not problems, problems
        guard.assert_serving(within=3.0)
    finally:
        if mode == "fifo":
            unblock_fifo(dump)
        cancel(job)
