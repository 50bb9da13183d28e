"""transformers.Trainer under autopar (autopar.hf): a small Llama trained from a config with DDP
over gloo, 2 nodes x 1 rank. Its saves are committed through autopard; rank 1 is killed once one
is COMPLETE; every rank's program restarts in place, Trainer resumes from autopar's latest
complete checkpoint (the restored step, the node's first rank's files with each rank's random
state), and the final parameters are bit for bit the fault-free run's. A third run, in the
low-priority partition, is preempted: AutoparCallback saves and commits the step at the notice,
autopard requeues the job once it is COMPLETE, and the requeued run ends with the same parameters
(no code of the program's own for it). About 2 minutes."""
import json
import re

from conftest import (SOURCE_DIR, after_complete, assert_preempted_once, events, kill_after_complete, kinds,
                      preempt, show_job, submit, wait_job)

PROGRAM = SOURCE_DIR / "etc" / "examples" / "hf_train.py"
ARGS = "--steps 40 --save-steps 8"


def final(work):
    return json.loads((work / "final.json").read_text())


def test_a_killed_rank_resumes_from_autopars_checkpoint_bit_identical(tmp_path):
    clean = tmp_path / "clean"
    job = submit(clean, f"{PROGRAM} {clean} {ARGS}")
    assert wait_job(job, timeout=300) == "COMPLETED", (clean / "out.txt").read_text()[-3000:]
    reference = final(clean)
    assert reference["steps"] == 40 and reference["resumed_from"] is None, reference
    # Every one of Trainer's saves is an autopar checkpoint, COMPLETE in storage.
    assert sorted({e["step"] for e in kinds(events(job), "ckpt_complete")}) == [8, 16, 24, 32, 40]

    work = tmp_path / "faulted"
    job = submit(work, f"{PROGRAM} {work} {ARGS}")
    step = kill_after_complete(job, 1, str(PROGRAM))
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert "Restarts=0" in show_job(job), show_job(job)  # recovered in place, not requeued
    evs = events(job)
    assert [e["fields"]["action"] for e in kinds(evs, "recovery")] == ["restart-in-place"], evs
    resumed = final(work)
    restored = int(re.search(r"/step-(\d+)/rank-0$", resumed["resumed_from"]).group(1))
    assert restored >= step, (restored, step)
    out = (work / "out.txt").read_text()
    assert re.search(rf"hf_train: rank 1 of 2, resume from \S+/step-{restored}/hf-resume-rank-1", out), out[-3000:]
    assert resumed["steps"] == 40
    assert resumed["params_sha256"] == reference["params_sha256"], (resumed, reference)
    assert resumed["last_loss"] == reference["last_loss"]

    preempted = tmp_path / "preempted"
    job = submit(preempted, f"{PROGRAM} {preempted} {ARGS}", opts="--partition=scavenger")
    after_complete(job)
    preempt(job, tmp_path / "preemptor")
    assert wait_job(job, timeout=300) == "COMPLETED", (preempted / "out.txt").read_text()[-3000:]
    step = assert_preempted_once(job)
    again = final(preempted)
    assert again["resumed_from"].endswith(f"/step-{step}/rank-0"), (again, step)
    assert again["steps"] == 40
    assert again["params_sha256"] == reference["params_sha256"], (again, reference)
