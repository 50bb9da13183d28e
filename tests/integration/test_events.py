"""`autopar events JOBID`: one timeline across all nodes, on the local cluster.

Every node's autopard publishes its journal per job to journal_uri (tests/cluster/start.sh: a
file:// directory the nodes share); any node's autopard merges them. A 2-node DDP job loses a rank
(kill -9) and is requeued by autopard, so both nodes record events. After the job has ended the
host's `autopar events` shows both nodes' events in time order (table and --json agree), another
user is refused, and a node killed like a power failure still contributes what it published.
"""
import json
import os
import re
import signal
import time

from conftest import PYTHON, SOURCE_DIR, cluster_dir, cluster_script, run, sbatch, wait_job
from test_requeue_faults import CLI, LAUNCH, TRAIN, node_of_rank, rank_pid, sockets, wait_step

TEST_USER = "autopar-test2"


def events_json(job, sock, *need, settled=False):
    """The merged journal as `autopar events --json` gives it through `sock`, once events of the
    kinds `need` are in it (nodes publish at most once a second). `settled`: and once two reads
    1.5 s apart agree, for a job that has ended: the last upload's events, say, may still be on
    their way when `finished` is in."""
    deadline = time.time() + 20
    last = None
    while True:
        p = run([str(CLI), "events", job, "--json", "--socket", str(sock)], check=True)
        doc = json.loads(p.stdout)
        have = {e["kind"] for e in doc["events"]}
        if time.time() > deadline:
            return doc, p.stderr
        if set(need) <= have:
            if not settled or doc["events"] == last:
                return doc, p.stderr
            last = doc["events"]
            time.sleep(1.5)
            continue
        time.sleep(0.3)


def table_rows(text):
    """(node, rank, step, kind) of each row of the table, and its summary line."""
    lines = text.rstrip("\n").split("\n")
    assert lines[0].split()[:3] == ["TIME", "(UTC)", "+SECONDS"], text
    rows = []
    for line in lines[1:-1]:
        f = line.split()
        rows.append((f[3], int(f[4]) if f[4] != "-" else -1, int(f[5]) if f[5] != "-" else -1, f[6]))
    return rows, lines[-1]


