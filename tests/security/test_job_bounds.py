"""Attack: make autopard hold or print what a job's programs choose.

The second account (autopar-test2) runs one-task steps (srun -n1: Slurm gives the job one task
and one CPU) whose programs, as the user:
- heartbeat for rank 50,000,000 (each rank is a row of root's state): refused, naming the job's
  size from Slurm, while the step's own rank 0 is served;
- send an event whose detail carries terminal control sequences (retitle the window, move the
  cursor, a C1 CSI): root's `autopar events JOB` (an admin looking at the user's job) prints them
  escaped, never as raw control bytes, and the JSON keeps them exactly;
- give their job more requeues than the site allows: the launcher's environment (which autopard
  reads from /proc) says AUTOPAR_REQUEUE_ON_FAILURE=1000 where submit allowed 1; the requeue
  autopard makes counts against the plugstack's max_requeue (5 on the local cluster), not 1000.
About 20 s.
"""
import json
import time

from conftest import (CLI, LAUNCH, PYTHON, as_user, cancel, job_state, need_binaries, node_socket,
                      root_events, run, user_dir, user_sbatch)

NASTY = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\xc2\x9b31m"


def step(*args, env=None):
    """One one-task step on node1 as the user; its CompletedProcess."""
    return as_user(["srun", "-N1", "-n1", "-w", "node1", *args], env=env, timeout=60)


def test_a_rank_past_the_jobs_size_is_refused():
    need_binaries()
    sock = str(node_socket("node1"))
    bad = step(CLI, "heartbeat", "--step", "1", "--rank", "50000000", "--socket", sock)
    assert bad.returncode != 0, bad.stdout + bad.stderr
    assert "rank 50000000 is not a rank of job" in bad.stderr, bad.stderr
    good = step(CLI, "heartbeat", "--step", "1", "--rank", "0", "--socket", sock)
    assert good.returncode == 0, good.stderr


def test_event_details_never_reach_a_terminal_raw(tmp_path):
    need_binaries()
    sock = str(node_socket("node1"))
    program = ("import os, sys; from autopar import ckpt; "
               f"ckpt.event('note', {NASTY!r}); print(os.environ['SLURM_JOB_ID'])")
    p = step(PYTHON, "-c", program, env={"AUTOPAR_SOCKET": sock})
    assert p.returncode == 0, p.stderr
    job = p.stdout.strip().splitlines()[-1]
    table = run([str(CLI), "events", job, "--socket", sock], check=True)
    assert "\x1b" not in table.stdout and "\x07" not in table.stdout and "\xc2\x9b" not in table.stdout, \
        repr(table.stdout)
    assert "\\x1b]0;pwned\\x07" in table.stdout and "\\u009b31m" in table.stdout, table.stdout
    raw = run([str(CLI), "events", job, "--json", "--socket", sock], check=True)
    details = [e["detail"] for e in json.loads(raw.stdout)["events"] if e["kind"] == "note"]
    assert details == [NASTY], details


def test_a_requeue_budget_written_into_the_environment_stays_within_the_sites(user_dir):
    need_binaries()
    # Run 0 fails at once; run 1 (after autopard's requeue) ends well.
    program = "sh -c '[ \"${SLURM_RESTART_COUNT:-0}\" -gt 0 ] || exit 3'"
    script = user_dir / "job.sh"
    script.write_text(f"""#!/bin/bash
#SBATCH -N1 -n1 -w node1 -o {user_dir}/out.txt --requeue-on-failure=1 --restarts-in-place=0
srun env AUTOPAR_REQUEUE_ON_FAILURE=1000 {LAUNCH} -- {program}
""")
    script.chmod(0o755)
    job = user_sbatch(str(script), cwd=user_dir)
    try:
        deadline = time.time() + 90
        requeues = []
        while time.time() < deadline and not requeues:
            requeues = [e for e in root_events(job) if e["kind"] == "requeue"]
            time.sleep(0.5)
        assert requeues, f"job {job} was not requeued: {root_events(job)}"
        assert " of=5 " in f" {requeues[0]['detail']} ", requeues[0]["detail"]
    finally:
        cancel(job)
