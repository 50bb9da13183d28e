"""Per-step fault tolerance on the local cluster when a node is lost (docs/ft.md, "A lost node"),
end to end, beside test_ft.py (a program's crash, hang or bad loss): etc/examples/ft_train.py on
4 nodes x 2 ranks with --fault-tolerance=step, a node killed as a whole (tests/cluster/
kill-node.sh). Without a spare the group shrinks and goes on (--min-nodes), below --min-nodes the
run falls back to a requeue from the checkpoint, and with --spare-nodes the spare's ranks take the
lost node's place, healed from live members. A file of its own so that ctest runs it beside
test_ft.py on another cluster. About 6 min.
"""
import json
import re
import time

import pytest

from conftest import cluster_script, job_state, run, wait_job
from test_ft import (EXAMPLE, RANKS, STEPS, assert_heals, assert_only_replaced, checkpoints,
                     committed, node_pid, reference, results, submit, timeline,  # noqa: F401
                     wait_committed)
from test_recover_in_place import node_list
from test_requeue_faults import (end_with_node_lost, events, kinds, need_autopard,  # noqa: F401
                                 node_of_rank, rank_pid, restarts, show_job)
from autopar.ft import shards  # noqa: E402 (test_ft puts the module's source on sys.path)


@pytest.mark.parametrize("lost", ["ranks 6-7", "rank 0 and the store"])
def test_a_lost_node_without_a_spare_shrinks_the_group(tmp_path, reference, lost):
    """--min-nodes=3 on 4 nodes: a node dies as a whole (kill-node.sh: its slurmd, autopard,
    launchers and programs at once): the node of ranks 6-7, or the node of rank 0, whose launcher
    led the group and whose program served the group's store (ranks placed so that it is not the
    batch host). The launchers left find its launchers gone, the lowest left leads, and they agree
    on a group of the six ranks left on a live member's store, which goes on with the global batch
    spread over them: no program restarts, every step is committed once with every sample once
    (the ledger), the job's progress is reported by the lowest rank left, and the model ends where
    the fault-free run's does to float tolerance (the sums run in another order)."""
    off = lost != "ranks 6-7"
    job = submit(tmp_path, opts="--min-nodes=3", rank0_off_batch_host=off)
    wait_committed(tmp_path, 20)
    gone = (0, 1) if off else (6, 7)
    left = [r for r in range(RANKS) if r not in gone]
    pids = {r: node_pid(rank_pid(job, r, EXAMPLE)) for r in left}
    node = node_of_rank(job, gone[0], EXAMPLE)
    assert node_of_rank(job, gone[1], EXAMPLE) == node
    if off:
        assert node != run(["scontrol", "show", "hostnames", node_list(job)], check=True).stdout.split()[0]
    state, fault = end_with_node_lost(job, node, 300)
    assert state == "COMPLETED", (tmp_path / "out.txt").read_text()[-3000:]

    out = {r: json.loads((tmp_path / "out" / f"rank-{r}.json").read_text()) for r in left}
    assert not any((tmp_path / "out" / f"rank-{r}.json").exists() for r in gone)
    for r in left:
        assert out[r]["pid"] == pids[r], (r, out[r], pids[r])
    assert len({o["sha256"] for o in out.values()}) == 1  # the members agree bit for bit
    assert out[left[0]]["eval_loss"] == pytest.approx(reference[0]["eval_loss"], rel=1e-3)
    assert shards.check_ledger(shards.read_ledgers(str(tmp_path / "ledger")), STEPS) == []
    assert restarts(job) == 0, show_job(job)
    evs = events(job, "finished")
    assert not kinds(evs, "restarted") and not kinds(evs, "requeue"), [e["kind"] for e in evs]
    last = kinds(evs, "ft_quorum")[-1]
    members = [m.split("@") for m in last["fields"]["members"].split(",")]
    assert [int(m[0]) for m in members] == left, last
    assert last["fields"]["lost"] == ",".join(map(str, gone)), last
    assert last["fields"]["store"] == members[0][2] and last["time"] - fault < 15, (last, fault)
    # The job's progress goes on, from the lowest rank left (in rank 0's place when it was lost).
    after = [e for e in kinds(evs, "progress") if e["time"] > last["time"]]
    assert after and {e["rank"] for e in after} == {left[0]}, timeline(evs)


