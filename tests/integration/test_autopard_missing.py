"""A job that asked for protection is never left unprotected silently: on a node whose autopard
does not answer (stopped here on node3), a task of a job whose options need autopard
(--ckpt-dir, --requeue-on-failure, ...) fails with one line naming the node, the socket and those
options (the default on_autopard_missing=fail); with on_autopard_missing=warn it says so and runs.
A job whose options do not need autopard (--model only) and a job without options run there as
ever. The node (slurmd and autopard) is restarted afterwards. About 25 s."""
import os
import signal
import time
from pathlib import Path

import pytest

from conftest import cluster_dir, restart_node, run, wait_job

NODE = "node3"


def autopard_pid(node: str):
    conf = str(cluster_dir() / "etc" / f"autopard-{node}.conf")
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = [a.decode(errors="replace") for a in cmdline.read_bytes().split(b"\0") if a]
        except OSError:
            continue
        if args and os.path.basename(args[0]) == "autopard" and conf in args:
            return int(cmdline.parent.name)
    return None


@pytest.fixture
def autopard_stopped():
    pid = autopard_pid(NODE)
    if pid is None:
        pytest.fail(f"no autopard on {NODE}: start the cluster with AUTOPAR_AUTOPARD")
    os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 30
    while autopard_pid(NODE) is not None and time.time() < deadline:
        time.sleep(0.2)
    assert autopard_pid(NODE) is None, "autopard did not stop"
    yield
    restart_node(NODE)  # slurmd and autopard together, as the node starts
    assert autopard_pid(NODE) is not None


def step(*args, env=None):
    return run(["srun", "-N1", "-n1", "-w", NODE, *args], env=env, timeout=90)


def test_a_job_that_needs_autopard_fails_without_it_and_others_run(autopard_stopped, tmp_path,
                                                                  cluster_plugstack):
    sock = cluster_dir() / "run" / f"autopard-{NODE}.sock"
    t0 = time.monotonic()
    p = step(f"--ckpt-dir={tmp_path}/ck", "--requeue-on-failure=1", "bash", "-c", "echo RAN")
    took = time.monotonic() - t0
    assert p.returncode != 0 and "RAN" not in p.stdout, p.stdout + p.stderr
    ours = [l for l in p.stderr.splitlines() if "autopar:" in l]
    assert len(ours) == 1, p.stderr
    assert f"{NODE}: autopard does not answer on {sock}" in ours[0], ours
    assert "--ckpt-dir, --requeue-on-failure need it (plugstack on_autopard_missing=fail)" in ours[0]
    assert took < 30, took  # bounded: it waits a few seconds for a restarting daemon, no more
    # A batch job fails at once too (its batch step is on the node), it does not run for days.
    b = run(["sbatch", "--parsable", "-w", NODE, "-o", f"{tmp_path}/b.out",
             f"--ckpt-upload=file://{tmp_path}/store", "--wrap", "echo RAN"], check=True)
    assert wait_job(b.stdout.strip().split(";")[0]) == "FAILED"
    assert "RAN" not in Path(f"{tmp_path}/b.out").read_text()
    # What does not need autopard runs.
    assert step("--model=7B", "bash", "-c", "echo RAN").stdout.strip() == "RAN"
    assert step("bash", "-c", "echo RAN").stdout.strip() == "RAN"
    # on_autopard_missing=warn: the task runs, told that it is unprotected.
    write, _ = cluster_plugstack
    write("required", {}, extra=["on_autopard_missing=warn"])
    w = step(f"--ckpt-dir={tmp_path}/ck", "bash", "-c", "echo RAN")
    assert w.returncode == 0 and w.stdout.strip() == "RAN", w.stderr
    warned = [l for l in w.stderr.splitlines() if "autopar:" in l]
    assert len(warned) == 1 and "warning" in warned[0] and "--ckpt-dir needs it" in warned[0] \
        and "the job runs without them (on_autopard_missing=warn)" in warned[0], w.stderr
