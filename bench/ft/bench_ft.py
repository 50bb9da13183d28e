"""The measuring half of bench/ft/run.sh (run by pytest from tests/integration, whose helpers it
uses)."""
import json
import os
import random
import re
import signal
import statistics
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "integration"))
from conftest import PYTHON, SOURCE_DIR, cluster_script, job_state, run, sbatch, wait_job  # noqa: E402
from test_requeue_faults import (LAUNCH, end_with_node_lost, events, kinds, node_of_rank,  # noqa: E402
                                 rank_pid, restarts, show_job)

sys.path.insert(0, str(SOURCE_DIR / "python"))
from autopar.ft import shards  # noqa: E402

EXAMPLE = SOURCE_DIR / "etc" / "examples" / "ft_train.py"
RANKS = 8
FAULTS = int(os.environ.get("FT_BENCH_FAULTS", "20"))
STEPS = 150 + 30 * FAULTS  # 0.1 s each: room for a fault every 2-3 s


def submit(work: Path, *, steps: int = STEPS, ft: bool = True, sleep: float = 0.1, width: int = 64,
           heartbeat_timeout: int = 60, opts: str = "", nodes: int = 4, args: str = "",
           launch_opts: str = "") -> str:
    for d in ("out", "ledger"):
        (work / d).mkdir(parents=True, exist_ok=True)
        (work / d).chmod(0o1777)
    work.chmod(0o1777)
    # The caller's options come last: theirs win (the ETTR's --restarts-in-place=50).
    opts = (" --fault-tolerance=step --restarts-in-place=20 " if ft else " ") + opts
    return sbatch(f"""#!/bin/bash
#SBATCH -N{nodes} --ntasks-per-node=2 -o {work}/out.txt -e {work}/out.txt
#SBATCH --requeue-on-failure=3 --heartbeat-timeout={heartbeat_timeout} {opts}
export PYTHONPATH={SOURCE_DIR}/python FT_LEDGER={work}/ledger
srun --mpi=pmix {LAUNCH} {launch_opts} -- {PYTHON} {EXAMPLE} --steps {steps} --global-batch 64 --step-sleep {sleep} \
  --width {width} --out {work}/out {"" if ft else "--plain"} {args}
""", work)


