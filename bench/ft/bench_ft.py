"""The measuring half of bench/ft/run.sh (run by pytest from tests/integration, whose helpers it
uses)."""
import json
import os
import random
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "integration"))
from conftest import PYTHON, SOURCE_DIR, sbatch, wait_job  # noqa: E402
from test_requeue_faults import LAUNCH, events, kinds, rank_pid, restarts  # noqa: E402

sys.path.insert(0, str(SOURCE_DIR / "python"))
from autopar.ft import shards  # noqa: E402

EXAMPLE = SOURCE_DIR / "etc" / "examples" / "ft_train.py"
RANKS = 8
FAULTS = int(os.environ.get("FT_BENCH_FAULTS", "20"))
STEPS = 150 + 30 * FAULTS  # 0.1 s each: room for a fault every 2-3 s


def submit(work: Path) -> str:
    for d in ("out", "ledger"):
        (work / d).mkdir(parents=True, exist_ok=True)
        (work / d).chmod(0o777)
    work.chmod(0o777)
    return sbatch(f"""#!/bin/bash
#SBATCH -N4 --ntasks-per-node=2 -o {work}/out.txt -e {work}/out.txt
#SBATCH --fault-tolerance=step --requeue-on-failure=3 --restarts-in-place=20 --heartbeat-timeout=60
export PYTHONPATH={SOURCE_DIR}/python FT_LEDGER={work}/ledger
srun --mpi=pmix {LAUNCH} -- {PYTHON} {EXAMPLE} --steps {STEPS} --global-batch 64 --step-sleep 0.1 --out {work}/out
""", work)


def commits(work: Path):
    """[(time, step)] of every committed step, the first member's record of each."""
    first = {}
    for line in shards.read_ledgers(str(work / "ledger")):
        if line.strip():
            r = json.loads(line)
            first[r["step"]] = min(first.get(r["step"], r["t"]), r["t"])
    return sorted((t, s) for s, t in first.items())


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def test_bench(tmp_path):
    clean = tmp_path / "clean"
    job = submit(clean)
    assert wait_job(job, timeout=1800) == "COMPLETED"
    clean_hash = json.loads((clean / "out" / "rank-0.json").read_text())["sha256"]

    work = tmp_path / "faults"
    job = submit(work)
    while len(commits(work)) < 20:
        time.sleep(0.2)
    kills, last = [], None
    for _ in range(FAULTS):
        time.sleep(random.uniform(2.0, 3.0))
        victim = random.choice([r for r in range(RANKS) if r != last])
        try:
            pid = rank_pid(job, victim, EXAMPLE)
        except AssertionError:
            continue  # its replacement is still starting
        kills.append((time.time(), victim))
        os.kill(pid, signal.SIGKILL)
        last = victim
    assert wait_job(job, timeout=1800) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    done = commits(work)
    to_next = []
    for t, _ in kills:
        after = [c for c, _ in done if c > t]
        to_next.append(after[0] - t)
    out = [json.loads((work / "out" / f"rank-{r}.json").read_text()) for r in range(RANKS)]
    discarded = max(o["stats"]["discarded"] for o in out)
    evs = events(job)
    exits = [e for e in kinds(evs, "rank_exit") if e["fields"].get("exit") != "0"]
    step_s = statistics.median(b - a for (a, _), (b, _) in zip(done, done[1:]))
    print(f"\nft bench: {len(kills)} faults (SIGKILL of a random rank every 2-3 s), 4 nodes x 2 ranks, "
          f"step {step_s * 1000:.0f} ms")
    print(f"  kill -> next committed step: p50 {pct(to_next, 0.5):.2f} s, p99 {pct(to_next, 0.99):.2f} s, "
          f"max {max(to_next):.2f} s")
    print(f"  steps discarded (most by any rank): {discarded} over {len(kills)} faults")
    print(f"  programs that ended with a failure: {len(exits)} (the killed ones: {len(kills)}); "
          f"Restarts={restarts(job)}; in-place restarts of every rank: {len(kinds(evs, 'restarted'))}")
    print(f"  final state bit-identical to the fault-free run: "
          f"{all(o['sha256'] == clean_hash for o in out)}")
