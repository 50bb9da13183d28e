#!/usr/bin/env python3
"""Python jobs on the local cluster, side by side in one run: submitit (1.5.4) against
autopar.jobs, submit-to-result latency of one function job and of a 16-task array (Slurm job
arrays both), the two alternating, REPS times each.

    bench/jobs/submitit_bench.py [--reps 3] [--record]

Needs the test cluster (SLURM_CONF; `source /tmp/autopar-cluster/env.sh` after
tests/cluster/start.sh) and autopard on its nodes; AUTOPAR_BUILD_DIR (default <repo>/build) for
autopar-launch. Both write their folders under a fresh directory in /tmp (the nodes share this
machine's filesystem).
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
BUILD = Path(os.environ.get("AUTOPAR_BUILD_DIR", REPO / "build"))
sys.path.insert(0, str(REPO / "bench"))
import results  # noqa: E402


def add(a: int, b: int) -> int:
    return a + b


def submitit_one(folder: Path) -> float:
    import submitit
    ex = submitit.AutoExecutor(folder=str(folder), cluster="slurm")
    ex.update_parameters(timeout_min=5, nodes=1, tasks_per_node=1)
    t = time.perf_counter()
    assert ex.submit(add, 2, 3).result() == 5
    return time.perf_counter() - t


def submitit_array(folder: Path, n: int) -> float:
    import submitit
    ex = submitit.AutoExecutor(folder=str(folder), cluster="slurm")
    ex.update_parameters(timeout_min=5, nodes=1, tasks_per_node=1)
    t = time.perf_counter()
    jobs = ex.map_array(add, list(range(n)), list(range(n)))
    assert [j.result() for j in jobs] == [2 * i for i in range(n)]
    return time.perf_counter() - t


def autopar_one(folder: Path) -> float:
    from autopar import jobs
    t = time.perf_counter()
    assert jobs.submit(add, 2, 3, folder=str(folder), nodes=1).result() == 5
    return time.perf_counter() - t


def autopar_array(folder: Path, n: int) -> float:
    from autopar import jobs
    ex = jobs.Executor(str(folder))
    ex.update_parameters(nodes=1)
    t = time.perf_counter()
    futures = ex.map_array(add, list(range(n)), list(range(n)))
    assert [f.result() for f in futures] == [2 * i for i in range(n)]
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit("submitit_bench: SLURM_CONF is not set: source the test cluster's env.sh")
    os.environ.setdefault("AUTOPAR_LAUNCH", str(BUILD / "launcher" / "autopar-launch"))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent), str(REPO / "python")])
    work = Path(tempfile.mkdtemp(prefix="autopar-submitit-bench."))
    os.chmod(work, 0o755)
    cases = {"one function job": (submitit_one, autopar_one, ()),
             f"{args.tasks}-task array": (submitit_array, autopar_array, (args.tasks,))}
    rows = []
    try:
        for name, (theirs, ours, extra) in cases.items():
            s, a = [], []
            for rep in range(args.reps):
                s.append(theirs(work / f"submitit-{name[:3]}-{rep}", *extra))
                a.append(ours(work / f"autopar-{name[:3]}-{rep}", *extra))
            rows.append((name, statistics.median(s), statistics.median(a), s, a))
            print(f"submitit_bench: {name}: submitit median {rows[-1][1]:.2f} s {['%.2f' % x for x in s]}, "
                  f"autopar.jobs median {rows[-1][2]:.2f} s {['%.2f' % x for x in a]}, "
                  f"ratio {rows[-1][2] / rows[-1][1]:.2f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.record:
        results.record(
            "Python jobs: submitit against autopar.jobs", "bench/jobs/submitit_bench.py",
            f"Submit-to-result latency on the local cluster (sched_interval=1), {args.reps} runs each, "
            "alternating; submitit 1.5.4 (AutoExecutor, cluster=\"slurm\"), autopar.jobs (the function "
            "under autopar-launch); the same function, Python and cluster.",
            ["case", "submitit (median)", "autopar.jobs (median)", "autopar / submitit", "runs (s)"],
            [[name, f"{s_med:.2f} s", f"{a_med:.2f} s", f"{a_med / s_med:.2f}",
              f"submitit {', '.join('%.2f' % x for x in s)}; autopar {', '.join('%.2f' % x for x in a)}"]
             for name, s_med, a_med, s, a in rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())
