"""Attack: `recover` takes the job's word for which nodes are lost.

The second account (autopar-test2) runs a 2-node job (node1, node2) with --requeue-on-failure, so
that a node loss reaches the requeue path, where autopard (root) marks the lost nodes DOWN through
libslurm. A task of that job sends node1's autopard a recover request (programs/claim_lost.py:
class=node-loss lost=NODES, as rank 0's launcher does when other launchers are gone) naming nodes
that are not lost: nodes outside the job's allocation (node3,node4, and the hostlist node[3-4]),
where another user's (root's) jobs run, and a node of the job's own that is alive (node2).

What must hold afterwards (10 s later):
- no node of the cluster is DOWN, DRAINED or FAILED (sinfo);
- root's jobs on node3 and node4 still run;
- the job's timeline (`autopar events JOB`, as the user) records each refused claim: a
  `claim_refused` event whose detail names the node and gives a reason; a claim of 65,535 names
  (node[3-4],nodex[1-65533]) is one such event, charged to the job once, not one row a name.

The same claim of node2 made while the user holds node2's slurmd accept queue full (every probe
of it then times out as a dead node's would): the job may lose node2 for itself, but root marks it
DOWN only on evidence a user cannot cause (LossEvidence), so node2 and root's job there go on.

At teardown every job of the test is cancelled and any node left DOWN/DRAINED is resumed, so the
cluster stays usable for what runs next. About 1 minute.
"""
import re
import time

import pytest

from conftest import (PROGRAMS, PYTHON, cancel, job_state, need_binaries, root_sbatch, run,
                      user_events, user_sbatch, wait_running)

NODES = ["node1", "node2", "node3", "node4"]
BAD = re.compile(r"down|drain|fail", re.I)


def node_states() -> dict:
    p = run(["sinfo", "-N", "-h", "-o", "%N %T"], check=True)
    return dict(line.split() for line in p.stdout.splitlines() if line.strip())


def resume_bad_nodes():
    for node, state in node_states().items():
        if BAD.search(state):
            run(["scontrol", "update", f"nodename={node}", "state=resume"])
    deadline = time.time() + 30
    while time.time() < deadline and any(BAD.search(s) for s in node_states().values()):
        time.sleep(0.5)


@pytest.fixture
def cluster_jobs():
    """Job ids to cancel at the end; nodes left DOWN/DRAINED are resumed then."""
    need_binaries()
    bad = {n: s for n, s in node_states().items() if BAD.search(s)}
    if bad:
        pytest.fail(f"nodes are not usable before the attack: {bad}")
    jobs = []
    yield jobs
    cancel(*jobs)
    resume_bad_nodes()


def wait_for(pattern: str, path, timeout: float):
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = path.read_text() if path.exists() else ""
        m = re.search(pattern, text, re.M)
        if m:
            return m
        time.sleep(0.3)
    raise AssertionError(f"no {pattern!r} in {path} within {timeout}s:\n"
                         f"{path.read_text() if path.exists() else '(no file)'}")


CLAIMS = {
    "outside-allocation": ("node3,node4", ["node3", "node4"]),
    "outside-allocation-hostlist": ("node[3-4]", ["node3", "node4"]),
    "own-node-alive": ("node2", ["node2"]),
    # 65,535 names (the most a hostlist may hold): one claim_refused row (was one per name,
    # after a quadratic de-duplication).
    "a-list-of-65535-names": ("node[3-4],nodex[1-65533]", ["node3", "node4"]),
}


def submit_claim(user_dir, claim_args: str):
    """The second user's job on node1 and node2 (--requeue-on-failure=1) whose first run makes
    the claim: programs/claim_lost.py CLAIM_ARGS on node1, then waits; a requeued run only says
    so. Returns (the job id, its output file)."""
    out = user_dir / "out.txt"
    script = user_dir / "job.sh"
    script.write_text(
        "#!/bin/bash\n"
        "if [[ ${SLURM_RESTART_COUNT:-0} -gt 0 ]]; then echo REQUEUED-RUN; exit 0; fi\n"
        f"srun -N1 -n1 -w node1 {PYTHON} {PROGRAMS / 'claim_lost.py'} {claim_args}\n"
        "sleep 300\n")
    job = user_sbatch("-N2", "-w", "node1,node2", "--requeue-on-failure=1", "-t", "5",
                      "--open-mode=append", f"--chdir={user_dir}", "-o", str(out), str(script))
    return job, out


