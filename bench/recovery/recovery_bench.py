#!/usr/bin/env python3
"""Recovery in place vs the requeue path, side by side in one run on the local test
cluster: a 4-node x 2-rank PyTorch DDP training (tests/integration/requeue_train.py, gloo, a
checkpoint every 5 steps) under autopar-launch, one fault per job, timed from the fault to the
first training step after the recovery (rank 0's "train: ... run N" line of the next run).

  crash   kill -9 of rank 5 at step 30
  hang    SIGSTOP of rank 5 at step 30, --heartbeat-timeout=10 (the timeout is subtracted)
  node    the node of ranks 2-3 killed as a whole at step 30 (tests/cluster/kill-node.sh): in place
          on 3 nodes in use plus --spare-nodes=1 (4 nodes), against the requeue path on 3 nodes
          (requeued without the dead node onto the fourth, free one)
  shrink  the same node loss with no spare: in place, the 4-node run goes on with 3
          (--min-nodes=2; re-planned, every saved rank's files restored on each node), against
          the same requeue path on 3 nodes as `node`

each with in-place restarts (the default with --requeue-on-failure) and with --restarts-in-place=0
(today's requeue path), on an idle queue and on a full one: before the fault the second test
account submits jobs that want as many nodes as the program runs on (4; 3 for the node case),
pending behind ours.

Each row also gives the program's own start-up in that job: from rank 0's launcher having its
rendezvous (just before the program starts) to the first training step of the first run (import
torch, init_process_group, one step), the floor under any restart of the program.

With --cold, crash and hang also run in place with a fresh interpreter for the restarted program
(autopar-launch --no-prewarm): what the warm interpreter (launcher/prewarm.h) saves.

Usage: bench/recovery/recovery_bench.py [--only crash|hang|node|shrink] [--no-full] [--cold]
Needs SLURM_CONF of the running test cluster (autopard on every node) and AUTOPAR_BUILD_DIR.
Prints one row per case and the ratios; bench/RESULTS.md records a run.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from conftest import cluster_script, wait_for  # noqa: E402
from test_requeue_faults import node_of_rank, rank_pid  # noqa: E402
BUILD = Path(os.environ.get("AUTOPAR_BUILD_DIR", REPO / "build"))
TRAIN = REPO / "tests" / "integration" / "requeue_train.py"
LAUNCH = BUILD / "launcher" / "autopar-launch"
PYTHON = sys.executable
OTHER_USER = "autopar-test2"
# Late enough that the next generation's interpreter is ready (autopar-launch prepares it 5 s after
# the program starts, then 8 ranks import torch at once on the 2 cores).
FAULT_STEP = 30


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, check=True, **kw).stdout


def submit(work: Path, opts: str, nodes: int = 4, launch_opts: str = "") -> str:
    script = f"""#!/bin/bash
