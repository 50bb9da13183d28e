"""Elastic runs on the local cluster, end to end, with the sharded-optimizer training of
elastic_train.py (ZeRO-1 as DTensors saved with DCP through autopar.dcp, gloo, 2 ranks per node, global batch 24, a plan
from --auto-parallel=tp=1,pp=1 so that dp is the world size):

- a 4-node run loses a node and no spare is left: it goes on, in place (no requeue), on the 3
  nodes left, re-planned (dp 8 -> 6, micro-batch 3 -> 4, the global batch kept) and resharded from
  its latest COMPLETE checkpoint; the timeline shows the size change with both plans;
- a job with a node range (--nodes=2-4) in the low-priority partition runs on 4 nodes until a
  higher-priority job preempts it; requeued at once, it restarts on the 2 nodes left (dp 4) from its
  last complete checkpoint, and, requeued once the nodes are free, grows back to 4 (dp 8) from the
  checkpoint its 4 ranks wrote;
- each run's loss curve equals the uninterrupted 8-rank run's within 1e-5 (relative) and its final
  parameters within 1e-6 (absolute): the same samples make up each step whatever the size, only
  the order of the floating-point sums changes with the number of ranks (measured: 5e-7 and 6e-8);
- bad input is refused with one line before anything runs.

Needs the cluster with autopard on every node (as test_requeue_faults.py). About 4 min.
"""
import re
import time
from pathlib import Path

import pytest

from conftest import PYTHON, SOURCE_DIR, assert_refused_at_submit, job_ids, run, sbatch, wait_job
from test_requeue_faults import (LAUNCH, NO_PREWARM, end_with_node_lost, events,  # noqa: F401
                                 kinds, need_autopard, node_of_rank, restarts, show_job, wait_step)

TRAIN = SOURCE_DIR / "tests" / "integration" / "elastic_train.py"
STEPS = 60
PLAN = "--auto-parallel=tp=1,pp=1 --model=1B --gpu-type=a100-80gb --global-batch=24 --seq-len=512"
OPTS = f"--requeue-on-failure=3 --heartbeat-timeout=20 --min-nodes=2 {PLAN}"
LOSS_RTOL = 1e-5
PARAM_ATOL = 1e-6


def job_script(work: Path, nodes: str, opts: str = OPTS) -> str:
    return f"""#!/bin/bash
#SBATCH --nodes={nodes} --ntasks-per-node=2 --open-mode=append -o {work}/out.txt -e {work}/out.txt
#SBATCH --ckpt-upload=file://{work}/store --ckpt-dir={work}/local/%n
#SBATCH {opts}
export PYTHONPATH={SOURCE_DIR}/python
echo "batch: run ${{SLURM_RESTART_COUNT:-0}} on $SLURM_JOB_NODELIST"
srun --mpi=pmix {LAUNCH} {NO_PREWARM} -- {PYTHON} {TRAIN} --steps {STEPS} --every 5 --step-sleep 0.3 --out {work}/final.pt
"""


def submit(work: Path, nodes: str = "4", opts: str = OPTS) -> str:
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o1777)
    return sbatch(job_script(work, nodes, opts), work)


def losses(work: Path):
    """{step: (loss, world)} of the last run that logged each step."""
    out = {}
    for m in re.finditer(r"elastic: step (\d+) loss (\S+) world (\d+) dp (\d+) micro (\d+) accum (\d+)",
                         (work / "out.txt").read_text()):
        out[int(m.group(1))] = (float(m.group(2)), int(m.group(3)))
    return out


