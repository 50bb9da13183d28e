"""Bad losses (docs/health.md) on the local cluster, end to end: the deterministic DDP
training of test_requeue_faults.py (2 nodes x 2 ranks, checkpoints every 5 steps) turns every weight
into NaN before step 32 of its first program (requeue_train.py --nan-at), so its loss is NaN from
then on, and sends its loss with a heartbeat every 5 steps only (--heartbeat-every 5), so that
autopard first sees the NaN at step 35, after the poisoned step 34 was checkpointed.

- --on-bad-loss=rollback: rank 0's node journals the bad loss, has the program restarted in place,
  and the restart resumes the last COMPLETE checkpoint at or before the last good loss (step 30:
  checkpoint 29, not the poisoned 34); the run finishes with the uninterrupted run's model.
- --on-bad-loss=stop: the job is ended with the reason in the timeline and in Slurm.
- the default (warn): the run goes on; the timeline says so once.
- bad values are refused at submit with one line, nothing submitted.

Needs the cluster as test_requeue_faults.py does. About 2 min.
"""
import pytest

from conftest import assert_refused_at_submit, wait_job
from test_requeue_faults import (assert_resumed, events, kinds, need_autopard, reference,  # noqa: F401
                                 restarts,
                                 same_model, show_job, submit, train_cmd)

OPTS = "--requeue-on-failure=3 --heartbeat-timeout=20"
NAN_AT = 32


def nan_cmd(work):
    return train_cmd(work) + f" --nan-at {NAN_AT} --heartbeat-every 5"


def test_a_nan_loss_rolls_back_to_the_last_good_checkpoint_and_the_run_finishes(tmp_path, reference):
    work = tmp_path / "rollback"
    job = submit(work, opts=OPTS + " --on-bad-loss=rollback:2", program=nan_cmd(work))
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert restarts(job) == 0, show_job(job)
    assert same_model(work / "final.pt", reference), "the model differs from an uninterrupted run"
    evs = events(job, "first_step", "finished")
    bad = kinds(evs, "bad_loss")
    assert len(bad) == 1, bad
    b = bad[0]
    assert b["step"] == 35 and b["rank"] == 0, b
    assert (b["fields"]["kind"], b["fields"]["loss"], b["fields"]["action"]) == ("nan", "nan", "rollback"), b
    assert "rollback 1 of 2 to the last COMPLETE checkpoint at or before step 30" in b["fields"]["reason"], b
    failure = kinds(evs, "failure")
    assert [f["fields"]["class"] for f in failure] == ["bad-loss"], failure
    assert "rank 0" in failure[0]["fields"]["reason"] and "loss nan at step 35" in failure[0]["fields"]["reason"]
    decision = kinds(evs, "recovery")
    assert len(decision) == 1, decision
    d = decision[0]["fields"]
    assert (d["action"], d["rollback"], d["of"], d["resume_max_step"]) == ("restart-in-place", "1", "2", "30"), d
    # Every rank resumed checkpoint 29 (the last one at or before the last good loss), although
    # the poisoned step 34 had been committed before the NaN was seen.
    restored = kinds(evs, "restored")
    assert sorted(e["rank"] for e in restored) == [0, 1, 2, 3], restored
    assert {e["step"] for e in restored} == {29}, restored
    assert assert_resumed(work, 1, evs) == 29  # the programs themselves loaded it
    assert any(e["step"] == 34 for e in kinds(evs, "ckpt_committed")), "the poisoned step was not saved"
    assert [e["fields"]["generation"] for e in kinds(evs, "first_step")] == ["1"], kinds(evs, "first_step")


def test_a_nan_loss_stops_the_job_with_its_reason(tmp_path):
    work = tmp_path / "stop"
    job = submit(work, opts=OPTS + " --on-bad-loss=stop", program=nan_cmd(work))
    state = wait_job(job, timeout=300)
    assert state == "CANCELLED", (state, (work / "out.txt").read_text()[-3000:])
    evs = events(job, "stopped")
    bad = kinds(evs, "bad_loss")
    assert len(bad) == 1 and bad[0]["fields"]["action"] == "stop", bad
    stopped = kinds(evs, "stopped")
    assert len(stopped) == 1, stopped
    assert stopped[0]["fields"]["reason"] == \
        "loss nan at step 35; the job is stopped (--on-bad-loss=stop)", stopped
    assert "the job is stopped (--on-bad-loss=stop)" in show_job(job)  # AdminComment
    assert not kinds(evs, "recovery") and not kinds(evs, "requeue"), evs


def test_by_default_a_nan_loss_is_told_once_and_the_run_goes_on(tmp_path):
    work = tmp_path / "warn"
    job = submit(work, opts=OPTS, program=nan_cmd(work))
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    evs = events(job, "finished")
    bad = kinds(evs, "bad_loss")
    assert len(bad) == 1, bad  # NaN from step 35 to the end: one streak, told once
    assert bad[0]["fields"]["action"] == "warn" and bad[0]["step"] == 35, bad
    assert not kinds(evs, "failure") and not kinds(evs, "recovery"), evs


@pytest.mark.parametrize("opts,error", [
    ("--on-bad-loss=ignore", "--on-bad-loss: must be warn, rollback[:N] or stop, got 'ignore'"),
    ("--on-bad-loss=rollback:9 --requeue-on-failure=1 --ckpt-dir=/tmp/x",
     "--on-bad-loss: rollback:N needs N in [1, 5], got '9'"),
    ("--on-bad-loss=rollback --requeue-on-failure=1",
     "--on-bad-loss: rollback needs checkpoints (--ckpt-dir or --ckpt-upload)"),
    ("--on-bad-loss=rollback --ckpt-dir=/tmp/x", "--on-bad-loss: rollback needs in-place restarts"),
    ("--loss-spike=0.5", "--loss-spike: must be 0 (off) or a factor in (1, 1000], got '0.5'"),
])
def test_bad_values_are_refused_at_submit(tmp_path, opts, error):
    assert_refused_at_submit(opts, error, nodes=2)