#SBATCH -N{nodes} --ntasks-per-node=2 --open-mode=append -o {work}/out.txt -e {work}/out.txt
#SBATCH --ckpt-upload=file://{work}/store --ckpt-dir={work}/local/%n
#SBATCH {opts}
export PYTHONPATH={REPO}/python
srun --mpi=pmix {LAUNCH} {launch_opts} -- {PYTHON} {TRAIN} --steps 50 --every 5 --step-sleep 0.2 --out {work}/final.pt
"""
    (work / "job.sh").write_text(script)
    return sh(["sbatch", "--parsable", str(work / "job.sh")]).strip().split(";")[0]


def steps(work: Path):
    p = work / "out.txt"
    text = p.read_text() if p.exists() else ""
    return [(int(m.group(4)), int(m.group(2)), float(m.group(3))) for m in
            re.finditer(r"train: rank (\d+) step (\d+) time ([\d.]+) run (\d+)", text)
            if m.group(1) == "0"]


def startup(job: str, work: Path) -> float:
    """Seconds from the first rendezvous of the job to its first step (rank 0)."""
    sock = Path(os.environ["SLURM_CONF"]).parent.parent / "run" / "autopard-node1.sock"
    evs = json.loads(sh([str(BUILD / "cli" / "autopar"), "events", job, "--json", "--socket",
                         str(sock)]))["events"]
    t0 = min(e["time"] for e in evs if e["kind"] == "rendezvous")
    return min(t for r, _, t in steps(work) if r == 0) - t0


def state(job: str) -> str:
    m = re.search(r"JobState=(\S+)", sh(["scontrol", "show", "job", job]))
    return m.group(1) if m else "?"


def fill_queue(nodes: int, n=3):
    """Jobs of another user that want `nodes` nodes each, pending behind ours."""
    env = dict(os.environ)
    ids = []
    for _ in range(n):
        out = subprocess.run(["runuser", "-u", OTHER_USER, "--", "env", f"SLURM_CONF={env['SLURM_CONF']}",
                              "sbatch", "--parsable", f"-N{nodes}", "--exclusive", "-o", "/dev/null",
                              "--wrap", "sleep 20"],
                             capture_output=True, text=True, check=True).stdout
        ids.append(out.strip())
    return ids


def interpreters(job: str) -> str:
    """How the restarted programs started (the restored events' interpreter=): "warm 8", ..."""
    sock = Path(os.environ["SLURM_CONF"]).parent.parent / "run" / "autopard-node1.sock"
    evs = json.loads(sh([str(BUILD / "cli" / "autopar"), "events", job, "--json", "--socket",
                         str(sock)]))["events"]
    seen = [e["fields"].get("interpreter", "?") for e in evs if e["kind"] == "restored"]
    return ", ".join(f"{k} {seen.count(k)}" for k in sorted(set(seen))) or "-"


def one(kind: str, in_place: bool, full: bool, cold: bool = False) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"autopar-recovery-{kind}-", dir="/tmp"))
    work.chmod(0o1777)
    timeout = 10
    opts = f"--requeue-on-failure=3 --heartbeat-timeout={timeout if kind == 'hang' else 60}"
    if not in_place:
        opts += " --restarts-in-place=0"
    nodes = 4
    if kind == "node":
        opts += " --spare-nodes=1" if in_place else ""
        nodes = 4 if in_place else 3
    if kind == "shrink":
        opts += " --min-nodes=2" if in_place else ""
        nodes = 4 if in_place else 3
    job = submit(work, opts, nodes, "--no-prewarm" if cold else "")
    fillers = []
    killed = None
    try:
        wait_for(lambda: any(s >= FAULT_STEP for _, s, _ in steps(work)), 240, "the fault step")
        if full:
            # As many nodes as the program runs on: with a node lost, the requeued job competes
            # with them for the nodes left.
            fillers = fill_queue(3 if kind in ("node", "shrink") else 4)
            time.sleep(2)  # they are pending now
        if kind in ("node", "shrink"):
            killed = node_of_rank(job, 2)
            fault = time.time()
            cluster_script("kill-node.sh", killed)
        else:
            pid = rank_pid(job, 5)
            fault = time.time()
            os.kill(pid, signal.SIGKILL if kind == "crash" else signal.SIGSTOP)
        first = wait_for(lambda: min((t for r, _, t in steps(work) if r > 0), default=None), 600,
                         "the first step after the recovery")
        if kind == "hang":
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        restarts = int(re.search(r"Restarts=(\d+)", sh(["scontrol", "show", "job", job])).group(1))
        wait_for(lambda: state(job) not in ("RUNNING", "PENDING", "CONFIGURING", "COMPLETING",
                                            "REQUEUED"), 600, "the job's end")
        took = first - fault - (timeout if kind == "hang" else 0)
        return {"kind": kind, "in_place": in_place, "full": full, "s": took, "cold": cold,
                "restarts": restarts, "end": state(job), "startup_s": startup(job, work),
                "interpreters": interpreters(job) if in_place else "-"}
    finally:
        if killed:
            cluster_script("revive-node.sh", killed)
        for f in fillers:
            subprocess.run(["scancel", f], capture_output=True)
        subprocess.run(["scancel", job], capture_output=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["crash", "hang", "node", "shrink"])
    ap.add_argument("--no-full", action="store_true")
    ap.add_argument("--cold", action="store_true",
                    help="crash and hang also in place with a fresh interpreter (--no-prewarm)")
    args = ap.parse_args()
    if not os.environ.get("SLURM_CONF"):
        sys.exit("set SLURM_CONF to the test cluster's slurm.conf")
    rows = []
    kinds = [args.only] if args.only else ["crash", "hang", "node", "shrink"]
    queues = [False] if args.no_full else [False, True]
    for full in queues:
        for kind in kinds:
            modes = [(True, False), (False, False)]
            if args.cold and kind in ("crash", "hang"):
                modes.insert(1, (True, True))
            for in_place, cold in modes:
                r = one(kind, in_place, full, cold)
                rows.append(r)
                how = ("in place, cold" if cold else "in place") if in_place else "requeue"
                print(f"{kind:6} {how:15} "
                      f"{'full' if full else 'idle'} queue: {r['s']:6.1f} s to the first step "
                      f"(Restarts={r['restarts']}, {r['end']}; the program's start-up "
                      f"{r['startup_s']:.1f} s; interpreters: {r['interpreters']})", flush=True)
    by = {(r["kind"], r["full"], r["in_place"], r["cold"]): r["s"] for r in rows}
    print()
    for (kind, full, ip, cold), s in sorted(by.items()):
        if ip and (kind, full, False, False) in by:
            print(f"{kind} on {'a full' if full else 'an idle'} queue: in place"
                  f"{' (cold)' if cold else ''} / requeue = {s / by[(kind, full, False, False)]:.2f}")


if __name__ == "__main__":
    main()
