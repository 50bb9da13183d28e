"""The user's program of tests/security/test_restart_channel.py, one per rank under autopar-launch
(--restarts-in-place): heartbeats its node's autopard every 0.2 s and prints

    beat rank R gen G step S time T

Generation 0 (the first) runs FIRST steps (it is meant to be killed before), a restarted one
AFTER steps and ends.

    beat.py FIRST AFTER
"""
import os
import sys
import time

os.environ["AUTOPAR_STACKS"] = "0"  # no stack dump directory left in /tmp/autopar-stacks
from autopar import ckpt  # noqa: E402

rank = int(os.environ["RANK"])
gen = int(os.environ.get("AUTOPAR_RESTART_GENERATION", "0"))
steps = int(sys.argv[1] if gen == 0 else sys.argv[2])
for step in range(steps):
    ckpt.heartbeat(step)
    print(f"beat rank {rank} gen {gen} step {step} time {time.time():.3f}", flush=True)
    time.sleep(0.2)
