"""Per-step fault tolerance on the local cluster (docs/ft.md), end to end: etc/examples/ft_train.py
(autopar.ft, gloo on CPU) on 4 nodes x 2 ranks with --fault-tolerance=step, once without a fault
and once with one rank's program SIGKILLed in the middle of a step. The healthy ranks' programs
never stop (the same PIDs from start to end), the lost rank's launcher starts a replacement on
its node that receives the state from a live rank (ft_healed: bytes, from whom), nothing is
restarted in place or requeued, every step is committed once with every sample once (the ledger),
and the final state of every rank is bit for bit the fault-free run's. Also a hang, a bad loss,
failures close together and the replacement budget; a lost node is test_ft_nodes.py's.

Needs the cluster with autopard on every node. About 9 min.
"""
import json
import os
import random
import signal
import time
from pathlib import Path

import sys

import pytest

from conftest import PYTHON, SOURCE_DIR, run, sbatch, wait_job
from test_requeue_faults import (CLI, LAUNCH, NO_PREWARM, events, kinds, need_autopard, rank_pid,
                                 restarts, show_job, sockets)

sys.path.insert(0, str(SOURCE_DIR / "python"))
from autopar.ft import shards  # noqa: E402

EXAMPLE = SOURCE_DIR / "etc" / "examples" / "ft_train.py"
STEPS = 80
RANKS = 8


def submit(work: Path, *, heartbeat_timeout: int = 120, opts: str = "", args: str = "",
           rank0_off_batch_host: bool = False, nodes: int = 4,
           launch_opts: str = NO_PREWARM) -> str:
    for d in ("out", "ledger"):
        (work / d).mkdir(parents=True, exist_ok=True)
        (work / d).chmod(0o1777)
    work.chmod(0o1777)
    place = ""
    if rank0_off_batch_host:
        # Ranks 0-1 on the second node, ..., ranks 6-7 on the batch host (Slurm's own single
        # point: its loss ends the batch script).
        place = f"""hosts=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))
for h in "${{hosts[@]:1}}" "${{hosts[0]}}"; do echo "$h"; echo "$h"; done > {work}/hostfile
export SLURM_HOSTFILE={work}/hostfile
"""
    return sbatch(f"""#!/bin/bash
#SBATCH -N{nodes} --ntasks-per-node=2 -o {work}/out.txt -e {work}/out.txt
#SBATCH --fault-tolerance=step --requeue-on-failure=3 --heartbeat-timeout={heartbeat_timeout} {opts}
export PYTHONPATH={SOURCE_DIR}/python FT_LEDGER={work}/ledger
{place}srun --mpi=pmix {"--distribution=arbitrary" if place else ""} {LAUNCH} {launch_opts} -- {PYTHON} {EXAMPLE} --steps {STEPS} --global-batch 64 --step-sleep 0.1 --out {work}/out {args}
""", work)


def checkpoints(work: Path) -> str:
    """The options that make the run checkpoint (the example saves every --ckpt-every steps)."""
    return f"--ckpt-upload=file://{work}/store --ckpt-dir={work}/local/%n"


def results(work: Path, ranks: int = RANKS):
    return {r: json.loads((work / "out" / f"rank-{r}.json").read_text()) for r in range(ranks)}


