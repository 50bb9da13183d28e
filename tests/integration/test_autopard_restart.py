"""autopard restarting under a running job, on the local cluster: the training of
test_requeue_faults.py (gloo, 2 nodes x 2 ranks, checkpoints every 5 steps).

* Both nodes' autopards are SIGKILLed mid-run (a crash; an upgrade stops them with SIGTERM) with
  uploads pending (the job uploads to an S3 server of this test's own, stopped first), and a rank
  is stopped (SIGSTOP) while they are down; then the S3 server and the autopards start again: the
  pending uploads complete, and since no heartbeat reaches the daemons any more, only the watch
  each resumes from its state database can find the hang. It does (watch_resumed, then
  heartbeat_missed within the first-step allowance), the job is requeued, resumes from its last
  complete checkpoint and ends with the model of an uninterrupted run. The ranks' commits during
  the outage wait for autopard (the clients retry) instead of failing the program, and every step
  committed is complete in the store.
* One node's autopard stays down: a rank on that node hangs, and the other node's autopard finds
  it (every rank stops at the next collective), so the hang is not missed; the job recovers in
  place once the daemon is back (the restarted rank's restore waits for it).
* SIGHUP reloads what it can (log_level here) and names what needs a restart, and a
  configuration that does not parse changes nothing; autopard keeps serving throughout.
* After the job, its node-local checkpoint directories are removed (local_ckpt_cleanup=all,
  autopard.conf's default, set on the job's nodes for this test: the test cluster keeps them).

Needs the cluster with autopard on every node (as test_requeue_faults.py). About 3 min.
"""
import os
import re
import signal
import time
import uuid
from pathlib import Path

from conftest import cluster_dir, cluster_script, pending_uploads, run, s3rver_script, wait_job
from test_requeue_faults import (events, kinds, need_autopard, node_of_rank, rank_pid,  # noqa: F401
                                 reference, restarts, same_model, show_job, steps_logged, submit,
                                 train_cmd, wait_step)


def autopard(node: str, *args, check=True):
    return cluster_script("node-autopard.sh", node, *args, timeout=60, check=check)


def job_nodes(job: str):
    text = run(["scontrol", "show", "hostnames",
                re.search(r"\bNodeList=(\S+)", show_job(job)).group(1)], check=True).stdout
    return text.split()


def set_conf(node: str, key: str, value: str):
    """The node's autopard.conf with KEY = VALUE (the test restores the cluster's file after)."""
    conf = cluster_dir() / "etc" / f"autopard-{node}.conf"
    text = conf.read_text()
    line = f"{key} = {value}"
    text, n = re.subn(rf"^{key} = .*$", line, text, flags=re.M)
    conf.write_text(text if n else text + line + "\n")


def local_step_dirs(work: Path):
    return sorted(p for p in (work / "local").glob("*/step-*"))


class S3:
    """An S3 server (s3rver) of this test's own, to stop while uploads are under way."""
    PORT = int(os.environ.get("AUTOPAR_S3_RESTART_PORT", "18953"))
    BUCKET = "autopar-restart"

    def __init__(self, state: Path):
        self.state = state
        self.endpoint = f"http://127.0.0.1:{self.PORT}"

    def __call__(self, action: str):
        s3rver_script(action, self.state, self.PORT, self.BUCKET)

    def objects(self):
        return [p for p in (self.state / "data").rglob("*") if p.is_file()]


def test_restarted_autopards_resume_the_watch_and_the_uploads(tmp_path, reference):
    work = tmp_path / "restart"
    s3 = S3(tmp_path / "s3")
    nodes = ["node1", "node2"]
    confs = {node: cluster_dir() / "etc" / f"autopard-{node}.conf" for node in nodes}
    saved = {node: conf.read_text() for node, conf in confs.items()}
    s3("start")
    try:
        for node in nodes:  # the job's uploads go to this test's S3 server
            set_conf(node, "s3_endpoint", s3.endpoint)
            autopard(node, "stop", "TERM")
            autopard(node, "start")
        job = submit(work, opts="-w node[1-2] --restarts-in-place=0 --requeue-on-failure=3"
                     " --heartbeat-timeout=8", program=train_cmd(work),
                     upload=f"s3://{S3.BUCKET}/restart-{uuid.uuid4().hex[:8]}")
        wait_step(work, 0, 15)
        s3("stop")  # from now on every upload waits (connection refused, retried)
        wait_step(work, 0, 21)  # step 19 committed and not uploaded
        for node in nodes:
            autopard(node, "stop", "KILL")
        down = time.time()
        pending = {node: pending_uploads(cluster_dir() / "autopard" / node / "autopard.db", job)
                   for node in nodes}
        assert all(pending.values()), pending
        os.kill(rank_pid(job, 1), signal.SIGSTOP)  # hangs while no autopard watches it
        time.sleep(3)
        s3("start")
        for node in nodes:
            set_conf(node, "local_ckpt_cleanup", "all")  # the default of autopard.conf
            autopard(node, "start")
        run_to_the_end(job, work, nodes, down, reference)
        assert s3.objects(), "the store lost its steps"
    finally:
        for node in nodes:  # the test cluster's settings back, for the tests after this one
            confs[node].write_text(saved[node])
            if autopard(node, "pid", check=False).returncode == 0:
                autopard(node, "stop", "TERM")
            autopard(node, "start")
        s3("stop")


