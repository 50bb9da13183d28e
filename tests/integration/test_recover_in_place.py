"""Recovery in place on the local cluster, end to end: the deterministic PyTorch DDP
training of test_requeue_faults.py (gloo, 2 nodes x 2 ranks, checkpoints every 5 steps), submitted
with --requeue-on-failure=3 only (in-place restarts are the default then). After each fault every
rank's program is stopped and started again inside the same job (Restarts=0, the same nodes), it
resumes from the latest COMPLETE checkpoint, and the final model is bit for bit the uninterrupted
run's. The timeline tells each recovery: failure, recovery (the decision), restarted (its phases),
restored (per rank), first_step. A lost node is replaced by a spare (--spare-nodes) the same
way; under a busy queue (another user's jobs waiting for the nodes) none of it hands the nodes over.

Needs the cluster as test_requeue_faults.py does (autopard on every node). About 3 min.
"""
import os
import re
import signal
import time
from pathlib import Path

import pytest

from conftest import PYTHON, job_state, metric, metric_samples, run, scrape, slurm_conf, wait_job
from test_requeue_faults import (assert_resumed, end_with_node_lost, events,  # noqa: F401
                                 first_of_two_failures, kinds, need_autopard, node_of_rank, rank_pid,
                                 record, recovery, reference, restarts, same_model, show_job,
                                 steps_logged, stop_rank_mid_training, stop_rank_until_the_end,
                                 submit, train_cmd, wait_step)

OPTS = "--requeue-on-failure=3 --heartbeat-timeout=20"


def node_list(job: str) -> str:
    return re.search(r"\bNodeList=(\S+)", show_job(job)).group(1)


def assert_fresh_rendezvous(work, evs):
    """Each restarted generation ran with the port of its `restarted` event, none the one before."""
    ports = {}
    for m in re.finditer(r"train: rank \d+ step \d+ time [\d.]+ run (\d+) port (\d+)",
                         (work / "out.txt").read_text()):
        ports.setdefault(int(m.group(1)), set()).add(m.group(2))
    restarted = kinds(evs, "restarted")
    assert len(ports) == len(restarted) + 1 and all(len(p) == 1 for p in ports.values()), ports
    for e in restarted:
        g = int(e["fields"]["generation"])
        assert ports[g] == {e["fields"]["port"]} and ports[g] != ports[g - 1], (ports, e)


def assert_recovered_in_place(job, work, evs, generations):
    """Every recovery of the job was in place, told in the timeline with its phases, and every
    restarted program resumed the checkpoint its rank restored (the programs' own lines)."""
    assert restarts(job) == 0, show_job(job)
    assert not kinds(evs, "requeue"), kinds(evs, "requeue")
    decisions = kinds(evs, "recovery")
    assert [e["fields"]["action"] for e in decisions] == ["restart-in-place"] * generations, decisions
    restarted = kinds(evs, "restarted")
    assert [e["fields"]["generation"] for e in restarted] == \
        [str(g) for g in range(1, generations + 1)], restarted
    for e in restarted:
        for phase in ("since_failure_s", "stop_s", "decide_s", "rendezvous_s"):
            assert float(e["fields"][phase]) >= 0, e
    first = kinds(evs, "first_step")
    assert [e["fields"]["generation"] for e in first] == \
        [str(g) for g in range(1, generations + 1)], first
    assert all(float(e["fields"]["since_failure_s"]) > 0 for e in first), first
    # Every rank restored the checkpoint before its program started again, from the intact copy
    # on its node: nothing fetched from the upload.
    restored = kinds(evs, "restored")
    assert {(e["fields"]["generation"], e["rank"]) for e in restored} == \
        {(str(g), r) for g in range(1, generations + 1) for r in range(4)}, restored
    assert all(int(e["fields"]["bytes_local"]) > 0 and e["fields"]["bytes_fetched"] == "0"
               for e in restored), restored
    for g in range(1, generations + 1):
        step = assert_resumed(work, g, evs)
        assert {e["step"] for e in restored if e["fields"]["generation"] == str(g)} == {step}, restored