def node_pid(host_pid: int) -> int:
    """The PID a process has in its node's PID namespace (the local cluster's nodes have one
    each): the last of NSpid."""
    for line in Path(f"/proc/{host_pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return host_pid


def committed(work: Path) -> int:
    lines = shards.read_ledgers(str(work / "ledger"))
    return max((json.loads(l)["step"] for l in lines if l.strip()), default=-1) + 1


@pytest.fixture(scope="module")
def reference(tmp_path_factory, need_autopard):
    work = tmp_path_factory.mktemp("ft-reference")
    job = submit(work)
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    return results(work)


def timeline(evs) -> str:
    """The job's events, one a line, for a failed assertion's message."""
    return "\n".join(f'{e["time"]:.2f} {e["kind"]} rank={e["rank"]} step={e["step"]} '
                     + " ".join(f"{k}={v}" for k, v in e["fields"].items()) for e in evs)


def assert_only_replaced(work: Path, job: str, reference, pids, replaced, need: str, ranks: int = RANKS):
    """The job ended as the fault-free run did, bit for bit, with only the programs of the ranks
    `replaced` replaced, each healed from a live member: the others kept their PIDs (`pids`, as
    the programs see them), every step was committed once with every sample once (the ledger),
    nothing was restarted or requeued. Returns the job's events (once `need` is among them)."""
    evs = events(job, need)
    assert not kinds(evs, "restarted") and not kinds(evs, "requeue"), timeline(evs)
    assert restarts(job) == 0, show_job(job)
    out = results(work, ranks)
    assert {r["sha256"] for r in out.values()} == {reference[0]["sha256"]}  # bit for bit
    for r in range(ranks):
        if r not in replaced:
            assert out[r]["pid"] == pids[r], (r, out[r], pids[r], timeline(evs))  # never stopped
    assert all(out[r]["pid"] != pids[r] and out[r]["stats"]["healed_bytes"] > 0 for r in replaced)
    assert shards.check_ledger(shards.read_ledgers(str(work / "ledger")), STEPS) == []
    return evs


def assert_heals(work: Path, evs, replaced) -> list:
    """Every rank in `replaced` was healed (its replacement received the state from a live
    member); any other heal is a survivor's that was one step behind: its all-reduce broke after
    the others' had completed (the dead member had sent its whole share), so it applied nothing
    while they applied the step, and the next quorum gave it their state (docs/ft.md, "The
    step"). Its own ledger shows it: the commit before the heal is two steps before the quorum's.
    A replaced rank may be healed more than once: each of its replacements is, and a replacement
    can also be such a survivor at a later re-form. Returns the heals (ft_healed events)."""
    healed = kinds(evs, "ft_healed")
    assert set(replaced) <= {e["rank"] for e in healed}, timeline(evs)
    for e in healed:
        if e["rank"] in replaced:
            continue
        step, epoch = int(e["fields"]["step"]), int(e["fields"]["epoch"])
        mine = [json.loads(l) for l in (work / "ledger" / f"rank-{e['rank']}.jsonl").read_text().splitlines()
                if l.strip()]
        after = next(i for i, r in enumerate(mine) if (r["step"], r["epoch"]) == (step, epoch))
        assert after > 0 and mine[after - 1]["step"] == step - 2, (e, mine[max(0, after - 2):after + 1])
    return healed


def test_a_crashed_rank_is_replaced_alone_and_healed_from_a_live_peer(tmp_path, reference):
    assert len({r["sha256"] for r in reference.values()}) == 1
    # Checkpoints every 10 steps meanwhile, as today: the replacement reads none of them.
    job = submit(tmp_path, opts=checkpoints(tmp_path), args="--ckpt-every 10")
    deadline = time.time() + 120
    while committed(tmp_path) < 20:
        assert time.time() < deadline, (tmp_path / "out.txt").read_text()[-3000:]
        time.sleep(0.2)
    host_pids = {r: rank_pid(job, r, EXAMPLE) for r in range(RANKS)}
    pids = {r: node_pid(p) for r, p in host_pids.items()}  # what the program itself sees
    victim = 5
    time.sleep(random.uniform(0, 0.1))  # somewhere in a step
    os.kill(host_pids[victim], signal.SIGKILL)
    assert wait_job(job, timeout=300) == "COMPLETED", (tmp_path / "out.txt").read_text()[-3000:]

    evs = assert_only_replaced(tmp_path, job, reference, pids, [victim], "ft_healed")
    out = results(tmp_path)
    mine = [e for e in assert_heals(tmp_path, evs, [victim]) if e["rank"] == victim]
    assert len(mine) == 1, mine
    assert int(mine[0]["fields"]["bytes"]) == out[victim]["stats"]["healed_bytes"]
    quorums = kinds(evs, "ft_quorum")
    assert [q["fields"]["epoch"] for q in quorums] == ["0", "1"], quorums
    assert any(h.startswith(f"{victim}<") for h in quorums[1]["fields"]["heals"].split(",")), quorums[1]
    exits = kinds(evs, "rank_exit")
    assert [e["rank"] for e in exits if e["fields"].get("exit") != "0"] == [victim], exits
    # Nothing read from --ckpt-upload or the node-local checkpoint: no restore, and the
    # replacement started from no checkpoint; the checkpoints went on being completed.
    assert not kinds(evs, "restored") and not kinds(evs, "ckpt_restored"), timeline(evs)
    assert out[victim]["started_at"] == 0, out[victim]
    complete = {e["step"] for e in kinds(evs, "ckpt_complete")}
    assert len(complete) >= 5 and complete <= set(range(9, STEPS, 10)), timeline(evs)


def wait_committed(work: Path, steps: int, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while committed(work) < steps:
        assert time.time() < deadline, (work / "out.txt").read_text()[-3000:]
        time.sleep(0.2)


def test_hung_ranks_are_replaced_and_the_others_never_stop(tmp_path, reference):
    """Two hangs (SIGSTOP), on two nodes one after the other: autopard's hang verdict reaches
    every launcher; the ones whose program waits in the group's collective spare it, the hung
    one's launcher replaces it as a crash; the watch re-arms once the group goes on, so the
    second hang is seen as the first was."""
    job = submit(tmp_path, heartbeat_timeout=10)
    wait_committed(tmp_path, 15)
    host_pids = {r: rank_pid(job, r, EXAMPLE) for r in range(RANKS)}
    pids = {r: node_pid(p) for r, p in host_pids.items()}
    os.kill(host_pids[3], signal.SIGSTOP)
    stopped_at = committed(tmp_path)
    wait_committed(tmp_path, stopped_at + 5, timeout=120)  # healed, the group goes on
    os.kill(host_pids[6], signal.SIGSTOP)
    assert wait_job(job, timeout=300) == "COMPLETED", (tmp_path / "out.txt").read_text()[-3000:]

    evs = assert_only_replaced(tmp_path, job, reference, pids, [3, 6], "ft_healed")
    healed = assert_heals(tmp_path, evs, [3, 6])
    assert kinds(evs, "heartbeat_missed") and kinds(evs, "hang_stop")
    report = json.loads(run([str(CLI), "report", job, "--json", "--socket", str(sockets()[0])],
                            check=True).stdout)
    assert report["ft"]["reforms"] == 2 and report["ft"]["heals"] == len(healed), report
    assert report["healthy_restarts"] == 0 and [r["class"] for r in report["recoveries"]] == ["hang", "hang"]


def test_a_bad_loss_is_discarded_and_redone_from_memory(tmp_path, reference):
    """--on-bad-loss=rollback: rank 2's loss is NaN once at step 30; the group's commit decision
    discards the step everywhere and every member runs it again from the state it holds, with no
    checkpoint, restart or replacement; the result is the fault-free run's."""
    job = submit(tmp_path, opts=f"--on-bad-loss=rollback --ckpt-dir={tmp_path}/ckpt", args="--bad-loss-at 30:2")
    assert wait_job(job, timeout=300) == "COMPLETED", (tmp_path / "out.txt").read_text()[-3000:]
    out = results(tmp_path)
    assert {r["sha256"] for r in out.values()} == {reference[0]["sha256"]}
    assert all(r["stats"]["discarded"] == 1 and r["stats"]["healed_bytes"] == 0 for r in out.values())
    assert shards.check_ledger(shards.read_ledgers(str(tmp_path / "ledger")), STEPS) == []
    assert restarts(job) == 0, show_job(job)
    evs = events(job, "ft_discarded")
    discarded = kinds(evs, "ft_discarded")
    assert [(e["step"], e["fields"]["reason"]) for e in discarded] == [(30, "loss-not-finite")], discarded
    assert not kinds(evs, "restarted") and not kinds(evs, "bad_loss") and not kinds(evs, "ft_healed")


def new_pid(job: str, rank: int, old: int, timeout: float = 60) -> int:
    """The host PID of `rank`'s program once it is another than `old` (its replacement)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            pid = rank_pid(job, rank, EXAMPLE)
            if pid != old:
                return pid
        except AssertionError:
            pass  # between the two
        time.sleep(0.01)
    raise AssertionError(f"no replacement for rank {rank} in {timeout} s")


def started_at(pid: int) -> float:
    """When the process `pid` was started: seconds since boot (CLOCK_BOOTTIME), from /proc."""
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    return ticks / os.sysconf("SC_CLK_TCK")


def test_failures_close_together_and_a_failed_replacement(tmp_path, reference):
    """Two ranks on two nodes SIGKILLed 50 ms apart, then the replacement of one of them killed as
    soon as it appears (while it starts, joins or receives the state): the group re-forms as
    often as it must, every replacement is healed from a live member, the six others never stop,
    and the result is the fault-free run's bit for bit. Then a replacement that trains is killed:
    its own replacement was prepared as soon as it joined (a warm interpreter, started before the
    kill), not --prewarm-after (here 60 s) into its run."""
    job = submit(tmp_path, opts="--restarts-in-place=4", launch_opts="--prewarm-after=60")
    wait_committed(tmp_path, 20)
    host_pids = {r: rank_pid(job, r, EXAMPLE) for r in range(RANKS)}
    pids = {r: node_pid(p) for r, p in host_pids.items()}
    os.kill(host_pids[1], signal.SIGKILL)
    time.sleep(0.05)
    os.kill(host_pids[6], signal.SIGKILL)
    os.kill(new_pid(job, 6, host_pids[6]), signal.SIGKILL)
    wait_committed(tmp_path, committed(tmp_path) + 3)  # the group goes on with both replaced
    third = rank_pid(job, 6, EXAMPLE)
    t3 = started_at(third)
    killed_at = time.clock_gettime(time.CLOCK_BOOTTIME)
    os.kill(third, signal.SIGKILL)
    fourth = new_pid(job, 6, third)
    assert started_at(fourth) < killed_at, (t3, started_at(fourth), killed_at)
    assert wait_job(job, timeout=300) == "COMPLETED", (tmp_path / "out.txt").read_text()[-3000:]

    evs = assert_only_replaced(tmp_path, job, reference, pids, [1, 6], "finished")
    exits = [e["rank"] for e in kinds(evs, "rank_exit") if e["fields"].get("exit") != "0"]
    assert sorted(exits) == [1, 6, 6, 6], exits
    assert_heals(tmp_path, evs, [1, 6])


def test_replacements_past_the_budget_fall_back_to_restarting_every_program(tmp_path, reference):
    """--restarts-in-place=1 is the run's budget, not each rank's: rank 5's crash is replaced
    alone; rank 2's, on another node, is past it, and the run takes today's path: every program
    restarted in place from the latest complete checkpoint (every 10 steps, the replacement's
    included), still the fault-free run's result."""
    job = submit(tmp_path, opts=f"--restarts-in-place=1 {checkpoints(tmp_path)}", args="--ckpt-every 10")
    wait_committed(tmp_path, 20)
    first = rank_pid(job, 5, EXAMPLE)
    os.kill(first, signal.SIGKILL)
    new_pid(job, 5, first)
    wait_committed(tmp_path, 30)
    os.kill(rank_pid(job, 2, EXAMPLE), signal.SIGKILL)
    assert wait_job(job, timeout=300) == "COMPLETED", (tmp_path / "out.txt").read_text()[-3000:]
    out = results(tmp_path)
    assert {r["sha256"] for r in out.values()} == {reference[0]["sha256"]}
    evs = events(job, "finished")
    healed = assert_heals(tmp_path, evs, [5])
    assert [e["rank"] for e in healed].count(5) == 1, healed
    restarted = kinds(evs, "restarted")
    assert len(restarted) == 1 and restarted[0]["fields"]["programs"] == "8", restarted
    assert restarted[0]["fields"]["failed"] == "1", restarted
    assert not kinds(evs, "requeue")
    restored = kinds(evs, "restored")
    steps = {e["step"] for e in restored}
    assert len(steps) == 1 and min(steps) >= 19, timeline(evs)  # the replacement's saves count
    assert {r["started_at"] for r in out.values()} == {restored[0]["step"] + 1}, out
    report = json.loads(run([str(CLI), "report", job, "--json", "--socket", str(sockets()[0])],
                            check=True).stdout)
    assert report["healthy_restarts"] == 7 and report["ft"]["heals"] == len(healed), report


def test_two_replacements_at_once_past_the_budget_fall_back_together(tmp_path, reference):
    """--restarts-in-place=1, and two ranks on two nodes SIGKILLed at the same moment: each
    launcher knows of no replacement yet and replaces its program, but the quorum that would take
    both newcomers in is refused (2 of the run's 1), and the run takes the budget's path at once:
    every program restarted in place from the latest complete checkpoint, no heal, the fault-free
    run's result."""
    job = submit(tmp_path, opts=f"--restarts-in-place=1 {checkpoints(tmp_path)}", args="--ckpt-every 10")
    wait_committed(tmp_path, 20)
    victims = [rank_pid(job, r, EXAMPLE) for r in (2, 5)]
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    assert wait_job(job, timeout=300) == "COMPLETED", (tmp_path / "out.txt").read_text()[-3000:]
    out = results(tmp_path)
    assert {r["sha256"] for r in out.values()} == {reference[0]["sha256"]}
    evs = events(job, "finished")
    assert not kinds(evs, "ft_healed"), timeline(evs)
    restarted = kinds(evs, "restarted")
    assert len(restarted) == 1 and restarted[0]["fields"]["programs"] == "8", timeline(evs)
    assert not kinds(evs, "requeue") and restarts(job) == 0
    assert "the run's replacements would be 2, past its 1 (--restarts-in-place)" in \
        (tmp_path / "out.txt").read_text()