def run_to_the_end(job, work, nodes, down, reference):
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert restarts(job) == 1, show_job(job)
    assert same_model(work / "final.pt", reference), "the model differs from an uninterrupted run"
    evs = events(job, "watch_resumed", "requeue")
    resumed = kinds(evs, "watch_resumed")
    assert sorted(e["node"] for e in resumed) == sorted(nodes), resumed
    assert all(e["detail"] == "ranks=2" for e in resumed), resumed
    missed = [e for e in kinds(evs, "heartbeat_missed") if e["time"] > down]
    assert missed, evs
    # The first-step allowance (3 x 8 s) from the last heartbeat before the outage, plus a tick.
    assert min(e["time"] for e in missed) - down < 3 * 8 + 5, missed
    assert any("class=hang" in e["detail"] for e in kinds(evs, "failure")), evs
    # Every step the ranks committed (before, during and after the outage) is complete.
    committed = {e["step"] for e in kinds(evs, "ckpt_committed")}
    complete = {e["step"] for e in kinds(evs, "ckpt_complete")}
    assert committed and committed <= complete, (sorted(committed), sorted(complete))
    # The job ended: its node-local checkpoint directories go (every commit was uploaded).
    deadline = time.time() + 40
    while local_step_dirs(work) and time.time() < deadline:
        time.sleep(1)
    assert not local_step_dirs(work), local_step_dirs(work)
    removed = kinds(events(job, "ckpt_local_removed"), "ckpt_local_removed")
    assert sorted(e["node"] for e in removed) == sorted(nodes), removed


def test_a_hang_on_a_node_without_autopard_is_found_by_a_peer(tmp_path, reference):
    work = tmp_path / "peer"
    job = submit(work, opts="--requeue-on-failure=3 --heartbeat-timeout=8", program=train_cmd(work))
    wait_step(work, 0, 15)
    node = node_of_rank(job, 3)
    autopard(node, "stop", "TERM")
    try:
        fault = time.time()
        os.kill(rank_pid(job, 3), signal.SIGSTOP)
        # The other node's autopard finds it within the timeout and recovers in place: the
        # launchers stop every rank (the stopped one too) and start them again; the new rank 3's
        # restore waits for its autopard, which comes back now.
        time.sleep(8 + 6)
    finally:
        autopard(node, "start")
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert restarts(job) == 0, show_job(job)
    assert same_model(work / "final.pt", reference), "the model differs from an uninterrupted run"
    evs = events(job, "recovery")
    missed = [e for e in kinds(evs, "heartbeat_missed") if e["time"] > fault]
    assert missed and all(e["node"] != node for e in missed[:1]), missed
    assert missed[0]["time"] - fault < 8 + 5, missed
    assert [e["fields"]["action"] for e in kinds(evs, "recovery")][:1] == ["restart-in-place"], evs


def sighup(node: str, log: Path) -> str:
    """Sends NODE's autopard SIGHUP; returns what it logged since, once that tells of the reload
    (and half a second later: the warnings of a reload follow the line that tells of it)."""
    before = len(log.read_text())
    autopard(node, "signal", "HUP")
    deadline = time.time() + 10
    while "reload" not in log.read_text()[before:] and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)
    return log.read_text()[before:]


def test_sighup_reloads_and_names_what_needs_a_restart(tmp_path):
    node = "node4"
    conf = cluster_dir() / "etc" / f"autopard-{node}.conf"
    log = cluster_dir() / "log" / f"autopard-{node}.log"
    saved = conf.read_text()
    pid = autopard(node, "pid").stdout.strip()
    try:
        conf.write_text(saved + "log_level = notice\nrequest_timeout_s = 11\n")
        text = sighup(node, log)
        assert "autopard: reloaded " in text and "applied log_level;" in text, text
        assert "autopard: warning: reload: request_timeout_s changed but take effect only at a " \
               "restart" in text, text
        # A file that does not parse changes nothing.
        conf.write_text(saved + "log_level = loud\n")
        text = sighup(node, log)
        assert "autopard: error: reload refused, the running configuration stays: " in text, text
        assert "log_level: 'loud' is not a level" in text, text
        # Still the same daemon, still serving: a job step that needs it runs on the node.
        assert autopard(node, "pid").stdout.strip() == pid
        p = run(["srun", "-N1", "-n1", "-w", node, f"--ckpt-dir={tmp_path}/ck", "bash", "-c",
                 "echo RAN"], timeout=60)
        assert p.returncode == 0 and p.stdout.strip() == "RAN", p.stderr
    finally:
        conf.write_text(saved)
        autopard(node, "signal", "HUP")
