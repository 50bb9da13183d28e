#!/usr/bin/env python3
"""A day of a small site replayed time-compressed on the local test cluster (4 nodes): the
site's high-priority jobs (`debug`) arrive at random, each wanting 1-4 whole nodes for a while,
and the nodes they leave idle stay idle. Then the same day again with a preemptible autopar
training job on every node (`scavenger`, tests/cluster/start.sh: GraceTime=20, requeued at the
notice with the step checkpointed; bench/preemption/toy_train.py --on-notice): it trains whenever
its node is free and gives it back at once when a high-priority job wants it.

Reported for each replay, over the same window of WINDOW seconds: the share of node-hours the
high-priority jobs held, the share that trained the preemptible jobs (their steps kept, from
`autopar goodput`: steps redone, recovery and the rest are not counted), and what the
high-priority jobs paid for it (their mean wait from submission to start, `sacct --completion`).

The day: ARRIVALS jobs per day (Poisson), each 1-4 nodes (uniform), lasting an exponential time
of mean MEAN_H hours (at most 6), replayed so that 24 h take MINUTES minutes.

Usage: bench/preemption/site_day.py [--minutes 10] [--arrivals 30] [--mean-h 2] [--seed 1]
                                    [--json FILE]
Needs SLURM_CONF of the running test cluster (autopard on every node) and AUTOPAR_BUILD_DIR.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from preemption_bench import CLI, NODES, autopar_job, sh  # noqa: E402


def day(args):
    """[(offset_s, nodes, duration_s)] of the high-priority jobs, in replayed seconds."""
    rng = random.Random(args.seed)
    scale = args.minutes * 60 / 86400.0
    out, t = [], 0.0
    while True:
        t += rng.expovariate(args.arrivals / 86400.0)
        if t >= 86400:
            return out
        hours = min(6.0, rng.expovariate(1 / args.mean_h))
        out.append((t * scale, rng.randint(1, len(NODES)), max(5.0, hours * 3600 * scale)))


def sacct_runs(ids):
    out = subprocess.run(["sacct", "--completion", "--duplicates", "--parsable2", "--noheader",
                          "--format=JobIDRaw,Start,End,NNodes,Partition", "-j", ",".join(ids)],
                         capture_output=True, text=True, env={**os.environ, "SLURM_TIME_FORMAT": "%s"},
                         check=True).stdout
    rows = []
    for line in out.splitlines():
        f = line.split("|")
        if len(f) == 5 and f[1].isdigit() and f[2].isdigit():
            rows.append((f[0], int(f[1]), int(f[2]), int(f[3]), f[4]))
    return rows


def replay(args, root: Path, with_training: bool):
    work = root / ("with" if with_training else "without")
    work.mkdir(parents=True)
    work.chmod(0o1777)
    training = []
    if with_training:
        toy = argparse.Namespace(steps=10 ** 6, step_s=0.5, every=120)
        for node in NODES:
            training.append(autopar_job(work / f"train-{node}", node, toy, True, "scavenger"))
        time.sleep(20)  # started, and past Python's start-up
    t0 = time.time()
    submitted = {}
    for n, (offset, nodes, duration) in enumerate(day(args)):
        time.sleep(max(0.0, t0 + offset - time.time()))
        d = work / f"hp-{n}"
        d.mkdir()
        job = sh("sbatch", "--parsable", "-p", "debug", f"-N{nodes}", "--exclusive", f"-o{d}/out.txt",
                 "--wrap", f"sleep {duration:.0f}").strip()
        submitted[job] = time.time()
    t1 = t0 + args.minutes * 60
    time.sleep(max(0.0, t1 - time.time()))
    for job in training:
        sh("scancel", job, check=False)
    for job in submitted:
        sh("scancel", job, check=False)
    time.sleep(12)
    window = t1 - t0
    hp = sum(max(0, min(e, t1) - max(s, t0)) * nn
             for _, s, e, nn, _ in sacct_runs(list(submitted)))
    first = {}
    for j, s, _, _, _ in sacct_runs(list(submitted)):
        first[j] = min(first.get(j, s), s)
    waits = [first[j] - submitted[j] for j in first]
    trained = 0.0
    if training:
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t0))
        end = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t1))
        sock = Path(os.environ["SLURM_CONF"]).parent.parent / "run" / "autopard-node1.sock"
        g = json.loads(sh(CLI, "goodput", "--start", start, "--end", end, "--partition",
                          "scavenger", "--by", "partition", "--json", "--socket", sock))
        mine = [j for j in g["jobs"] if j["job_id"] in training]
        trained = sum(j["uses"]["steps_kept"] for j in mine)  # one rank per node: node-seconds
    total = window * len(NODES)
    return {"window_s": round(window, 1), "high_priority_jobs": len(submitted),
            "high_priority_share": round(hp / total, 3), "trained_share": round(trained / total, 3),
            "busy_share": round((hp + trained) / total, 3),
            "high_priority_mean_wait_s": round(sum(waits) / max(1, len(waits)), 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--arrivals", type=float, default=30)
    ap.add_argument("--mean-h", type=float, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="site-day-", dir="/tmp"))
    root.chmod(0o1777)
    print(f"site day: {len(day(args))} high-priority jobs in {args.minutes} min; files in {root}",
          flush=True)
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "args": vars(args),
              "without": replay(args, root, False), "with": replay(args, root, True)}
    for k in ("without", "with"):
        r = result[k]
        print(f"{k:8s} high-priority {r['high_priority_share']:.3f}  trained {r['trained_share']:.3f}"
              f"  busy {r['busy_share']:.3f}  high-priority wait {r['high_priority_mean_wait_s']:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