def commits(work: Path, epochs: bool = False):
    """[(time, step)] of every committed step, the first member's record of each; with `epochs`,
    [(time, step, epoch)]."""
    first = {}
    for line in shards.read_ledgers(str(work / "ledger")):
        if line.strip():
            r = json.loads(line)
            if r["step"] not in first or r["t"] < first[r["step"]][0]:
                first[r["step"]] = (r["t"], r["epoch"])
    return sorted((t, s, e) if epochs else (t, s) for s, (t, e) in first.items())


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def inject(job: str, work: Path, kind: str, faults: int, gap_s, after: int = 20, repeat: int = 1) -> list:
    """`faults` faults of `kind` (crash: SIGKILL, hang: SIGSTOP) to random ranks, `gap_s()` apart,
    from the `after`th committed step; with `repeat`, `faults // repeat` ranks, each one's
    program and then its replacements, `repeat` in all. [(time, rank)] of each."""
    while len(commits(work)) < after:
        time.sleep(0.2)
    done, last = [], None
    for _ in range(faults // repeat):
        time.sleep(gap_s())
        victim = random.choice([r for r in range(RANKS) if r != last])
        for i in range(repeat):
            if i:
                time.sleep(gap_s())
            try:
                pid = rank_pid(job, victim, EXAMPLE)
            except AssertionError:
                break  # its replacement is still starting
            done.append((time.time(), victim))
            os.kill(pid, signal.SIGKILL if kind == "crash" else signal.SIGSTOP)
        last = victim
    return done


def report(title: str, job: str, work: Path, faults: list, clean_hash: str) -> None:
    done = commits(work)
    to_next = [[c for c, _ in done if c > t][0] - t for t, _ in faults]
    out = [json.loads((work / "out" / f"rank-{r}.json").read_text()) for r in range(RANKS)]
    discarded = max(o["stats"]["discarded"] for o in out)
    healed = [int(e["fields"]["bytes"]) for e in kinds(events(job), "ft_healed")]
    evs = events(job)
    step_s = statistics.median(b - a for (a, _), (b, _) in zip(done, done[1:]))
    print(f"\nft bench, {title}: {len(faults)} faults, 4 nodes x 2 ranks, step {step_s * 1000:.0f} ms")
    print(f"  fault -> next committed step: p50 {pct(to_next, 0.5):.2f} s, p99 {pct(to_next, 0.99):.2f} s, "
          f"max {max(to_next):.2f} s")
    print(f"  steps discarded (most by any rank): {discarded} ({discarded / len(faults):.2f} per fault); "
          f"state received per heal: {statistics.median(healed) / 2**20:.2f} MiB")
    print(f"  programs restarted that had not failed: {RANKS * len(kinds(evs, 'restarted'))}; "
          f"Restarts={restarts(job)}")
    if clean_hash:
        print(f"  final state bit-identical to the fault-free run: {all(o['sha256'] == clean_hash for o in out)}")
    else:
        print(f"  every member's final state the same: {len({o['sha256'] for o in out}) == 1} "
              f"(no fault-free run of this length: tests/integration/test_ft.py compares one)")


@pytest.fixture(scope="module")
def clean_hash(tmp_path_factory):
    work = tmp_path_factory.mktemp("clean")
    assert wait_job(submit(work), timeout=1800) == "COMPLETED"
    return json.loads((work / "out" / "rank-0.json").read_text())["sha256"]


def test_crashes(tmp_path, clean_hash):
    job = submit(tmp_path)
    faults = inject(job, tmp_path, "crash", FAULTS, lambda: random.uniform(2.0, 3.0))
    assert wait_job(job, timeout=1800) == "COMPLETED", (tmp_path / "out.txt").read_text()[-3000:]
    report("crashes (SIGKILL of a random rank every 2-3 s)", job, tmp_path, faults, clean_hash)


def test_crashes_of_young_replacements(tmp_path, clean_hash):
    """A random rank's program SIGKILLed, then its replacement 2-3 s into its run (it has joined
    and trains): the replacement's own replacement must start warm too."""
    job = submit(tmp_path)
    faults = inject(job, tmp_path, "crash", FAULTS, lambda: random.uniform(2.0, 3.0), repeat=2)
    assert wait_job(job, timeout=1800) == "COMPLETED", (tmp_path / "out.txt").read_text()[-3000:]
    report("crashes of a rank, then of its replacement 2-3 s later", job, tmp_path, faults, clean_hash)


def test_hangs(tmp_path):
    timeout = 10
    job = submit(tmp_path, steps=150 + FAULTS * (timeout + 4) * 10, heartbeat_timeout=timeout)
    faults = inject(job, tmp_path, "hang", FAULTS, lambda: timeout + random.uniform(2.0, 3.0))
    assert wait_job(job, timeout=3600) == "COMPLETED", (tmp_path / "out.txt").read_text()[-3000:]
    report(f"hangs (SIGSTOP of a random rank, --heartbeat-timeout={timeout})", job, tmp_path, faults, "")


def median_step(work: Path) -> float:
    done = commits(work)[10:]  # past the start
    return statistics.median(b - a for (a, _), (b, _) in zip(done, done[1:]))


@pytest.mark.parametrize("sleep", [0.1, 0.0])
def test_steady_state_overhead(tmp_path, sleep):
    """The same program with fault tolerance and without (torch.distributed, one all-reduce),
    side by side: a step that computes 100 ms, and one that computes nothing."""
    steps = 300 if sleep else 1500
    times = {}
    for ft in (True, False, True, False):  # interleaved: the machine's noise shared
        work = tmp_path / f"{'ft' if ft else 'plain'}-{len(times)}"
        assert wait_job(submit(work, steps=steps, ft=ft, sleep=sleep), timeout=1800) == "COMPLETED"
        times.setdefault(ft, []).append(median_step(work))
    on, off = statistics.mean(times[True]), statistics.mean(times[False])
    print(f"\nft bench, steady state, {sleep * 1000:.0f} ms of compute per step: with fault tolerance "
          f"{on * 1000:.1f} ms/step, without {off * 1000:.1f} ms/step: {on / off:.3f}x "
          f"({(on - off) * 1000:+.1f} ms per step)")


def test_node_losses_with_a_spare(tmp_path):
    """A node lost as a whole (kill-node.sh: its slurmd, autopard, launchers and programs), one
    per job of 3 nodes in use and 1 spare (a revived node's launchers are gone with it), whose
    ranks the spare's launchers take: from the kill to the group's next committed step (the
    spare's programs are healed), and how long the group took to re-form (from the first join
    after the loss to the quorum: formed_s). Side by side, alternating: the spare's programs
    started in the interpreters its launchers prepared in reserve, and cold
    (`autopar-launch --no-prewarm`); how each started is what its launcher said ("interpreter
    warm|warming|cold")."""
    runs = {"prepared in reserve": "", "cold (--no-prewarm)": "--no-prewarm"}
    to_next = {k: [] for k in runs}
    formed = {k: [] for k in runs}
    started = {k: [] for k in runs}
    identical = True
    for i in range(FAULTS * len(runs)):
        kind = list(runs)[i % len(runs)]
        work = tmp_path / f"run-{i}"
        job = submit(work, steps=80, opts="--spare-nodes=1", launch_opts=runs[kind])
        deadline = time.time() + 300
        while len(commits(work)) < 20:
            assert time.time() < deadline, (work / "out.txt").read_text()[-3000:]
            time.sleep(0.2)
        node = node_of_rank(job, random.choice([2, 3, 4, 5]), EXAMPLE)  # not the batch host's
        state, fault = end_with_node_lost(job, node, 600)
        assert state == "COMPLETED", (work / "out.txt").read_text()[-3000:]
        # The first step of the group re-formed after the loss: kill-node.sh takes a moment to
        # land, and the step in flight may still commit in the old epoch after `fault`.
        done = commits(work, epochs=True)
        before = max(e for t, _, e in done if t <= fault)
        to_next[kind].append([t for t, _, e in done if e > before][0] - fault)
        quorum = [q for q in kinds(events(job, "finished"), "ft_quorum") if q["fields"].get("lost")][-1]
        formed[kind].append(float(quorum["fields"]["formed_s"]))
        out = [json.loads((work / "out" / f"rank-{r}.json").read_text()) for r in range(6)]
        identical = identical and len({o["sha256"] for o in out}) == 1 and restarts(job) == 0
        started[kind] += re.findall(r"taking the place of a lost node \(program ranks from \d+, "
                                    r"interpreter (\w+)\)", (work / "out.txt").read_text())
    print(f"\nft bench, node losses with a spare: {FAULTS} of each kind, alternating (one a job, "
          "3 nodes x 2 ranks in use + 1 spare)")
    for kind in runs:
        t, f, w = to_next[kind], formed[kind], started[kind]
        print(f"  spare's programs {kind}: kill -> next committed step p50 {pct(t, 0.5):.2f} s, "
              f"p99 {pct(t, 0.99):.2f} s, max {max(t):.2f} s; re-formed (formed_s) p50 {pct(f, 0.5):.2f} s, "
              f"p99 {pct(f, 0.99):.2f} s; started: " + ", ".join(f"{w.count(x)} {x}" for x in sorted(set(w))))
    print(f"  every member the same state, no restart: {identical}")


ETTR_WINDOW_S = float(os.environ.get("FT_BENCH_ETTR_S", "600"))
IN_PLACE = "--restarts-in-place=50 --spare-nodes=1 --min-nodes=3"
ETTR_POLICIES = {
    # The same program and faults; what differs is how a failure is recovered. Every policy
    # checkpoints every 20 steps; the two that recover inside the allocation have a spare node
    # and may go on with 3 of their 4 nodes (both are in-place options: requeue has neither).
    "per-step fault tolerance": (True, IN_PLACE),
    "in-place restart of every program": (False, IN_PLACE),
    "requeue": (False, "--restarts-in-place=0"),
}
# The faults, the same sequence for every policy: a crash, a hang or a node lost (one in four),
# 20-30 s apart.
ETTR_FAULTS = random.Random(30).choices(["crash", "hang", "node"], weights=[3, 3, 2], k=100)
ETTR_GAPS = [random.Random(31 + i).uniform(20.0, 30.0) for i in range(100)]
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
         "DEADLINE", "PREEMPTED", "UNKNOWN")