NODES = ["node1", "node2", "node3", "node4"]


def test_killed_rank_restarts_in_place(tmp_path, reference):
    work = tmp_path / "kill"
    before = {n: metric_samples(scrape(n)) for n in NODES}
    job = submit(work, opts=OPTS, program=train_cmd(work), launch_opts="")  # warm: asserted below
    wait_step(work, 0, 22)
    nodes = node_list(job)
    fault = time.time()
    os.kill(rank_pid(job, 1), signal.SIGKILL)
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert node_list(job) == nodes
    assert same_model(work / "final.pt", reference), "the model differs from an uninterrupted run"
    evs = events(job, "first_step", "finished")
    assert_recovered_in_place(job, work, evs, 1)
    assert_fresh_rendezvous(work, evs)
    failure = kinds(evs, "failure")
    assert len(failure) == 1 and failure[0]["fields"]["class"] == "rank-crash", failure
    assert failure[0]["fields"]["signal"] == "9" and failure[0]["rank"] == 1, failure
    # Every rank's new program was the interpreter its launcher had prepared (launcher/prewarm.h),
    # "warming" when it was still importing; none is left once the job has ended.
    started = {e["fields"]["interpreter"] for e in kinds(evs, "restored")}
    assert started <= {"warm", "warming"}, kinds(evs, "restored")
    assert not warm_interpreters_of(job)
    took, lost = recovery(work, fault, 0)
    record("crashed rank (kill -9), in place", recovery_s=round(took, 1), steps_lost=lost,
           interpreters=sorted(started))
    assert took < 60, f"resumed {took:.1f}s after the fault"
    assert_metrics_tell_the_job(job, before, events(job, "ckpt_complete", "progress"))


def assert_metrics_tell_the_job(job, before, evs):
    """Every node's Prometheus metrics (docs/metrics.md; promtool-checked by scrape) grew by what
    its journal says the job did there: commits, uploads, the crash and its restart in place,
    heartbeats; rank 0's node shows the job's step time from its last progress window."""
    after = {n: metric_samples(scrape(n)) for n in NODES}

    def grew(node, name, **labels):
        return metric(after[node], name, **labels) - metric(before[node], name, **labels)

    for node in NODES:
        mine = [e for e in evs if e["node"] == node]
        for kind, name in (("ckpt_committed", "autopard_checkpoint_commits_total"),
                           ("ckpt_uploaded", "autopard_checkpoint_uploads_total")):
            assert grew(node, name) == len(kinds(mine, kind)), (node, name, kinds(mine, kind))
        assert grew(node, "autopard_upload_duration_seconds_count") == len(kinds(mine, "ckpt_uploaded"))
        assert (grew(node, "autopard_upload_bytes_total") > 0) == bool(kinds(mine, "ckpt_uploaded")), node
    assert sum(grew(n, "autopard_failures_total", **{"class": "rank-crash"}) for n in NODES) == 1
    assert sum(grew(n, "autopard_restarts_in_place_total", **{"class": "rank-crash"}) for n in NODES) == 1
    assert sum(grew(n, "autopard_requeues_total", **{"class": c})
               for n in NODES for c in ("rank-crash", "hang", "node-loss")) == 0
    progress = kinds(evs, "progress")
    rank0 = progress[-1]["node"]
    assert grew(rank0, "autopard_heartbeats_total") > 0
    # The last window journalled is what the gauges hold (one more may have come since: retry).
    step_s = metric(after[rank0], "autopard_job_step_seconds", job=job)
    assert step_s in [float(e["fields"]["step_s"]) for e in progress], (step_s, progress[-3:])
    assert metric(after[rank0], "autopard_job_step", job=job) in [e["step"] for e in progress]


