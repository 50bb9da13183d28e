"""The user's side of tests/security/test_stack_dump.py: a training program that heartbeats a few
steps and then hangs; when autopard's stack capture sends it SIGUSR2 it does not dump its stacks
but replaces its dump file (autopar.stacks.dump_path(), under AUTOPAR_STACK_DIR) with:

    symlink-secret   a symlink to argv[2] (the root-only secret)
    fifo             a FIFO (a reader that opens it waits for a writer that never comes)
    symlink-devzero  a symlink to /dev/zero (endless)
    sparse           a sparse file of argv[2] bytes

and then writes the time to argv[3] (the sign that the capture is under way).

    hang_swap.py MODE TARGET MARKER
"""
import os
import signal
import sys
import time

import autopar  # noqa: F401  (installs faulthandler on SIGUSR2: autopar.stacks)
from autopar import ckpt, stacks

mode, target, marker = sys.argv[1:4]
path = stacks.dump_path()


def swap(signum, frame):
    if os.path.exists(marker):
        return  # one swap per run
    tmp = path + ".new"
    if mode == "symlink-secret":
        os.symlink(target, tmp)
    elif mode == "fifo":
        os.mkfifo(tmp, 0o644)
    elif mode == "symlink-devzero":
        os.symlink("/dev/zero", tmp)
    elif mode == "sparse":
        with open(tmp, "wb") as f:
            f.truncate(int(target))
    else:
        raise SystemExit(f"unknown mode {mode}")
    os.replace(tmp, path)
    with open(marker, "w") as f:
        f.write(f"{time.time()}\n")


print(f"JOB {os.environ['SLURM_JOB_ID']} dump {path}", flush=True)
for step in range(6):
    ckpt.heartbeat(step)
    time.sleep(0.2)
ckpt.flush_heartbeats()
# Installed last: until here faulthandler's handler was the one autopard saw (SigCgt) all along.
signal.signal(signal.SIGUSR2, swap)
print("HUNG", flush=True)
while True:
    time.sleep(0.1)
