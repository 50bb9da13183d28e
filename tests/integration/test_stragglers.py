"""Stragglers (docs/health.md) on the local cluster, end to end: the deterministic DDP
training of test_requeue_faults.py with autopar.health.watch_ddp (every rank's compute time per
step reaches rank 0's heartbeat), on 3 nodes with --spare-nodes=1 --exclude-stragglers. Rank 3 of
the first program spends 0.1 s more in each forward pass (an overloaded node): rank 0's autopard
flags it with its node once it stays slower than the job's median for the site's windows (3 of
progress_interval_s = 2 s here). A crash later restarts the program in place, and the straggler's
node is left out: the spare takes its place. The final model is the uninterrupted run's.

Needs the cluster as test_requeue_faults.py does. About 1.5 min.
"""
import os
import signal
import time

import pytest

from conftest import assert_refused_at_submit, metric, metric_samples, scrape, wait_job
from test_requeue_faults import (assert_resumed, events, kinds, need_autopard,  # noqa: F401
                                 node_of_rank, rank_pid, reference_run, restarts, same_model, show_job, submit, train_cmd,
                                 wait_step)

OPTS = "--requeue-on-failure=3 --heartbeat-timeout=20"


@pytest.fixture(scope="module")
def reference_watched(tmp_path_factory):
    """An uninterrupted run with the watch (its communication hook) and nothing slow."""
    return reference_run(tmp_path_factory, "reference-watched", " --watch")


def wait_event(job, kind, timeout=90):
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = kinds(events(job), kind)
        if found:
            return found
        time.sleep(1)
    raise AssertionError(f"no {kind} event within {timeout} s")


def test_a_slow_rank_is_flagged_and_its_node_left_out_at_the_next_restart(tmp_path, reference_watched):
    work = tmp_path / "straggler"
    job = submit(work, opts=OPTS + " --spare-nodes=1 --exclude-stragglers",
                 program=train_cmd(work) + " --watch --slow-rank 3", nodes=3)
    wait_step(work, 0, 3)
    slow_node, fast_node = node_of_rank(job, 3), node_of_rank(job, 0)
    flagged = wait_event(job, "straggler")
    assert [(e["rank"], e["fields"]["node"]) for e in flagged] == [(3, slow_node)], flagged
    f = flagged[0]["fields"]
    assert float(f["ratio"]) > 1.25 and float(f["compute_s"]) >= 0.1, f
    assert int(f["windows"]) == 3 and f["excluded_next"] == "yes", f
    # ... and in the metrics of the node that flagged it (rank 0's: docs/metrics.md).
    samples = metric_samples(scrape(flagged[0]["node"]))
    ratio = metric(samples, "autopard_job_straggler_ratio", job=job, rank="3", node=slow_node)
    assert ratio == float(f["ratio"]), (ratio, f)
    # A crash after the flag (and after step 9's checkpoint): the in-place restart leaves the
    # straggler's node out.
    wait_step(work, 0, 12)
    os.kill(rank_pid(job, 1), signal.SIGKILL)
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert restarts(job) == 0, show_job(job)
    assert same_model(work / "final.pt", reference_watched), "the model differs from an uninterrupted run"
    evs = events(job, "first_step", "finished")
    decision = kinds(evs, "recovery")
    assert len(decision) == 1 and decision[0]["fields"]["action"] == "restart-in-place", decision
    assert decision[0]["fields"]["exclude"] == slow_node, decision
    restarted = kinds(evs, "restarted")
    assert len(restarted) == 1, restarted
    nodes = restarted[0]["fields"]["nodes"].split(",")
    assert fast_node in nodes and slow_node not in nodes and len(nodes) == 2, (nodes, slow_node)
    assert assert_resumed(work, 1, evs) >= 9
    # Nobody is slow in the restarted program: no straggler is flagged again.
    assert len(kinds(evs, "straggler")) == 1, kinds(evs, "straggler")


@pytest.mark.parametrize("opts,error", [
    ("--exclude-stragglers=maybe", "--exclude-stragglers: must be yes or no, got 'maybe'"),
])
def test_bad_values_are_refused_at_submit(tmp_path, opts, error):
    assert_refused_at_submit(opts, error, nodes=1)
