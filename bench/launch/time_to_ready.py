#!/usr/bin/env python3
"""Time from srun's start until every rank's program runs with its environment ready (and, with
--pg, until every rank holds an initialized torch.distributed process group): autopar-launch vs
torchrun with its c10d rendezvous (one torchrun agent per node under srun), same nodes and ranks.

Usage: time_to_ready.py --launch PATH [--nodes 4] [--per-node 2] [--runs 5] [--pg] [--json OUT]
Needs SLURM_CONF (the local test cluster). Prints one line per launcher: median and all runs.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable


def one_run(cmd, out_dir, ranks):
    start = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    times = [Path(out_dir, f"rank-{r}").read_text().split() for r in range(ranks)]
    ready = max(float(t[1]) for t in times) - start
    pg = max(float(t[2]) for t in times) - start
    return ready, pg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launch", required=True)
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--per-node", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pg", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    ranks = a.nodes * a.per_node
    extra = ["--pg"] if a.pg else []
    results = {"autopar-launch": [], "torchrun-c10d": []}
    for i in range(a.runs):
        for name in results:  # alternate, so drifting machine load hits both alike
            with tempfile.TemporaryDirectory(dir="/tmp") as out:
                if name == "autopar-launch":
                    cmd = ["srun", f"-N{a.nodes}", f"--ntasks-per-node={a.per_node}", "--mpi=pmix",
                           a.launch, "--", PYTHON, str(HERE / "ready.py"), out, *extra]
                else:
                    port = random.randint(30000, 39999)
                    cmd = ["srun", f"-N{a.nodes}", "--ntasks-per-node=1", "--mpi=none",
                           PYTHON, "-m", "torch.distributed.run", f"--nnodes={a.nodes}",
                           f"--nproc_per_node={a.per_node}", "--rdzv_backend=c10d",
                           f"--rdzv_endpoint=node1:{port}", f"--rdzv_id=bench{os.getpid()}-{i}",
                           str(HERE / "ready.py"), out, *extra]
                results[name].append(one_run(cmd, out, ranks))
    summary = {}
    for name, runs in results.items():
        ready = [r[0] for r in runs]
        pg = [r[1] for r in runs]
        summary[name] = {"ready_median_s": statistics.median(ready), "ready_s": ready}
        if a.pg:
            summary[name].update(pg_median_s=statistics.median(pg), pg_s=pg)
        line = f"{name:15s} ready median {statistics.median(ready):6.3f} s  runs " + \
               " ".join(f"{x:.3f}" for x in ready)
        if a.pg:
            line += f" | process group median {statistics.median(pg):6.3f} s"
        print(line)
    r = summary["torchrun-c10d"]["ready_median_s"] / summary["autopar-launch"]["ready_median_s"]
    print(f"autopar-launch is {r:.1f}x faster to ready")
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
