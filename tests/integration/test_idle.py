"""Utilisation and idle allocations (docs/health.md) on the local cluster: every rank's
autopar-launch samples its program's CPU, memory (and GPU, where there is one) use each second
here (--usage-interval=1) and its node's autopard journals a `usage` summary per node every
progress_interval_s (2 s here). A job whose program sleeps is flagged `idle` on each node once its
--idle-timeout has passed without progress or use; a training job with the same timeout is not,
and its summaries show the CPU it uses. `autopar report` shows both per node.

Needs the cluster as test_requeue_faults.py does. About 1 min.
"""
import json
import time

import pytest

from conftest import PYTHON, SOURCE_DIR, assert_refused_at_submit, run, sbatch, wait_job
from test_requeue_faults import CLI, LAUNCH, events, kinds, need_autopard, sockets, train_cmd  # noqa: F401


def submit(work, program, opts="--idle-timeout=10", nodes=2):
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o1777)
    script = f"""#!/bin/bash
#SBATCH -N{nodes} --ntasks-per-node=1 -o {work}/out.txt -e {work}/out.txt
#SBATCH {opts}
export PYTHONPATH={SOURCE_DIR}/python
srun --mpi=pmix {LAUNCH} --usage-interval=1 -- {program}
"""
    return sbatch(script, work)


def report(job):
    return json.loads(run([str(CLI), "report", job, "--json", "--socket", str(sockets()[0])],
                          check=True).stdout)


def test_a_job_that_sleeps_is_flagged_idle_on_each_node(tmp_path):
    work = tmp_path / "sleeps"
    start = time.time()
    job = submit(work, f"{PYTHON} -c 'import time; time.sleep(30)'")
    assert wait_job(job, timeout=120) == "COMPLETED", (work / "out.txt").read_text()[-2000:]
    evs = events(job, "idle")
    idle = kinds(evs, "idle")
    assert sorted(e["fields"]["node"] for e in idle) == sorted({e["node"] for e in idle}), idle
    assert len(idle) == 2, idle  # once per node, not again while it stays idle
    for e in idle:
        f = e["fields"]
        assert float(f["idle_s"]) >= 10 and float(f["cpu_cores"]) < 0.05, f
        assert "--idle-timeout=10" in f["reason"], f
        # Flagged soon after the timeout: the program started within a few seconds of the submit.
        assert e["time"] - start < 30, (e["time"] - start, f)
    usage = kinds(evs, "usage")
    assert usage and all(float(e["fields"]["cpu_cores"]) < 0.05 for e in usage[1:]), usage
    r = report(job)
    assert sorted(i["node"] for i in r["idle"]) == sorted(e["fields"]["node"] for e in idle), r["idle"]
    assert len(r["utilisation"]) == 2 and all(u["ranks"] == 1 for u in r["utilisation"]), r


def test_a_training_job_is_not_idle_and_its_use_is_measured(tmp_path):
    work = tmp_path / "trains"
    (work / "local").mkdir(parents=True)
    opts = f"--idle-timeout=10 --ckpt-dir={work}/local/%n --requeue-on-failure=1"
    job = submit(work, train_cmd(work, steps=40).replace("--every 5", "--every 100"), opts=opts)
    assert wait_job(job, timeout=180) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    evs = events(job, "usage", "finished")
    assert not kinds(evs, "idle"), kinds(evs, "idle")
    usage = kinds(evs, "usage")
    assert {e["fields"]["node"] for e in usage} == {e["node"] for e in usage} and len({e["node"] for e in usage}) == 2
    # The toy training keeps a rank busy a part of each step (gloo, 0.3 s of sleep per step).
    assert max(float(e["fields"]["cpu_cores"]) for e in usage) > 0.1, usage
    assert sum(int(e["fields"]["heartbeats"]) for e in usage) > 10, usage
    # Its memory, in every window in which it trained (a window before its first step can catch
    # the interpreter still importing: CI saw 0.05 GiB with no heartbeat yet).
    training = [e for e in usage if int(e["fields"]["heartbeats"]) > 0]
    assert {e["node"] for e in training} == {e["node"] for e in usage}, usage
    assert all(float(e["fields"]["rss_gib"]) > 0.05 for e in training), usage
    text = run([str(CLI), "report", job, "--socket", str(sockets()[0])], check=True).stdout
    assert "utilisation:" in text and " CPU cores " in text, text


@pytest.mark.parametrize("opts,error", [
    ("--idle-timeout=5", "--idle-timeout: must be 0 (never) or at least 10 seconds, got '5'"),
    ("--idle-timeout=ten", "--idle-timeout: must be an integer in [0, 604800], got 'ten'"),
])
def test_bad_values_are_refused_at_submit(tmp_path, opts, error):
    assert_refused_at_submit(opts, error, nodes=1)