def warm_interpreters_of(job: str):
    """The PIDs of the job's waiting warm interpreters (their name is autopar-warm)."""
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "autopar-warm" and \
                    f"SLURM_JOB_ID={job}\0".encode() in (comm.parent / "environ").read_bytes():
                found.append(int(comm.parent.name))
        except OSError:
            continue
    return found


def test_stopped_rank_restarts_in_place(tmp_path, reference, waiting):
    """A hang, while another user's jobs wait for the training's nodes: they do not get them."""
    timeout = 10
    work, job, fault = stop_rank_mid_training(
        tmp_path, "stop", f"--requeue-on-failure=3 --heartbeat-timeout={timeout}",
        before_fault=lambda job: fill_queue(waiting, "-w", node_list(job)))
    assert same_model(work / "final.pt", reference)
    evs = events(job, "first_step", "finished")
    assert_recovered_in_place(job, work, evs, 1)
    assert_none_started_before(waiting, kinds(evs, "finished")[0]["time"])
    stacks = [e for e in kinds(evs, "stack") if e["rank"] == 1]
    assert stacks and 'state="T (stopped)"' in stacks[0]["detail"], kinds(evs, "stack")
    # autopard told the launchers (after capturing the stacks); the decision is about a hang.
    told = kinds(evs, "hang_stop")
    assert told and all(e["fields"]["result"] == "told" for e in told), told
    assert min(e["time"] for e in told) > stacks[0]["time"]
    assert kinds(evs, "failure")[0]["fields"]["class"] == "hang", kinds(evs, "failure")
    took, lost = recovery(work, fault, 0)
    record("hang (SIGSTOP), in place", recovery_s=round(took, 1), steps_lost=lost,
           heartbeat_timeout_s=timeout)


def test_two_failures_in_place_on_different_nodes(tmp_path, reference):
    work = tmp_path / "two"
    job = submit(work, opts=OPTS, program=train_cmd(work))
    _, other = first_of_two_failures(work, job)
    os.kill(rank_pid(job, other), signal.SIGKILL)
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert same_model(work / "final.pt", reference)
    evs = events(job, "finished")
    assert_recovered_in_place(job, work, evs, 2)
    assert_fresh_rendezvous(work, evs)
    decisions = kinds(evs, "recovery")
    assert ["attempt=1 of=3" in e["detail"] for e in decisions] == [True, False], decisions
    assert "attempt=2 of=3" in decisions[1]["detail"], decisions
    assert len({e["node"] for e in kinds(evs, "rank_exit")}) == 2, kinds(evs, "rank_exit")


def test_a_hang_of_a_warm_started_program_restarts_in_place(tmp_path, reference):
    """The second generation's programs are the interpreters prepared during the first: a hang
    of one of them is still found (autopard reads the generation from /proc/PID/environ, which
    shows what the interpreter was started with) and handed to its launcher."""
    work = tmp_path / "warmhang"
    job = submit(work, opts="--requeue-on-failure=3 --heartbeat-timeout=10",
                 program=train_cmd(work), launch_opts="")
    wait_step(work, 0, 22)
    os.kill(rank_pid(job, 0), signal.SIGKILL)
    wait_step(work, 1, 0, timeout=120)
    resumed = min(s for r, _, s, _ in steps_logged(work) if r == 1)
    wait_step(work, 1, resumed + 20)  # past --prewarm-after: generation 2 is being prepared
    stop_rank_until_the_end(work, job, 1)
    assert same_model(work / "final.pt", reference)
    evs = events(job, "finished")
    assert_recovered_in_place(job, work, evs, 2)
    assert [e["fields"]["class"] for e in kinds(evs, "failure")] == ["rank-crash", "hang"], \
        kinds(evs, "failure")
    told = kinds(evs, "hang_stop")
    assert told and all(e["fields"]["result"] == "told" and e["fields"]["generation"] == "1"
                        for e in told), told
    assert {e["fields"]["interpreter"] for e in kinds(evs, "restored")} <= {"warm", "warming"}, \
        kinds(evs, "restored")