def assert_same_training(work: Path, reference: Path):
    ref, got = losses(reference), losses(work)
    assert sorted(got) == list(range(STEPS)) and sorted(ref) == list(range(STEPS)), (sorted(got), sorted(ref))
    worst = max(abs(got[s][0] - ref[s][0]) / abs(ref[s][0]) for s in range(STEPS))
    assert worst <= LOSS_RTOL, f"loss differs from the uninterrupted run by {worst:.2e} (relative)"
    code = ("import sys, torch; a = torch.load(sys.argv[1])['params']; b = torch.load(sys.argv[2])['params']; "
            "print((a - b).abs().max().item())")
    p = run([PYTHON, "-c", code, str(work / "final.pt"), str(reference / "final.pt")], check=True)
    assert float(p.stdout) <= PARAM_ATOL, f"final parameters differ by {p.stdout.strip()}"
    return worst, float(p.stdout)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run on 4 nodes (8 ranks)."""
    work = tmp_path_factory.mktemp("elastic-reference")
    job = submit(work)
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert {w for _, w in losses(work).values()} == {8}
    return work


def test_a_lost_node_without_a_spare_shrinks_the_run_in_place(tmp_path, reference):
    work = tmp_path / "shrink"
    job = submit(work)
    try:
        wait_step(work, 0, 22)
        node = node_of_rank(job, 4, TRAIN)
        state, fault = end_with_node_lost(job, node, 300)
        assert state == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    finally:
        run(["scancel", job])
    assert restarts(job) == 0, show_job(job)
    out = (work / "out.txt").read_text()
    assert "re-planned for 6 ranks on 3 nodes: tp=1 pp=1 dp=6 micro_batch=4 grad_accum=1 " \
           "(global batch 24 kept; was tp=1 pp=1 dp=8 micro_batch=3 grad_accum=1)" in out, out[-3000:]
    assert re.search(r"elastic: resumed from step \d+ written by 8 ranks on 6", out), out[-3000:]
    assert {w for _, w in losses(work).values()} == {8, 6}
    worst, param = assert_same_training(work, reference)

    evs = events(job, "first_step", "finished")
    assert not kinds(evs, "requeue"), kinds(evs, "requeue")
    failure = [e for e in kinds(evs, "failure") if e["fields"].get("class") == "node-loss"]
    assert failure and failure[-1]["fields"]["lost"] == node and \
        failure[-1]["fields"]["remaining"] == "3" and failure[-1]["fields"]["min_nodes"] == "2", failure
    decisions = kinds(evs, "recovery")
    assert [e["fields"]["action"] for e in decisions] == ["restart-in-place"], decisions
    assert "on the 3 node(s) left (--min-nodes=2)" in decisions[0]["fields"]["reason"], decisions
    resized = kinds(evs, "resized")
    assert len(resized) == 1, resized
    f = resized[0]["fields"]
    assert (f["from_nodes"], f["to_nodes"], f["from_ranks"], f["to_ranks"]) == ("4", "3", "8", "6"), f
    assert f["plan_before"] == "tp=1 pp=1 dp=8 micro_batch=3 grad_accum=1", f
    assert f["plan_after"] == "tp=1 pp=1 dp=6 micro_batch=4 grad_accum=1", f
    assert node not in f["nodes"].split(",") and node in f["reason"], f
    # Every rank of the smaller run restored the whole step (all 8 saved ranks' files).
    restored = kinds(evs, "restored")
    assert sorted(e["rank"] for e in restored) == list(range(6)), restored
    took = kinds(evs, "first_step")[0]["time"] - fault
    print(f"elastic shrink: first step on 6 ranks {took:.1f} s after the node was killed; "
          f"loss within {worst:.1e}, parameters within {param:.1e}")


def test_a_preempted_range_restarts_on_the_nodes_left_and_grows_back_when_requeued(tmp_path, reference):
    # A range job of the low-priority partition runs on all four nodes until a job of the debug
    # partition takes two: the preemption requeues it at once (its program knows nothing of
    # preemption: its launchers tell autopard, which finds it in Slurm's record), and the next run
    # starts on the two nodes left, resharded from the last complete checkpoint (dp 8 -> 4).
    work = tmp_path / "range"
    job = submit(work, nodes="2-4", opts=OPTS + " --partition=scavenger")
    preemptor = None
    try:
        wait_step(work, 0, 12)
        assert re.search(r"\bNumNodes=4\b", show_job(job)), show_job(job)
        preemptor = sbatch("#!/bin/bash\nsleep 600\n", tmp_path, "-p", "debug", "-N2", "--exclusive",
                           "-o", "/dev/null")
        wait_step(work, 1, 30)
        assert re.search(r"\bNumNodes=2\b", show_job(job)), show_job(job)
    except BaseException:
        run(["scancel", job])
        raise
    finally:
        if preemptor:
            run(["scancel", preemptor])
    # Requeued (here by hand, as an admin would) once every node is free: the next run gets all
    # four and goes on with 8 ranks from the checkpoint 4 ranks wrote.
    deadline = time.time() + 30
    while run(["squeue", "-h", "-j", preemptor]).stdout.strip():
        assert time.time() < deadline, "the preempting job did not end"
        time.sleep(0.2)
    run(["scontrol", "requeue", job], check=True)
    try:
        assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    finally:
        run(["scancel", job])
    assert restarts(job) == 2, show_job(job)
    out = (work / "out.txt").read_text()
    assert re.search(r"elastic: resumed from step \d+ written by 8 ranks on 4", out), out[-3000:]
    assert re.search(r"elastic: resumed from step \d+ written by 4 ranks on 8", out), out[-3000:]
    assert {w for _, w in losses(work).values()} == {4, 8}
    evs = events(job, "resized", "finished")
    requeues = kinds(evs, "requeue")
    assert requeues and "class=preemption" in requeues[0]["detail"], requeues
    assert len(kinds(evs, "preempted")) == 1 and not kinds(evs, "failure"), evs
    sizes = [(e["fields"]["from_nodes"], e["fields"]["to_nodes"]) for e in kinds(evs, "resized")]
    assert sizes == [("4", "2"), ("2", "4")], sizes
    grown = kinds(evs, "resized")[-1]["fields"]
    assert grown["plan_after"] == "tp=1 pp=1 dp=8 micro_batch=3 grad_accum=1" and "grew" in grown["reason"], grown
    assert_same_training(work, reference)


@pytest.mark.parametrize("opts,error", [
    ("--min-nodes=0 --requeue-on-failure=1", "--min-nodes: must be an integer in [1, 100000], got '0'"),
    ("--min-nodes=2-4 --requeue-on-failure=1", "--min-nodes: must be an integer"),
    ("--min-nodes=2", "--min-nodes: needs in-place restarts"),
    ("--min-nodes=2 --restarts-in-place=2 --ckpt-dir=/tmp/x", "--min-nodes: needs --ckpt-upload"),
])
def test_bad_values_are_refused_at_submit(tmp_path, opts, error):
    assert_refused_at_submit(opts, error, nodes=2)


BIG = ["--auto-parallel", "--model=llama-2-70b", "--gpu-type=a100-40gb", "--global-batch=16"]


@pytest.mark.parametrize("where", ["command line", "script"])
def test_a_range_or_floor_the_model_does_not_fit_is_refused_at_submit(tmp_path, where):
    """The smallest size an elastic job may run on must have a plan: the low end of --nodes=A-B
    and --min-nodes=M are planned for at submit (the GPUs per node read from the same options)."""
    cases = [(["--nodes=1-2", "--ntasks-per-node=2", *BIG], "--nodes=1-2: no plan on 1 node(s) (2 GPUs): "),
             (["-N2", "--ntasks-per-node=2", "--min-nodes=1", "--requeue-on-failure=1", *BIG],
              "--min-nodes=1: no plan on 1 node(s) (2 GPUs): ")]
    for args, error in cases:
        before = job_ids()
        if where == "script":
            script = tmp_path / "job.sh"
            script.write_text("#!/bin/bash\n#SBATCH " + " ".join(args) + "\ntrue\n")
            p = run(["sbatch", str(script)])
        else:
            p = run(["sbatch", *args, "--wrap", "true"])
        ours = [line for line in p.stderr.splitlines() if "autopar: " in line]
        assert p.returncode != 0 and len(ours) == 1 and error in ours[0], p.stderr
        assert not job_ids() - before
    # The same job on a range that fits is accepted.
    job = sbatch("#!/bin/bash\ntrue\n", tmp_path, "--nodes=2-4", "--ntasks-per-node=2",
                 *PLAN.split(), "-o", "/dev/null")
    assert wait_job(job, timeout=60) == "COMPLETED"


def test_a_minimum_without_a_plan_or_above_the_step_is_refused_before_the_program_starts(tmp_path):
    marker = tmp_path / "ran"
    # 1 node of 2 GPUs cannot hold a 70B model: the floor would stop the run, so srun refuses.
    p = run(["srun", "-N2", "--ntasks-per-node=2", "--min-nodes=1", "--requeue-on-failure=1",
             "--auto-parallel", "--model=llama-2-70b", "--gpu-type=a100-40gb", "--global-batch=16",
             "touch", str(marker)])
    assert p.returncode != 0 and "--min-nodes=1: no plan on 1 node(s) (2 GPUs)" in p.stderr, p.stderr
    p = run(["srun", "-N1", "--min-nodes=2", "--requeue-on-failure=1", "touch", str(marker)])
    assert p.returncode != 0 and "--min-nodes=2: the step runs on 1 node(s)" in p.stderr, p.stderr
    assert not marker.exists()
