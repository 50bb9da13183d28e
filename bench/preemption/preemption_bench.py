#!/usr/bin/env python3
"""The same training preempted again and again, three ways side by side in one run on the local
test cluster (tests/cluster/start.sh: `scavenger` preemptible with GraceTime=20 under `debug`):

  autopar    autopar-launch, --requeue-on-failure, a checkpoint every EVERY steps, and the
             program asks ckpt.time_limit_reached() every step: the notice checkpoints the step
             and autopard requeues the job once it is COMPLETE (docs/recovery.md, "Preemption")
  periodic   the same job without time_limit_reached: the notice kills the program, autopard
             requeues the job, the next run resumes from the last periodic checkpoint
  submitit   submitit's own checkpoint-on-preemption (submitit.helpers.Checkpointable from PyPI,
             its --signal=USR2 sent at the notice: SlurmctldParameters=preempt_send_user_signal),
             with the same periodic checkpoints in its own file

and, on the fourth node, the autopar job never preempted (the floor). Each job runs on a node of
its own, one task (bench/preemption/toy_train.py: a small PyTorch model, STEP_S seconds a step).
For MINUTES minutes, every INTERVAL seconds (uniform in LO:HI), a 5-second `debug` job takes each
preemptible job's node back. The jobs train STEPS steps (by default an unpreempted run's
MINUTES + 2 minutes); then each reports its preemptions, the steps it trained again per
preemption, and its wall time from submission to its last step.

Usage: bench/preemption/preemption_bench.py [--minutes 20] [--interval 60:180] [--step-s 0.5]
                                           [--every 60] [--steps N] [--seed 1] [--json FILE]
Needs SLURM_CONF of the running test cluster (autopard on every node) and AUTOPAR_BUILD_DIR.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("AUTOPAR_BUILD_DIR", REPO / "build"))
LAUNCH = BUILD / "launcher" / "autopar-launch"
CLI = BUILD / "cli" / "autopar"
TOY = REPO / "bench" / "preemption" / "toy_train.py"
PYTHON = sys.executable
NODES = ["node1", "node2", "node3", "node4"]


def sh(*cmd, check=True):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=check).stdout


def sbatch(script: str, work: Path) -> str:
    path = work / "job.sh"
    path.write_text(script)
    return sh("sbatch", "--parsable", path).strip().split(";")[0]


def autopar_job(work: Path, node: str, args, on_notice: bool, partition: str) -> str:
    work.mkdir(parents=True)
    work.chmod(0o1777)
    notice = " --on-notice" if on_notice else ""
    return sbatch(f"""#!/bin/bash
#SBATCH -N1 -n1 -w {node} -p {partition} --open-mode=append -o {work}/out.txt -e {work}/out.txt
#SBATCH --requeue-on-failure=1 --ckpt-upload=file://{work}/store --ckpt-dir={work}/local/%n
export PYTHONPATH={REPO}/python:{REPO}/bench/preemption TOY_LOG={work}/steps.log
srun --mpi=pmix {LAUNCH} -- {PYTHON} {TOY} --steps {args.steps} --step-s {args.step_s} \\
  --every {args.every}{notice}
""", work)


def submitit_job(work: Path, node: str, args) -> str:
    sys.path.insert(0, str(REPO / "bench" / "preemption"))
    import submitit
    import toy_train
    work.mkdir(parents=True)
    # The job's environment (sbatch exports this process's): the toy's module and its log.
    os.environ["PYTHONPATH"] = f"{REPO}/bench/preemption"
    os.environ["TOY_LOG"] = str(work / "steps.log")
    ex = submitit.AutoExecutor(folder=str(work / "submitit"), cluster="slurm")
    ex.update_parameters(slurm_partition="scavenger", nodes=1, tasks_per_node=1,
                         timeout_min=24 * 60,
                         slurm_additional_parameters={"nodelist": node, "open-mode": "append"})
    toy_args = argparse.Namespace(steps=args.steps, step_s=args.step_s, every=args.every)
    job = ex.submit(toy_train.SubmititTrain(toy_args, str(work / "state.pt")))
    return str(job.job_id)


def state(job: str) -> str:
    out = sh("scontrol", "show", "job", job, check=False)
    m = re.search(r"JobState=(\S+)", out)
    return m.group(1) if m else "GONE"


def preempt(job: str, node: str, work: Path, n: int):
    """A 5-second debug job that needs the job's node (the whole of it)."""
    d = work / f"preemptor-{job}-{n}"
    d.mkdir(parents=True)
    sh("sbatch", "-p", "debug", "-N1", f"--nodelist={node}", "--exclusive", f"-o{d}/out.txt",
       "--wrap", "sleep 5")