def test_a_lost_node_is_replaced_by_a_spare_in_place(tmp_path, reference, waiting):
    """--spare-nodes=1 on 3 nodes: the program runs on 2 and the third waits in reserve. The node
    of ranks 2-3 dies as a whole (kill-node.sh) while another user's jobs wait for 3 nodes; the
    spare takes its place, with no requeue (the job is --no-kill through the plugin), and fetches
    its ranks' checkpoint from the upload while the node that stayed restores its own copy; the
    waiting jobs do not get the nodes before the training ends."""
    work = tmp_path / "spare"
    job = submit(work, opts=OPTS + " --spare-nodes=1", program=train_cmd(work), nodes=3,
                 launch_opts="")
    wait_step(work, 0, 22)
    hosts = run(["scontrol", "show", "hostnames", node_list(job)], check=True).stdout.split()
    node = node_of_rank(job, 2)
    assert node == hosts[1] and node_of_rank(job, 0) == hosts[0], (node, hosts)
    # A busy cluster: another user's jobs want as many nodes as the training holds.
    fill_queue(waiting, "-N3")
    state, fault = end_with_node_lost(job, node, 300)
    assert state == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert same_model(work / "final.pt", reference), "the model differs from an uninterrupted run"
    assert restarts(job) == 0, show_job(job)
    assert "held in reserve" in (work / "out.txt").read_text()
    evs = events(job, "first_step", "finished")
    assert not kinds(evs, "requeue"), kinds(evs, "requeue")
    lost = [e for e in kinds(evs, "failure") if e["fields"].get("class") == "node-loss"]
    assert lost and lost[-1]["fields"]["lost"] == node and lost[-1]["fields"]["spares"] == "1", \
        kinds(evs, "failure")
    decisions = kinds(evs, "recovery")
    assert [e["fields"]["action"] for e in decisions] == ["restart-in-place"], decisions
    assert "spare node" in decisions[0]["fields"]["reason"], decisions
    restarted = kinds(evs, "restarted")
    assert len(restarted) == 1 and restarted[0]["fields"]["nodes"] == f"{hosts[0]},{hosts[2]}", restarted
    restored = {e["rank"]: e for e in kinds(evs, "restored")}
    assert sorted(restored) == [0, 1, 2, 3], restored
    for r in (0, 1):  # on the node that stayed: its own copy
        assert restored[r]["node"] == hosts[0] and restored[r]["fields"]["bytes_fetched"] == "0", restored[r]
    for r in (2, 3):  # on the spare: fetched from the upload, in the interpreter it had prepared
        assert restored[r]["node"] == hosts[2] and int(restored[r]["fields"]["bytes_fetched"]) > 0, restored[r]
        assert restored[r]["fields"]["interpreter"] in ("warm", "warming"), restored[r]
    assert {e["step"] for e in restored.values()} == {assert_resumed(work, 1, evs)}, restored
    assert [e["fields"]["generation"] for e in kinds(evs, "first_step")] == ["1"], kinds(evs, "first_step")
    assert_fresh_rendezvous(work, evs)
    assert_none_started_before(waiting, kinds(evs, "finished")[0]["time"])
    took, steps = recovery(work, fault, 0)
    record("node loss with a spare, in place", recovery_s=round(took, 1), steps_lost=steps)
    assert took < 60, f"resumed {took:.1f}s after the fault"