def progress_at(records, t: float) -> int:
    """The steps the run had committed by time `t` (a step run again after a restore adds none)."""
    return max((s for tt, s in records if tt <= t), default=-1) + 1


def batch_host(job: str) -> str:
    return re.search(r"BatchHost=(\S+)", show_job(job)).group(1)


def lose_node(job: str, revived: list) -> bool:
    """kill-node.sh on a node that runs ranks of the job and is not its batch host (Slurm's own
    single point); the node comes back 20 s later (a reboot), in the background."""
    host = batch_host(job)
    for rank in random.sample(range(RANKS), RANKS):
        try:
            node = node_of_rank(job, rank, EXAMPLE)
        except (AssertionError, FileNotFoundError, KeyError):
            continue
        if node != host:
            cluster_script("kill-node.sh", node)

            def revive(node=node):
                time.sleep(20)
                cluster_script("revive-node.sh", node, check=False)
            t = threading.Thread(target=revive)
            t.start()
            revived.append(t)
            return True
    return False


def fault(job: str, kind: str, revived: list) -> bool:
    if kind == "node":
        return lose_node(job, revived)
    for rank in random.sample(range(RANKS), RANKS):
        try:
            os.kill(rank_pid(job, rank, EXAMPLE), signal.SIGKILL if kind == "crash" else signal.SIGSTOP)
            return True
        except (AssertionError, ProcessLookupError):
            continue  # not running now (a replacement starting, a rank left out)
    return False


