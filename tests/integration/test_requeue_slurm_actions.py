"""The libslurm edge of failure handling (service/slurm_actions) against the real test cluster.

autopar-slurm-actions (a thin command line over SlurmActions/GuardedRequeue) requeues a running
batch job exactly once even when several processes try at the same moment, sets the excluded
nodes and the AdminComment of the requeued job, reads the job's end time from its time limit, and
cancels a job with a recorded reason.
"""
import json
import re
import subprocess
import time

import pytest

from conftest import BUILD_DIR, run, sbatch, slurm_conf, wait_job

TOOL = BUILD_DIR / "service" / "slurm_actions" / "autopar-slurm-actions"

SLEEPER = """#!/bin/bash
echo "run ${SLURM_RESTART_COUNT:-0} on $(hostname)"
sleep 300
"""


def tool(*args, check=True, timeout=60):
    if not TOOL.exists():
        pytest.fail(f"{TOOL} is not built (cmake --build ... --target autopar-slurm-actions)")
    p = run([str(TOOL), *args], timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"autopar-slurm-actions {' '.join(args)} exited {p.returncode}: "
                             f"{p.stderr}")
    return p


def show(job_id):
    return json.loads(tool("show", job_id).stdout)


def wait_for(job_id, pred, what, timeout=60):
    deadline = time.time() + timeout
    j = show(job_id)
    while time.time() < deadline:
        if pred(j):
            return j
        time.sleep(0.3)
        j = show(job_id)
    raise AssertionError(f"job {job_id}: no {what} after {timeout}s: {j}")


def submit_running(tmp_path, *args):
    job_id = sbatch(SLEEPER, tmp_path, "-N1", "-n1", "--requeue", *args)
    wait_for(job_id, lambda j: j["state"] == "RUNNING", "RUNNING state")
    return job_id


def test_show_reads_owner_state_end_time_and_nodes(tmp_path):
    job_id = submit_running(tmp_path, "--time=7", "--exclude=node4")
    try:
        j = show(job_id)
        assert j["user_id"] == 0
        assert j["batch"] is True and j["requeue_allowed"] is True
        assert j["restart_count"] == 0
        assert j["time_limit_min"] == 7
        # The end time is the start plus the time limit (what the time-limit margin works from).
        assert j["end_time"] - j["start_time"] == 7 * 60
        assert re.fullmatch(r"node[1-3]", j["nodes"]), j
        assert j["batch_host"] == j["nodes"]
        assert j["excluded_nodes"] == "node4"
    finally:
        run(["scancel", job_id])
    unknown = tool("show", "999999", check=False)
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("autopar: job 999999: ")


def test_requeue_once_from_several_processes_and_exclude(tmp_path):
    job_id = submit_running(tmp_path)
    try:
        first = show(job_id)["nodes"]
        # Four processes with the same decision (restart count 0) at once, as four nodes'
        # autopards reporting one failure would: no lock file, so Slurm's own state is the guard.
        cmd = [str(TOOL), "requeue", job_id, "--restart-count", "0", "--exclude", first,
               "--reason", f"rank 1 on {first} exited with status 1"]
        env = {"SLURM_CONF": str(slurm_conf())}
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env) for _ in range(4)]
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            outs.append(json.loads(out))
        outcomes = sorted(o["outcome"] for o in outs)
        assert outcomes == ["already-done"] * 3 + ["requeued"], outs

        j = show(job_id)
        assert j["restart_count"] == 1, j
        assert j["state"] == "PENDING", j
        assert j["excluded_nodes"] == first, j
        assert f"autopar: rank 1 on {first} exited with status 1" in j["admin_comment"], j
        assert "autopar-failure restart=0" in j["admin_comment"], j

        # A late report of the same failure changes nothing.
        late = json.loads(tool(*cmd[1:]).stdout)
        assert late["outcome"] == "already-done"

        # The next run starts on another node, and its restart count is 1.
        j = wait_for(job_id, lambda j: j["state"] == "RUNNING", "restart", timeout=90)
        assert j["nodes"] != first and j["restart_count"] == 1, j
        second = j["nodes"]

        # Requeue it again (restart count 1), with a begin time later than Slurm's own wait.
        again = json.loads(tool("requeue", job_id, "--restart-count", "1", "--delay", "40").stdout)
        assert again["outcome"] == "requeued", again
        j = show(job_id)
        assert j["restart_count"] == 2 and j["state"] == "PENDING", j
        assert j["eligible_time"] >= time.time() + 30, j
        # Excluding one more node while pending keeps the first one.
        j = json.loads(tool("exclude", job_id, second).stdout)
        names = run(["scontrol", "show", "hostnames", j["excluded_nodes"]], check=True).stdout
        assert sorted(names.split()) == sorted([first, second]), j
    finally:
        run(["scancel", job_id])


def test_requeue_refusals(tmp_path):
    # A job that may not be requeued: refused before Slurm is even asked.
    job_id = submit_running(tmp_path, "--no-requeue")
    try:
        p = tool("requeue", job_id, "--restart-count", "0", check=False)
        assert p.returncode == 1
        assert "may not be requeued" in p.stderr, p.stderr
        # Excluding nodes of a running job: Slurm only changes pending jobs.
        p = tool("exclude", job_id, "node3", check=False)
        assert p.returncode == 1 and "pending jobs only" in p.stderr, p.stderr
    finally:
        run(["scancel", job_id])


def test_cancel_with_reason(tmp_path):
    job_id = submit_running(tmp_path)
    tool("cancel", job_id, "stopped: the program failed twice within 30 s of its start")
    assert wait_job(job_id, timeout=60) == "CANCELLED"
    p = run(["scontrol", "show", "job", job_id], check=True)
    assert "AdminComment=autopar: stopped: the program failed twice" in p.stdout, p.stdout