@pytest.mark.parametrize("claim", list(CLAIMS))
def test_lost_node_claim_is_checked(claim, user_dir, cluster_jobs):
    lost, named = CLAIMS[claim]
    # Another user's work on the nodes outside the job (root's: the account autopard trusts most).
    bystanders = [root_sbatch("-w", n, "-n1", "-o", "/dev/null", "-t", "5", "--wrap", "sleep 300")
                  for n in ("node3", "node4")]
    cluster_jobs += bystanders
    for b in bystanders:
        wait_running(b)
    job, out = submit_claim(user_dir, f"'{lost}'")
    cluster_jobs.append(job)
    try:
        reply = wait_for(r"^REPLY (.*)$", out, timeout=60).group(1)
    except AssertionError as no_reply:  # e.g. the job was requeued under the claiming task
        reply = f"none: {no_reply}"
    time.sleep(10)  # what autopard decided has been carried out by now (requeue, node DOWN)

    states = node_states()
    bad = {n: s for n, s in states.items() if BAD.search(s)}
    assert not bad, (f"after {job}'s claim lost={lost} nodes went out of service: {bad} "
                     f"(autopard's reply: {reply})")
    for b, node in zip(bystanders, ("node3", "node4")):
        state = job_state(b)
        assert state == "RUNNING", \
            f"root's job {b} on {node} is {state} after the claim lost={lost}"

    # autopard's own record of what it did as root: no node marked DOWN for this claim.
    evs, _ = user_events(job, "node1")
    downed = [e["detail"] for e in evs if e["kind"] == "node_down"]
    assert not downed, f"autopard marked nodes DOWN on {job}'s claim lost={lost}: {downed}"
    assert not reply.startswith("none"), reply
    deadline = time.time() + 10
    while True:
        evs, _ = user_events(job, "node1")
        refused = [e for e in evs if e["kind"] == "claim_refused"]
        missing = [n for n in named
                   if not any(n in e["detail"] and "reason" in e["detail"] for e in refused)]
        if not missing or time.time() > deadline:
            break
        time.sleep(0.5)
    assert not missing, (f"no claim_refused event (with a reason) for {missing} in job {job}'s "
                         f"timeline; its events: {[(e['kind'], e['detail']) for e in evs]}")
    if claim == "a-list-of-65535-names":
        assert len(refused) == 1 and "count=65535" in refused[0]["detail"], \
            [e["detail"][:300] for e in refused]


def slurmd_address(node: str) -> str:
    """ADDR:PORT of `node`'s slurmd, as slurmctld knows it."""
    text = run(["scontrol", "show", "node", node], check=True).stdout
    addr = re.search(r"\bNodeAddr=(\S+)", text).group(1)
    port = re.search(r"\bPort=(\d+)", text).group(1)
    return f"{addr}:{port}"


def test_a_slurmd_made_slow_to_answer_is_not_marked_down(user_dir, cluster_jobs):
    """Attack: the node-loss claim of a node of the job's own that is alive, made while the user
    holds that node's slurmd accept queue full (programs/claim_lost.py's flood), so that every
    probe of it times out as a dead node's does. The job's own decision may take the node for lost
    (its requeue leaves it out: the job's own loss); root marks it DOWN only on evidence a user
    cannot fake (slurmctld finds it not responding, or nothing listens), so node2 and root's job
    there go on. Before LossEvidence one failed 1 s connect was enough for root to mark it DOWN."""
    bystander = root_sbatch("-w", "node2", "-n1", "-o", "/dev/null", "-t", "5", "--wrap", "sleep 300")
    cluster_jobs.append(bystander)
    wait_running(bystander)
    job, out = submit_claim(user_dir, f"node2 {slurmd_address('node2')}")
    cluster_jobs.append(job)
    wait_for(r"^FLOODED \d+$", out, timeout=60)
    # autopard's verdict on the claim, as root acted on it: a node_down event that says why not.
    deadline = time.time() + 60
    downs = []
    while not downs and time.time() < deadline:
        evs, _ = user_events(job, "node1")
        downs = [e["detail"] for e in evs if e["kind"] == "node_down"]
        time.sleep(0.5)
    assert downs, (f"no node_down verdict in {job}'s timeline: the flooded probe did not reach "
                   f"the requeue path; events: {[(e['kind'], e['detail'][:200]) for e in evs]}; "
                   f"output: {out.read_text()[-2000:]}")
    assert len(downs) == 1 and "node=node2" in downs[0] and "not marked" in downs[0], downs
    # The probe really timed out (the flood held the queue), not "its slurmd answers again".
    assert "did not answer within" in downs[0], downs
    time.sleep(3)
    bad = {n: s for n, s in node_states().items() if BAD.search(s)}
    assert not bad, f"after the flooded claim nodes went out of service: {bad} ({downs[0]})"
    assert job_state(bystander) == "RUNNING", f"root's job {bystander} on node2 is {job_state(bystander)}"