@pytest.mark.parametrize("policy", list(ETTR_POLICIES))
def test_effective_training_time_ratio(tmp_path, policy):
    """ETTR (useful step time / wall time) over a 10-minute window of one program (4 nodes x 2
    ranks, and a spare node where the policy recovers in place) under a fault every 20-30 s (a crash, a hang or a node lost, the same
    sequence for each), three policies side by side: per-step fault tolerance, today's in-place
    restart of every program from the latest checkpoint, and requeue; each checkpoints every 20
    steps. Useful time: the steps the run advanced in the window (a step run again after a restore
    counts once) at its median step time; wall time: the window. Needs a cluster of 6 nodes whose
    site allows 50 requeues and in-place restarts (run.sh starts one)."""
    plugstack = (Path(os.environ["SLURM_CONF"]).parent / "plugstack.conf").read_text()
    if not all(f"{key}=50" in plugstack for key in ("max_requeue", "max_restarts_in_place")):
        pytest.skip("needs a cluster started with max_requeue=50 max_restarts_in_place=50 (run.sh)")
    ft, opts = ETTR_POLICIES[policy]
    timeout = 10
    nodes = 5 if "--spare-nodes=1" in opts else 4
    opts += f" --requeue-on-failure=50 --ckpt-upload=file://{tmp_path}/store --ckpt-dir={tmp_path}/local/%n"
    job = submit(tmp_path, steps=100000, ft=ft, heartbeat_timeout=timeout, opts=opts, nodes=nodes)
    while len(commits(tmp_path)) < 20:
        assert job_state(job) in ("PENDING", "RUNNING", "CONFIGURING"), job_state(job)
        time.sleep(0.5)
    start = time.time()
    end = start + ETTR_WINDOW_S
    faults, revived = [], []
    for kind, gap in zip(ETTR_FAULTS, ETTR_GAPS):
        at = min(end, time.time() + gap)
        while time.time() < at and job_state(job) not in ENDED:
            time.sleep(0.5)
        if time.time() >= end or job_state(job) in ENDED:
            break
        # A requeued job passes through COMPLETING, PENDING, ...: a fault lands only while it
        # trains (a step committed in the last 3 s), not while its step is being launched.
        while time.time() < end and (job_state(job) != "RUNNING" or
                                     time.time() - max(t for t, _ in commits(tmp_path)) > 3):
            time.sleep(0.5)
        if time.time() < end and fault(job, kind, revived):
            faults.append(kind)
    state = job_state(job)
    run(["scancel", job])
    for t in revived:
        t.join()
    records = sorted((json.loads(line)["t"], json.loads(line)["step"])
                     for line in shards.read_ledgers(str(tmp_path / "ledger")) if line.strip())
    done = commits(tmp_path)
    step_s = statistics.median(b - a for (a, _), (b, _) in zip(done, done[1:]))
    steps = progress_at(records, end) - progress_at(records, start)
    ettr = steps * step_s / ETTR_WINDOW_S
    evs = events(job)
    print(f"\nft bench, ETTR, {policy}: {ettr:.3f} ({len(faults)} faults: {faults.count('crash')} crashes, "
          f"{faults.count('hang')} hangs, {faults.count('node')} nodes lost; --heartbeat-timeout={timeout}; "
          f"{steps} steps of {step_s * 1000:.0f} ms in {ETTR_WINDOW_S:.0f} s; Restarts={restarts(job)}, "
          f"in-place restarts {len(kinds(evs, 'restarted'))}, heals {len(kinds(evs, 'ft_healed'))}; "
          f"{state} at the window's end)")
    assert state not in ENDED, (tmp_path / "out.txt").read_text()[-3000:]


def test_large_state(tmp_path):
    """A model whose state (parameters and Adam's moments) is about 256 MiB: what a heal costs."""
    width = 660_000  # (32 + 2) x width parameters, 3 copies of each (Adam) at 4 bytes: 257 MiB
    # A step all-reduces 86 MB over 8 ranks on 2 cores: about 9 s here.
    job = submit(tmp_path, steps=25, width=width, heartbeat_timeout=600, args="--no-eval")
    faults = inject(job, tmp_path, "crash", 3, lambda: random.uniform(15.0, 20.0), after=3)
    assert wait_job(job, timeout=1800) == "COMPLETED", (tmp_path / "out.txt").read_text()[-3000:]
    report(f"crashes with a {width * 34 * 12 / 2**20:.0f} MiB state", job, tmp_path, faults, "")
    for e in kinds(events(job), "ft_healed"):
        print(f"  healed rank {e['rank']}: {int(e['fields']['bytes']) / 2**20:.0f} MiB from rank "
              f"{e['fields']['from']} in {e['fields']['seconds']} s")
