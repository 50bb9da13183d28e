#!/usr/bin/env python3
"""A restarted Python program's start, from the moment autopar-launch asks for it to its first
optimizer built (where a torch 2.x program has imported what its training needs): cold (a new
`python train.py`), and activated in a warm interpreter prepared by autopar's bootstrap
(python/autopar/_warm.py, as launcher/prewarm.h runs it), and, with --bootstrap FILE, by another
version of that bootstrap (e.g. `git show COMMIT:python/autopar/_warm.py > FILE`). The kinds take
turns, ROUNDS times; prints each one's median seconds and wall-clock ratios to cold.

    bench/launch/warm_start.py [--rounds 7] [--bootstrap FILE] [--python PYTHON]
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROGRAM = """import torch
import torch.nn as nn
model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
print("READY", flush=True)
"""


def cold(python: str, program: Path) -> float:
    t = time.perf_counter()
    out = subprocess.run([python, str(program)], capture_output=True, text=True, check=True).stdout
    assert "READY" in out, out
    return time.perf_counter() - t


def warm(python: str, program: Path, bootstrap: str) -> float:
    ours, theirs = socket.socketpair()
    p = subprocess.Popen([python, "-c", bootstrap, str(theirs.fileno()), "script", str(program)],
                         pass_fds=[theirs.fileno()], stdout=subprocess.PIPE, text=True)
    theirs.close()
    assert ours.recv(1) == b"R"
    time.sleep(0.5)  # prepared well before it is needed, as in a job
    t = time.perf_counter()
    ours.sendall(b"".join(f"{k}={v}".encode() + b"\0" for k, v in os.environ.items()))
    ours.close()
    line = p.stdout.readline()
    took = time.perf_counter() - t
    assert line.startswith("READY"), line
    p.wait()
    return took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--bootstrap", help="another version of python/autopar/_warm.py")
    ap.add_argument("--python", default=os.environ.get("AUTOPAR_PYTHON", sys.executable))
    args = ap.parse_args()
    kinds = {"cold": None, "warm": (REPO / "python" / "autopar" / "_warm.py").read_text()}
    if args.bootstrap:
        kinds["warm (--bootstrap)"] = Path(args.bootstrap).read_text()
    times = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as d:
        program = Path(d) / "train.py"
        program.write_text(PROGRAM)
        for _ in range(args.rounds):
            for kind, bootstrap in kinds.items():
                times[kind].append(cold(args.python, program) if bootstrap is None
                                   else warm(args.python, program, bootstrap))
    base = statistics.median(times["cold"])
    print(f"{'start':<20} {'median s':>9} {'x cold':>7}   ({args.rounds} rounds, {args.python})")
    for kind, ts in times.items():
        m = statistics.median(ts)
        print(f"{kind:<20} {m:9.3f} {m / base:7.3f}")


if __name__ == "__main__":
    main()
