"""`autopar heartbeat`:
a training loop written in shell reports its steps with the command. Each heartbeat comes from a
process that exits right away; autopard takes the rank's Slurm task (the shell below
autopar-launch) as the rank's process, so a shell that stops making progress is a hang: detected,
its stack captured, the job requeued; the next run finishes. (It cannot restart in place: the
other ranks do not wait for rank 1, so the job's progress stops only when they have ended,
and an ended program cannot be restarted: autopard hands the hang to rank 1's launcher, which
finds the others gone and asks its autopard, whose requeue path takes over.)

Needs the cluster as test_requeue_faults.py does (autopard on every node). About 30 s.
"""
import os
import subprocess

from conftest import run, wait_job
from test_requeue_faults import (CLI, LAUNCH, events, kinds, need_autopard,  # noqa: F401
                                 restarts, submit)

TRAIN_SH = """#!/bin/bash
# One rank of a shell "training": a heartbeat per step. In the first run rank 1 stops itself
# (SIGSTOP) at step 6: a hang.
run=${SLURM_RESTART_COUNT:-0}
for step in $(seq 0 12); do
  reply=$(CLI heartbeat --step "$step") || exit 3
  echo "train: rank $SLURM_PROCID step $step run $run $reply"
  if [ "$run" = 0 ] && [ "$SLURM_PROCID" = 1 ] && [ "$step" = 6 ]; then kill -STOP $$; fi
  sleep 0.3
done
echo "train: rank $SLURM_PROCID done run $run"
"""


def test_shell_heartbeats_detect_a_hang(tmp_path):
    work = tmp_path / "hb"
    work.mkdir(parents=True)
    work.chmod(0o1777)
    train = work / "train.sh"
    train.write_text(TRAIN_SH.replace("CLI", str(CLI)))
    train.chmod(0o755)
    job = submit(work, opts="--requeue-on-failure=1 --heartbeat-timeout=2",
                 program=f"{train}")
    try:
        state = wait_job(job, timeout=180)
    finally:
        # The stopped shell of the first run is killed by the requeue; never leave one behind.
        run(f"pkill -KILL -f '{train}' || true")
    out = (work / "out.txt").read_text()
    assert state == "COMPLETED", out[-3000:]
    assert restarts(job) == 1, out[-3000:]
    assert out.count("done run 1") == 4, out[-3000:]  # every rank of the second run finished
    evs = events(job, "heartbeat_missed", "requeue")
    missed = kinds(evs, "heartbeat_missed")
    assert len(missed) >= 1 and "suspects: rank 1" in missed[0]["detail"], evs
    # The stack of rank 1 is its task's shell, stopped (the heartbeat commands were long gone).
    stacks = [e for e in kinds(evs, "stack") if e["rank"] == 1]
    assert stacks and 'state="T (stopped)"' in stacks[0]["detail"], kinds(evs, "stack")
    assert any("class=hang" in e["detail"] for e in kinds(evs, "failure")), evs
    assert len(kinds(evs, "requeue")) == 1, evs
    recovery = kinds(evs, "recovery")
    assert len(recovery) == 1 and recovery[0]["fields"]["action"] == "requeue-path", evs
    assert "cannot be reached" in recovery[0]["detail"], recovery


def test_heartbeat_command_rejects_bad_input(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "AUTOPAR_"))}
    cases = [
        ([], 2, "autopar heartbeat: --step: required\n"),
        (["--step", "x"], 2, "autopar heartbeat: --step: invalid value 'x' (expected an integer >= 0)\n"),
        (["--step", "3"], 2, "autopar heartbeat: SLURM_JOB_ID is not set: not inside a Slurm job\n"),
    ]
    for args, rc, err in cases:
        p = subprocess.run([str(CLI), "heartbeat", *args], env=env, capture_output=True,
                           text=True, timeout=30)
        assert (p.returncode, p.stderr) == (rc, err), (args, p.returncode, p.stderr)