def test_events_of_all_nodes_after_the_job_ended(shared_tmp):
    work = shared_tmp
    script = f"""#!/bin/bash
#SBATCH -N2 --ntasks-per-node=1 --open-mode=append -o {work}/out.txt -e {work}/out.txt
#SBATCH --ckpt-upload=file://{work}/store --ckpt-dir={work}/local/%n
#SBATCH --requeue-on-failure=2 --heartbeat-timeout=30 --restarts-in-place=0
export PYTHONPATH={SOURCE_DIR}/python
srun --mpi=pmix {LAUNCH} -- {PYTHON} {TRAIN} --steps 16 --every 4 --step-sleep 0.25 --out {work}/final.pt
"""
    job = sbatch(script, work)
    wait_step(work, 0, 6)
    crashed_node = node_of_rank(job, 1)
    os.kill(rank_pid(job, 1), signal.SIGKILL)
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]

    # From the host, through a node that did not run the job where there is one: everything it
    # shows comes from the other nodes' published journals.
    job_nodes = set(run(["scontrol", "show", "hostnames",
                         re.search(r"\bNodeList=(\S+)", run(["scontrol", "show", "job", job],
                                                             check=True).stdout).group(1)],
                        check=True).stdout.split())
    socks = sockets()
    outsider = next((s for s in socks if s.stem.split("-")[-1] not in job_nodes | {crashed_node}),
                    socks[0])
    doc, err = events_json(job, outsider, "failure", "requeue", "ckpt_restored", "finished",
                           settled=True)
    assert err == "", err
    evs = doc["events"]
    assert doc["job_id"] == job
    times = [e["time"] for e in evs]
    assert times == sorted(times), evs
    nodes = {e["node"] for e in evs}
    assert len(nodes) >= 2 and crashed_node in nodes, nodes
    crash = [e for e in evs if e["kind"] == "rank_exit" and e["rank"] == 1
             and "signal=9" in e["detail"]]
    assert crash and crash[0]["node"] == crashed_node, evs
    requeue = [e for e in evs if e["kind"] == "requeue"]
    assert len(requeue) == 1 and "attempt=1 of=2" in requeue[0]["detail"], evs
    assert requeue[0]["time"] >= crash[0]["time"]
    assert crash[0]["fields"]["signal"] == "9" and crash[0]["time_utc"].endswith("Z")
    # The whole story, told by rank 0's launcher and autopard: submitted (at the submit time),
    # each run's step with its rendezvous, the resume after the requeue, finished.
    story = [e for e in evs if e["kind"] in ("submitted", "step_started", "rendezvous",
                                             "resumed", "finished")]
    assert [e["kind"] for e in story] == ["submitted", "step_started", "rendezvous",
                                          "step_started", "rendezvous", "resumed",
                                          "finished"], story
    assert story[0]["fields"] == {"plan": "none"} and story[0]["time"] <= story[1]["time"]
    assert [e["fields"]["restart"] for e in story if e["kind"] == "step_started"] == ["0", "1"]
    assert all(e["fields"]["ranks"] == "2" for e in story if e["kind"] == "step_started"), story
    assert all(0 < float(e["fields"]["duration_s"]) < 60 for e in story
               if e["kind"] == "rendezvous"), story
    assert story[5]["step"] >= 0 and story[5]["fields"]["from_job"] == job, story
    assert story[6]["fields"]["exit"] == "0" and story[6]["time"] > requeue[0]["time"], story

    # Published as append-only segments, one directory per node (timeline.h).
    published = sorted((cluster_dir() / "journal" / job).rglob("*.json"))
    assert published and all(re.fullmatch(r"\d{12}-\d{12}\.json", p.name) for p in published), \
        published
    assert {p.parent.name for p in published} >= {crashed_node}, published
    # Every node's autopard ran its state retention pass at start (docs/checkpoints.md).
    for log in (cluster_dir() / "log").glob("autopard-*.log"):
        assert re.search(r"^autopard: state retention: \d+ jobs pruned \(\d+ rows deleted\)",
                         log.read_text(errors="replace"), re.M), log

    # The table shows the same events in the same order.
    p = run([str(CLI), "events", job, "--all", "--socket", str(outsider)], check=True)
    rows, summary = table_rows(p.stdout)
    assert rows == [(e["node"], e["rank"], e["step"], e["kind"]) for e in evs], p.stdout
    assert summary == f"{len(evs)} events from {len(nodes)} nodes", summary
    # By default the per-rank checkpoint rows of a step fold into one (both ranks commit each).
    p = run([str(CLI), "events", job, "--socket", str(outsider)], check=True)
    lines = p.stdout.rstrip("\n").split("\n")
    assert len(lines) < len(evs) + 2, p.stdout
    assert lines[-1].startswith(f"{len(evs)} events from {len(nodes)} nodes (per-rank checkpoint "
                                "events folded into "), lines[-1]
    assert any("ckpt_committed" in line and "2 events, ranks 0-1 on 2 nodes" in line
               for line in lines), p.stdout

    # Another user is refused with one clear line.
    p = run(["runuser", "-u", TEST_USER, "--", str(CLI), "events", job, "--socket", str(outsider)])
    assert p.returncode != 0 and p.stdout == "", p
    assert len(p.stderr.strip().splitlines()) == 1 and "permission denied" in p.stderr, p.stderr

    # The node where the rank crashed dies as a whole: what it published is still there (it
    # may have published more since, e.g. the last upload's events).
    before = [e for e in evs if e["node"] == crashed_node]
    cluster_script("kill-node.sh", crashed_node)
    try:
        alive = next(s for s in socks if s.stem.split("-")[-1] != crashed_node)
        after, err = events_json(job, alive)
        assert err == "", err
        kept = [e for e in after["events"] if e["node"] == crashed_node]
        assert all(e in kept for e in before), (before, kept)
    finally:
        cluster_script("revive-node.sh", crashed_node)
