"""Time limits end to end on the local cluster with autopard on every node: a job
whose --time is shorter than its training checkpoints when autopard asks (at its end time minus a
margin from the observed checkpoint durations, no --signal), is requeued as soon as that step is
COMPLETE, resumes from it without losing a step and finishes by itself with the same model as an
uninterrupted run; `autopar events` tells the story.

Needs the cluster as test_requeue_faults.py does (autopard on every node). Wall time: about
2.5 minutes (a 1-minute time limit, one or two requeues with the cluster's 11 s requeue wait, and a
short reference run). Records its numbers in $AUTOPAR_BENCH_OUT like test_requeue_faults.py.
"""
from pathlib import Path

from conftest import PYTHON, wait_job
from test_requeue_faults import (TRAIN, events, kinds, need_autopard, record, restarts,  # noqa: F401
                                 same_model, steps_logged, submit)

STEPS = 120  # about 45 s of training at 0.3 s a step: more than one 1-minute run holds
STEP_SLEEP = 0.3


def train_cmd(work: Path, step_sleep: float) -> str:
    return (f"{PYTHON} {TRAIN} --steps {STEPS} --every 5 --step-sleep {step_sleep} "
            f"--obey-time-limit --out {work}/final.pt")


def test_time_limit_checkpoint_requeue_resume(tmp_path):
    """(d) --time=1 with about 45 s of training: checkpoint on request, requeue, resume, finish."""
    ref = tmp_path / "reference"
    ref_job = submit(ref, opts="--requeue-on-failure=3", program=train_cmd(ref, 0))
    work = tmp_path / "d"
    # Every run of one minute starts 4 torch programs first: beside two other tests on 2 cores
    # that start-up takes most of the minute, so the run may need up to 5 requeues (the site's
    # most) to finish; one requeue is what the test needs.
    job = submit(work, opts="--requeue-on-failure=5 --time=1", program=train_cmd(work, STEP_SLEEP))
    assert wait_job(ref_job, timeout=300) == "COMPLETED", (ref / "out.txt").read_text()[-3000:]
    state = wait_job(job, timeout=600)
    out = (work / "out.txt").read_text()
    evs = events(job)
    story = "\n".join(f"{e['time']:.1f} {e['node']} r{e['rank']} s{e['step']} {e['kind']} "
                      f"{e['detail'][:160]}" for e in evs if not e["kind"].startswith("ckpt_up"))
    assert state == "COMPLETED", out[-3000:] + "\n" + story
    n = restarts(job)
    assert n >= 1, story
    assert same_model(work / "final.pt", ref / "final.pt"), "the model differs from an uninterrupted run"

    # The story of the first run: request, the ranks' checkpoint of one step, COMPLETE, requeue.
    requests = kinds(evs, "time_limit_request")
    assert requests and "margin_s=" in requests[0]["detail"], story
    requeues = [e for e in kinds(evs, "requeue") if "class=time-limit" in e["detail"]]
    assert len(requeues) == n, story
    assert "attempt=1 " in requeues[0]["detail"], story
    step = requeues[0]["step"]
    announced = [e for e in kinds(evs, "time_limit_checkpoint") if e["step"] == step]
    assert sorted(e["rank"] for e in announced) == [0, 1, 2, 3], story
    complete = [e for e in kinds(evs, "ckpt_complete") if e["step"] == step]
    assert complete, story
    restored = [e for e in kinds(evs, "ckpt_restored") if e["step"] == step]
    assert len(restored) == 4, story
    t_request = min(e["time"] for e in requests)
    assert t_request <= min(e["time"] for e in announced) <= complete[0]["time"] \
        <= requeues[0]["time"] <= min(e["time"] for e in restored), story
    assert not kinds(evs, "failure") and not kinds(evs, "stopped"), story
    assert not kinds(evs, "time_limit_missed"), story

    # No work lost: run 0 stopped at the checkpointed step, run 1 began right after it.
    logged = steps_logged(work)
    run0 = [s for r, _, s, _ in logged if r == 0]
    run1 = [(t, s) for r, _, s, t in logged if r == 1]
    assert max(run0) == step and run1, out[-3000:]
    first_time, first_step = min(run1)
    assert first_step == step + 1, out[-3000:]
    lost = max(run0) - step
    took = first_time - t_request
    record("time limit (--time=1)", recovery_s=round(took, 1), steps_lost=lost,
           to_requeue_s=round(requeues[0]["time"] - t_request, 1),
           to_restore_s=round(min(e["time"] for e in restored) - t_request, 1),
           requeues=n, request=requests[0]["detail"].split(" plan=")[0])
