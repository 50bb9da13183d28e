"""FSDP2 (fully_shard) over gloo with torch.distributed.checkpoint under autopar (autopar.dcp):
parameters and optimizer state sharded over every rank, saved with dcp.async_save into the
node-local checkpoint directory, each step committed through autopard (every rank's file, rank 0's
metadata last); autopard restores a DCP step whole on every node (its ranks read each other's
files).

- Killed rank: once a checkpoint is COMPLETE, rank 1 dies; every rank restarts in place and loads
  the restored step; the final (gathered) model is bit for bit the fault-free run's.
- Shrink: an elastic run (--min-nodes=2) on 3 nodes loses one; it goes on in place on 2, and DCP
  reshards the step written by 3 ranks onto 2: the gathered model right after the load is bit for
  bit the one that was saved, and the run ends with the fault-free run's loss within 1e-4 (the same
  samples per step; only the order of the sums changes with the number of ranks).
- Preempted: in the low-priority `scavenger` partition a debug job takes the nodes back; at the
  notice every rank saves the current step with DCP and commits it (the program's time-limit path,
  autopar.ckpt.time_limit_reached), autopard requeues the job once it is COMPLETE, and the next run
  loads that step: none redone, the final model bit for bit the fault-free run's."""
import json
import re
import time

import pytest

from conftest import (SOURCE_DIR, _it, after_complete, assert_preempted_once, events, kill_after_complete, kinds,
                      preempt, run, show_job, submit, wait_job)

PROGRAM = SOURCE_DIR / "etc" / "examples" / "fsdp_train.py"


def final(work):
    return json.loads((work / "final.json").read_text())


def saved_shas(out: str):
    """{step: the gathered model's SHA-256 when it was saved} from rank 0's lines."""
    return {int(s): h for s, h in re.findall(r"fsdp_train: saving step (\d+) on \d+ ranks, model sha256 (\w+)", out)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    work = tmp_path_factory.mktemp("fsdp-reference")
    job = submit(work, f"{PROGRAM} {work} --steps 40 --every 5")
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert sorted({e["step"] for e in kinds(events(job), "ckpt_complete")}) == list(range(5, 41, 5))
    return work


def test_a_killed_rank_resumes_from_the_dcp_checkpoint_bit_identical(tmp_path, reference):
    work = tmp_path / "faulted"
    job = submit(work, f"{PROGRAM} {work} --steps 40 --every 5")
    step = kill_after_complete(job, 1, str(PROGRAM))
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert "Restarts=0" in show_job(job), show_job(job)
    assert [e["fields"]["action"] for e in kinds(events(job), "recovery")] == ["restart-in-place"]
    out = (work / "out.txt").read_text()
    m = re.search(r"fsdp_train: resumed step (\d+) on 2 ranks \(written by 2\), model sha256 (\w+)", out)
    assert m and int(m.group(1)) >= step, out[-3000:]
    assert m.group(2) == saved_shas((reference / "out.txt").read_text())[int(m.group(1))]
    assert final(work)["params_sha256"] == final(reference)["params_sha256"]
    assert final(work)["loss"] == final(reference)["loss"]


def test_a_lost_node_shrinks_the_run_and_dcp_reshards_the_step(tmp_path, reference):
    work = tmp_path / "shrink"
    job = submit(work, f"{PROGRAM} {work} --steps 40 --every 5", nodes=3, opts="--min-nodes=2")
    try:
        deadline = time.time() + 240
        while not kinds(events(job), "ckpt_complete"):
            assert time.time() < deadline, (work / "out.txt").read_text()[-3000:]
            time.sleep(0.3)
        nodes = run(["scontrol", "show", "hostnames", re.search(r"\bNodeList=(\S+)", show_job(job)).group(1)],
                    check=True).stdout.split()
        victim = nodes[-1]  # not the batch host (the first)
        _it.cluster_script("kill-node.sh", victim)
        try:
            assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
        finally:
            _it.cluster_script("revive-node.sh", victim)
    finally:
        run(["scancel", job])
    assert "Restarts=0" in show_job(job), show_job(job)
    out = (work / "out.txt").read_text()
    m = re.search(r"fsdp_train: resumed step (\d+) on 2 ranks \(written by 3\), model sha256 (\w+)", out)
    assert m, out[-3000:]
    assert m.group(2) == saved_shas(out)[int(m.group(1))], "the resharded model is not the one saved"
    assert final(work)["world"] == 2 and final(work)["steps"] == 40
    assert final(work)["loss"] == pytest.approx(final(reference)["loss"], rel=1e-4)
    assert kinds(events(job), "resized"), "no resize in the timeline"


def test_a_preempted_run_saves_the_notices_step_with_dcp_and_resumes_from_it(tmp_path, reference):
    work = tmp_path / "preempted"
    job = submit(work, f"{PROGRAM} {work} --steps 40 --every 5 --step-sleep 0.3", opts="--partition=scavenger")
    after_complete(job)
    preempt(job, tmp_path / "preemptor")
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    step = assert_preempted_once(job)
    out = (work / "out.txt").read_text()
    m = re.search(r"fsdp_train: resumed step (\d+) on 2 ranks \(written by 2\), model sha256 (\w+)", out)
    assert m and int(m.group(1)) == step, (step, out[-3000:])  # the notice's step: none redone
    assert m.group(2) == saved_shas(out)[step], "the model loaded is not the one saved at the notice"
    assert final(work)["params_sha256"] == final(reference)["params_sha256"]
    assert final(work)["loss"] == final(reference)["loss"]
