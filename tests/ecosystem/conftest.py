"""Shared helpers of the ecosystem's programs under autopar (tests/ecosystem): real programs of
PyTorch's ecosystem (transformers' Trainer, ...) submitted with sbatch and run by `srun
autopar-launch` on the local cluster, one rank killed after a complete checkpoint, the final state
compared with the same program's fault-free run. The cluster, SLURM_CONF and the build tree come
from the environment as for the integration tests (tests/integration/conftest.py, whose helpers
are reused here)."""
import json
import os
import sys
import time
from pathlib import Path

import pytest


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from integration_helpers import integration as _it  # noqa: E402
run = _it.run
sbatch = _it.sbatch
wait_job = _it.wait_job
wait_for = _it.wait_for
preempt = _it.preempt
cluster_dir = _it.cluster_dir
BUILD_DIR = _it.BUILD_DIR
SOURCE_DIR = _it.SOURCE_DIR
PYTHON = _it.PYTHON
pytest_runtest_logreport = _it.pytest_runtest_logreport  # a skip fails the file (see there)
pytest_sessionfinish = _it.pytest_sessionfinish
pytest_runtest_makereport = _it.pytest_runtest_makereport  # a failed test's jobs are cancelled
cancel_jobs_of_a_failed_test = _it.cancel_jobs_of_a_failed_test

LAUNCH = BUILD_DIR / "launcher" / "autopar-launch"
CLI = BUILD_DIR / "cli" / "autopar"


def socket_of(node: str = "node1") -> Path:
    return cluster_dir() / "run" / f"autopard-{node}.sock"


@pytest.fixture(scope="module", autouse=True)
def need_autopard():
    if not socket_of().exists():
        pytest.fail(f"autopard does not run on the cluster's nodes ({socket_of()} is missing)")
    for p in (LAUNCH, CLI):
        if not p.exists():
            pytest.fail(f"{p} is not built")


def submit(work: Path, program: str, *, nodes: int = 2, per_node: int = 1, opts: str = "") -> str:
    """A job running `program` (arguments after the interpreter) under autopar-launch, with node-local
    checkpoints uploaded to WORK/store and in-place recovery; its output in WORK/out.txt. `opts`: more
    #SBATCH options."""
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o1777)
    script = f"""#!/bin/bash
#SBATCH -N{nodes} --ntasks-per-node={per_node} --open-mode=append -o {work}/out.txt -e {work}/out.txt
#SBATCH --ckpt-upload=file://{work}/store --ckpt-dir={work}/local/%n
#SBATCH --requeue-on-failure=2 --heartbeat-timeout=60 {opts}
export PYTHONPATH={SOURCE_DIR}/python HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1
srun --mpi=pmix {LAUNCH} -- {PYTHON} {program}
"""
    return sbatch(script, work)


def events(job: str):
    p = run([str(CLI), "events", job, "--json", "--socket", str(socket_of())], check=True)
    return json.loads(p.stdout)["events"]


def kinds(evs, kind):
    return [e for e in evs if e["kind"] == kind]


rank_pid = _it.rank_pid


def after_complete(job: str, timeout: float = 240) -> int:
    """Waits until a checkpoint of the job is COMPLETE; returns its step."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        complete = kinds(events(job), "ckpt_complete")
        if complete:
            return int(complete[0]["step"])
        time.sleep(0.3)
    raise AssertionError(f"job {job}: no COMPLETE checkpoint in {timeout:.0f}s")


def assert_preempted_once(job: str):
    """The job was preempted once at a step its program checkpointed at the notice, requeued by
    autopard as soon as that step was COMPLETE, not as a failure; returns that step."""
    evs = events(job)
    assert "Restarts=1" in show_job(job), show_job(job)
    requeues = kinds(evs, "requeue")
    assert len(requeues) == 1 and "class=preemption" in requeues[0]["detail"], evs
    step = requeues[0]["step"]
    announced = kinds(evs, "termination_checkpoint")
    assert announced and {e["step"] for e in announced} == {step}, evs
    assert len(kinds(evs, "preempted")) == 1 and not kinds(evs, "failure"), evs
    return step


def kill_after_complete(job: str, rank: int, script: str, timeout: float = 240) -> int:
    """Once a checkpoint of the job is COMPLETE, kill -9 of `rank`'s program; returns the step."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        complete = kinds(events(job), "ckpt_complete")
        if complete:
            os.kill(rank_pid(job, rank, script), 9)
            return int(complete[0]["step"])
        time.sleep(0.3)
    raise AssertionError(f"job {job}: no COMPLETE checkpoint in {timeout:.0f}s")


def show_job(job: str) -> str:
    return run(["scontrol", "-o", "show", "job", job]).stdout