def steps_of(log_text: str):
    return [(int(m.group(2)), int(m.group(1)), float(m.group(3)))
            for m in re.finditer(r"toy: step (\d+) run (\d+) time ([\d.]+)", log_text)]


def log_of(work: Path) -> str:
    p = work / "steps.log"
    return p.read_text() if p.exists() else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--interval", default="60:180")
    ap.add_argument("--step-s", type=float, default=0.5)
    ap.add_argument("--every", type=int, default=60)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    lo, hi = (float(x) for x in args.interval.split(":"))
    if args.steps <= 0:
        args.steps = int((args.minutes + 2) * 60 / args.step_s)
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="preemption-bench-", dir="/tmp"))
    root.chmod(0o1777)
    t_submit = time.time()
    jobs = {
        "autopar": (autopar_job(root / "autopar", "node1", args, True, "scavenger"), "node1"),
        "periodic": (autopar_job(root / "periodic", "node2", args, False, "scavenger"), "node2"),
        "submitit": (submitit_job(root / "submitit", "node3", args), "node3"),
        "unpreempted": (autopar_job(root / "unpreempted", "node4", args, True, "debug"), "node4"),
    }
    print(f"bench: {args.steps} steps of {args.step_s} s, a checkpoint every {args.every}; "
          f"preemptions every {lo:.0f}-{hi:.0f} s for {args.minutes} min; jobs "
          + ", ".join(f"{k}={j}" for k, (j, _) in jobs.items()) + f"; files in {root}", flush=True)
    notices = []
    end = t_submit + args.minutes * 60
    n = 0
    while True:
        wait = rng.uniform(lo, hi)
        if time.time() + wait > end:
            break
        time.sleep(wait)
        notices.append(time.time())
        for name in ("autopar", "periodic", "submitit"):
            job, node = jobs[name]
            if state(job) == "RUNNING":
                preempt(job, node, root, n)
        n += 1
        print(f"bench: notice {n} at +{notices[-1] - t_submit:.0f} s", flush=True)
    deadline = time.time() + 3600
    while time.time() < deadline:
        if all("toy: done" in log_of(root / k) for k in jobs):
            break
        time.sleep(5)
    rows = {}
    for name, (job, _) in jobs.items():
        text = log_of(root / name)
        steps = steps_of(text)
        runs = sorted({r for r, _, _ in steps})
        trained = len(steps)
        preemptions = max(0, len(runs) - 1)
        last = max((t for _, _, t in steps), default=float("nan"))
        row = {"job": job, "preemptions": preemptions, "steps_trained": trained,
               "steps_redone": trained - args.steps,
               "redone_per_preemption": round((trained - args.steps) / preemptions, 2)
               if preemptions else 0.0,
               "wall_s": round(last - t_submit, 1), "done": "toy: done" in text}
        if name != "submitit":
            sock = Path(os.environ["SLURM_CONF"]).parent.parent / "run" / "autopard-node1.sock"
            g = subprocess.run([str(CLI), "goodput", job, "--json", "--socket", str(sock)],
                               capture_output=True, text=True)
            if g.returncode == 0:
                uses = json.loads(g.stdout)["jobs"][0]
                row["goodput_kept"] = round(uses["uses"]["steps_kept"] / uses["allocated"], 3)
        rows[name] = row
    print(f"{'':12s} {'preempt':>7s} {'trained':>8s} {'redone':>7s} {'per-preempt':>11s} "
          f"{'wall_s':>8s} {'kept':>6s}")
    for name, r in rows.items():
        print(f"{name:12s} {r['preemptions']:7d} {r['steps_trained']:8d} {r['steps_redone']:7d} "
              f"{r['redone_per_preemption']:11.2f} {r['wall_s']:8.1f} {r.get('goodput_kept', float('nan')):6.3f}")
    base = rows["unpreempted"]["wall_s"]
    for name in ("autopar", "periodic", "submitit"):
        print(f"wall time {name} / unpreempted: {rows[name]['wall_s'] / base:.3f}")
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "args": vars(args),
              "notices": len(notices), "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