def test_exit_at_start_restarts_once_then_stops(tmp_path):
    """A program that exits 1 at start is restarted in place once; the same failure again goes
    to the requeue path, which stops the job (no requeue, no loop)."""
    work = tmp_path / "early"
    job = submit(work, opts="--requeue-on-failure=3",
                 program=f"{PYTHON} -c 'import sys; sys.exit(1)'")
    deadline = time.time() + 120
    while time.time() < deadline and not re.search(r"JobState=(CANCELLED|FAILED)", show_job(job)):
        time.sleep(0.5)
    text = show_job(job)
    assert re.search(r"JobState=(CANCELLED|FAILED)", text), text
    assert restarts(job) == 0, text
    assert "same error (rank-crash exit=1) 2 times" in text, text
    evs = events(job, "stopped")
    assert [e["fields"]["action"] for e in kinds(evs, "recovery")] == \
        ["restart-in-place", "requeue-path"], kinds(evs, "recovery")
    assert len(kinds(evs, "stopped")) == 1 and not kinds(evs, "requeue"), evs


def test_spent_in_place_budget_hands_over_to_the_requeue(tmp_path, reference):
    """--restarts-in-place=1: the first crash restarts in place, the second is requeued (the
    requeue's run may restart in place again), and the job still ends with the same model."""
    work = tmp_path / "budget"
    job = submit(work, opts="--requeue-on-failure=3 --restarts-in-place=1 --heartbeat-timeout=20",
                 program=train_cmd(work))
    wait_step(work, 0, 12)
    os.kill(rank_pid(job, 1), signal.SIGKILL)
    wait_step(work, 1, 18, timeout=120)
    os.kill(rank_pid(job, 2), signal.SIGKILL)
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert restarts(job) == 1
    assert same_model(work / "final.pt", reference)
    evs = events(job, "requeue", "finished")
    assert [e["fields"]["action"] for e in kinds(evs, "recovery")] == \
        ["restart-in-place", "requeue-path"], kinds(evs, "recovery")
    assert "in-place restarts of --restarts-in-place=1 are used" in \
        kinds(evs, "recovery")[1]["detail"]
    requeue = kinds(evs, "requeue")
    assert len(requeue) == 1 and "attempt=1 of=3" in requeue[0]["detail"], requeue


@pytest.fixture
def waiting():
    """Jobs of another user (fill_queue), cancelled when the test ends."""
    ids = []
    yield ids
    for w in ids:
        run(["scancel", w])


def fill_queue(waiting, *sbatch_args):
    """Three jobs of another user, pending behind the training for its nodes."""
    for _ in range(3):
        p = run(["runuser", "-u", "autopar-test2", "--", "env", f"SLURM_CONF={slurm_conf()}",
                 "sbatch", "--parsable", "--exclusive", *sbatch_args, "-o", "/dev/null",
                 "--wrap", "sleep 5"],
                check=True)
        waiting.append(p.stdout.strip())
    assert all(job_state(w) == "PENDING" for w in waiting)


def assert_none_started_before(waiting, finished: float):
    """None of the waiting jobs got the nodes before the training ended."""
    for w in waiting:
        text = run(["scontrol", "show", "job", w], check=True).stdout
        if re.search(r"JobState=PENDING", text):
            continue
        start = re.search(r"StartTime=(\S+)", text).group(1)
        assert time.mktime(time.strptime(start, "%Y-%m-%dT%H:%M:%S")) >= int(finished) - 1, \
            (w, start, finished)


def test_a_full_queue_does_not_take_the_nodes_of_a_job_that_recovers_in_place(tmp_path, reference,
                                                                                waiting):
    """Another user's jobs wait for the nodes the training holds; a crash does not hand them over:
    the job recovers in place and finishes first (the requeue path under the same queue is in
    bench/recovery/recovery_bench.py)."""
    work = tmp_path / "busy"
    job = submit(work, opts=OPTS, program=train_cmd(work))
    wait_step(work, 0, 12)
    nodes = node_list(job)
    fill_queue(waiting, "-w", nodes)
    os.kill(rank_pid(job, 1), signal.SIGKILL)
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert node_list(job) == nodes
    assert same_model(work / "final.pt", reference)
    evs = events(job, "first_step", "finished")
    assert_recovered_in_place(job, work, evs, 1)
    assert_none_started_before(waiting, kinds(evs, "finished")[0]["time"])