def test_fewer_nodes_than_min_nodes_fall_back_to_a_requeue_from_the_checkpoint(tmp_path):
    """--min-nodes=2 on 3 nodes (6 ranks), checkpoints every 10 steps: the node of ranks 4-5 dies
    (the group shrinks to four and goes on), then, once the group has gone on, the node of ranks
    2-3: one node is left, fewer than the run may go on with. The group cannot go on and the run
    takes today's path, with no program replaced: every program stopped and (too few nodes for
    an in-place restart) the job requeued without the lost node, which restores the latest
    complete checkpoint (one of all six ranks: the four-rank group's are incomplete) and ends with
    the fault-free run's result bit for bit (the same job without a fault)."""
    ranks, opts = 6, f"--min-nodes=2 {checkpoints(tmp_path / 'fault')}"
    ref_dir, work = tmp_path / "reference", tmp_path / "fault"
    ref = submit(ref_dir, opts="--min-nodes=2", nodes=3)
    assert wait_job(ref, timeout=300) == "COMPLETED", (ref_dir / "out.txt").read_text()[-3000:]
    reference = results(ref_dir, ranks)
    job = submit(work, opts=opts, args="--ckpt-every 10", nodes=3)
    wait_committed(work, 20)
    hosts = run(["scontrol", "show", "hostnames", node_list(job)], check=True).stdout.split()
    first, second = node_of_rank(job, 4, EXAMPLE), node_of_rank(job, 2, EXAMPLE)
    assert hosts[0] not in (first, second), (hosts, first, second)
    cluster_script("kill-node.sh", first)
    deadline = time.time() + 60
    while not [q for q in kinds(events(job), "ft_quorum") if q["fields"].get("lost")]:
        assert time.time() < deadline, (work / "out.txt").read_text()[-3000:]
        time.sleep(0.5)
    cluster_script("revive-node.sh", first)  # back, outside the job's allocation
    shrunk = committed(work)
    wait_committed(work, shrunk + 5)
    cluster_script("kill-node.sh", second)
    try:
        deadline = time.time() + 120
        while restarts(job) == 0:
            assert time.time() < deadline and job_state(job) != "COMPLETED", \
                (work / "out.txt").read_text()[-3000:]
            time.sleep(0.5)
    finally:
        cluster_script("revive-node.sh", second)
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]

    assert restarts(job) == 1, show_job(job)
    out = results(work, ranks)
    assert {r["sha256"] for r in out.values()} == {reference[0]["sha256"]}  # bit for bit
    evs = events(job, "finished")
    assert kinds(evs, "requeue"), timeline(evs)
    restored = kinds(evs, "resumed")  # the requeued run's rank 0: the step it resumed from
    assert len(restored) == 1 and 9 <= restored[0]["step"] < shrunk, (timeline(evs), shrunk)
    assert {r["started_at"] for r in out.values()} == {restored[0]["step"] + 1}, out
    # The launchers stopped their programs to fall back: none was replaced.
    assert not kinds(evs, "ft_healed"), timeline(evs)


def test_a_lost_node_is_replaced_by_a_spare_and_the_others_never_stop(tmp_path):
    """--spare-nodes=1 on 4 nodes (3 in use: 6 ranks): the node of ranks 2-3 dies as a whole
    (kill-node.sh). The leader finds its launchers gone and gives its ranks to the spare's
    launchers, whose programs join as newcomers and receive the state from live members; the 4
    others never stop, nothing restarts, and the result is the fault-free run's (the same job,
    its spare unused) bit for bit."""
    ranks = 6
    ref_dir, work = tmp_path / "reference", tmp_path / "fault"
    ref = submit(ref_dir, opts="--spare-nodes=1")
    assert wait_job(ref, timeout=300) == "COMPLETED", (ref_dir / "out.txt").read_text()[-3000:]
    reference = results(ref_dir, ranks)
    assert not (ref_dir / "out" / f"rank-{ranks}.json").exists()  # the spare ran nothing
    job = submit(work, opts="--spare-nodes=1", launch_opts="")  # the spare's warm start: asserted
    wait_committed(work, 20)
    pids = {r: node_pid(rank_pid(job, r, EXAMPLE)) for r in range(ranks)}
    node = node_of_rank(job, 2, EXAMPLE)
    assert node_of_rank(job, 3, EXAMPLE) == node
    assert node != run(["scontrol", "show", "hostnames", node_list(job)], check=True).stdout.split()[0]
    state, fault = end_with_node_lost(job, node, 300)
    assert state == "COMPLETED", (work / "out.txt").read_text()[-3000:]

    evs = assert_only_replaced(work, job, reference, pids, [2, 3], "ft_healed", ranks)
    healed = [e for e in assert_heals(work, evs, [2, 3]) if e["rank"] in (2, 3)]
    assert sorted(e["rank"] for e in healed) == [2, 3], timeline(evs)
    assert all(e["node"] != node for e in healed), timeline(evs)  # on the spare
    quorum = [q for q in kinds(evs, "ft_quorum") if q["fields"]["heals"]][-1]
    assert [m.split("@")[1] for m in quorum["fields"]["members"].split(",")][2:4] == ["6", "7"], quorum
    assert quorum["time"] - fault < 30, (quorum, fault)
    assert restarts(job) == 0, show_job(job)
    # The spare's launchers had prepared their programs' interpreters while they waited.
    took = re.findall(r"taking the place of a lost node \(program ranks from \d+, interpreter (\w+)\)",
                      (work / "out.txt").read_text())
    assert len(took) == 2 and set(took) <= {"warm", "warming"}, took
