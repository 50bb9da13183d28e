"""PyTorch Lightning under autopar (autopar.lightning): Trainer(strategy="ddp") over gloo on 2
nodes x 1 rank, a checkpoint at every epoch's end committed through autopard. Lightning takes its
ranks from autopar-launch's variables (its TorchElasticEnvironment), although srun's SLURM_* are
there too. Rank 1 is killed once a checkpoint is COMPLETE; every rank's program restarts in place,
Lightning resumes from autopar's latest complete checkpoint (rank 0's file, sent to rank 1 when
Lightning loads it, weights_only), and the final parameters are bit for bit the fault-free run's.
A third run, in the low-priority partition, is preempted: AutoparCheckpoint saves and commits the
batch at the notice (autopar's SIGTERM handler in place of Lightning's), autopard requeues the job
once it is COMPLETE, and the requeued run resumes from that batch and trains every step. Its
parameters are not compared: Lightning resumes a mid-epoch checkpoint at the next batch index but
replays the epoch's data from its start unless the DataLoader is stateful (Lightning's rule,
docs/ecosystem.md), which this example's is not."""
import json
import re

from conftest import (SOURCE_DIR, after_complete, assert_preempted_once, events, kill_after_complete, kinds,
                      preempt, show_job, submit, wait_job)

PROGRAM = SOURCE_DIR / "etc" / "examples" / "lightning_train.py"
EPOCHS = 30
STEPS_PER_EPOCH = 20  # 640 samples, batches of 16, 2 ranks


def final(work):
    return json.loads((work / "final.json").read_text())


def test_a_killed_rank_resumes_from_autopars_checkpoint_bit_identical(tmp_path):
    clean = tmp_path / "clean"
    job = submit(clean, f"{PROGRAM} {clean} --epochs {EPOCHS}")
    assert wait_job(job, timeout=300) == "COMPLETED", (clean / "out.txt").read_text()[-3000:]
    reference = final(clean)
    assert reference["environment"] == "TorchElasticEnvironment", reference
    assert reference["steps"] == EPOCHS * STEPS_PER_EPOCH and reference["resumed_from"] is None
    out = (clean / "out.txt").read_text()
    assert {int(m) for m in re.findall(r"lightning_train: rank (\d) of 2 \(TorchElasticEnvironment\)", out)} == {0, 1}
    assert {e["step"] for e in kinds(events(job), "ckpt_complete")} == \
        {STEPS_PER_EPOCH * (e + 1) for e in range(EPOCHS)}

    work = tmp_path / "faulted"
    job = submit(work, f"{PROGRAM} {work} --epochs {EPOCHS}")
    step = kill_after_complete(job, 1, str(PROGRAM))
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert "Restarts=0" in show_job(job), show_job(job)
    assert [e["fields"]["action"] for e in kinds(events(job), "recovery")] == ["restart-in-place"]
    resumed = final(work)
    restored = int(re.search(r"/step-(\d+)/rank-0/lightning.ckpt$", resumed["resumed_from"]).group(1))
    assert restored >= step and restored % STEPS_PER_EPOCH == 0, (restored, step)
    out = (work / "out.txt").read_text()
    assert re.search(rf"rank 1 of 2 \(TorchElasticEnvironment\), resume from "
                     rf"\S+/step-{restored}/lightning-resume-rank-1/lightning.ckpt", out), out[-3000:]
    assert resumed["steps"] == EPOCHS * STEPS_PER_EPOCH
    assert resumed["params_sha256"] == reference["params_sha256"], (resumed, reference)
    assert resumed["last_loss"] == reference["last_loss"]

    preempted = tmp_path / "preempted"
    job = submit(preempted, f"{PROGRAM} {preempted} --epochs {EPOCHS}", opts="--partition=scavenger")
    after_complete(job)
    preempt(job, tmp_path / "preemptor")
    assert wait_job(job, timeout=300) == "COMPLETED", (preempted / "out.txt").read_text()[-3000:]
    step = assert_preempted_once(job)
    again = final(preempted)
    assert again["resumed_from"].endswith(f"/step-{step}/rank-0/lightning.ckpt"), (again, step)
    assert again["steps"] == EPOCHS * STEPS_PER_EPOCH
