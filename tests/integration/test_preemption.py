"""Preemption end to end on the local cluster with autopard on every node: a training job in the
low-priority `scavenger` partition (tests/cluster/start.sh: PreemptMode=REQUEUE, GraceTime=20) is
preempted twice by short jobs of the `debug` partition that need its nodes. At each notice (the
steps' SIGTERM) every rank finishes its step and checkpoints it (autopar.ckpt.time_limit_reached,
no code of its own for preemption), autopard confirms the preemption from Slurm's record and
requeues the job as soon as that step is COMPLETE, before the grace ends, without spending
--requeue-on-failure; each run resumes from the step the previous one checkpointed, so no step is
redone, and the final model equals an unpreempted run's.

Needs the cluster as test_requeue_faults.py does (autopard on every node). Wall time: about
2 minutes.
"""
import json
import os
import re
import shlex
import time
import uuid
from pathlib import Path

from conftest import (BUILD_DIR, PYTHON, cluster_dir, expand_nodes, pending_uploads, preempt, run, s3_client, wait_for,
                      wait_job)
from test_requeue_faults import (CLI, TRAIN, events, kinds, need_autopard, record,  # noqa: F401
                                 restarts, same_model, show_job, sockets, steps_logged, submit)

STEPS = 90
STEP_SLEEP = 0.25


def train_cmd(work: Path, step_sleep: float = STEP_SLEEP, steps: int = STEPS, every: int = 30,
              obey: bool = True, extra: str = "") -> str:
    """The test program: STEPS steps, a checkpoint every `every`, checkpointing at the notice
    (--obey-time-limit, autopar.ckpt.time_limit_reached) unless `obey` is False."""
    return (f"{PYTHON} {TRAIN} --steps {steps} --every {every} --step-sleep {step_sleep} {extra}"
            f"{' --obey-time-limit' if obey else ''} --out {work}/final.pt")


def reference_and_preemptible(tmp_path: Path, partition: str, upload: str = "", **program):
    """Submits an unpreempted reference run of the program (train_cmd's `program` arguments, no
    step sleep) and the same program, slowed, in the preemptible `partition`; returns (the
    reference's folder, the job's folder, the job's id)."""
    ref, work = tmp_path / "reference", tmp_path / "p"
    submit(ref, opts="--requeue-on-failure=1", program=train_cmd(ref, 0, **program))
    job = submit(work, opts=f"--requeue-on-failure=1 --partition={partition}",
                 program=train_cmd(work, **program), upload=upload)
    return ref, work, job


def tell(evs) -> str:
    """The timeline in one line per event (uploads left out), for assertion messages."""
    return "\n".join(f"{e['time']:.1f} {e['node']} r{e['rank']} s{e['step']} {e['kind']} "
                     f"{e['detail'][:200]}" for e in evs if not e["kind"].startswith("ckpt_up"))


def trained(work: Path, run_no: int, steps: int) -> bool:
    return sum(1 for r, rank, _, _ in steps_logged(work) if r == run_no and rank == 0) >= steps


def sacct_runs(job: str):
    """(start, end) of each run of JOB as Slurm accounts it: the cluster has no slurmdbd, its
    job completion log has every run (sacct --completion)."""
    out = run(["sacct", "--completion", "--duplicates", "--parsable2", "--noheader", "-j", job,
               "--format=JobIDRaw,Start,End,State"], check=True,
              env={**os.environ, "SLURM_TIME_FORMAT": "%s"}).stdout
    return [(int(f[1]), int(f[2])) for f in (line.split("|") for line in out.splitlines())
            if f[0] == job]


def goodput(*args: str):
    p = run([str(CLI), "goodput", *args, "--json", "--socket", str(sockets()[0])], check=True)
    return json.loads(p.stdout)


def check_goodput(job: str, ranks: int, preemptions: int, steps: int, redone_at_most: int):
    """`autopar goodput`'s split of JOB adds up to the allocation sacct accounts (every run's
    elapsed time x its ranks), and says what happened."""
    runs = wait_for(lambda: (r := sacct_runs(job)) and len(r) == preemptions + 1 and r, 30,
                    f"sacct's {preemptions + 1} runs of job {job}")
    accounted = sum(end - start for start, end in runs) * ranks
    g = goodput(job)["jobs"][0]
    uses = g["uses"]
    assert abs(sum(uses.values()) - accounted) < 1e-6 and g["allocated"] == accounted, (runs, g)
    assert [(r["start"], r["end"]) for r in g["runs"]] == runs and all(
        r["gpus"] == ranks for r in g["runs"]), (runs, g["runs"])
    assert min(uses.values()) >= 0, uses
    assert g["preemptions"] == preemptions and g["steps_kept"] == steps, g
    assert g["steps_redone"] <= redone_at_most, g
    # Two restarts cost their start-ups; the steps are most of the rest; the commits stalled.
    assert uses["recovery"] > 0 and uses["ckpt_stall"] > 0 and uses["steps_kept"] > 0.2 * accounted, g
    # The site's view of the same day holds the job's GPU-seconds (and maybe others').
    day = time.strftime("%Y-%m-%d", time.gmtime(runs[0][0]))
    site = goodput("--start", day, "--partition", "scavenger", "--by", "partition")
    row = next(r for r in site["rows"] if r["partition"] == "scavenger")
    assert row["allocated"] >= accounted - 1e-6 and job in [j["job_id"] for j in site["jobs"]], site
    record("goodput", job=job, **{k: round(v / max(accounted, 1e-9), 3) for k, v in uses.items()})
    return g


def check_goodput_timer(job: str, ranks: int, tmp: Path):
    """The site's gauges as autopar-goodput.service (etc/, built) writes them: its ExecStart run
    as it stands, with the build's CLI, the file in TMP and the cluster's socket. The gauges of
    the job's partition and day hold its allocation."""
    unit = (BUILD_DIR / "etc" / "autopar-goodput.service").read_text()
    argv = shlex.split(re.search(r"^ExecStart=(.*)$", unit, re.M).group(1))
    prom = tmp / "autopar_goodput.prom"
    argv[0], argv[argv.index("--output") + 1] = str(CLI), str(prom)
    run([*argv, "--socket", str(sockets()[0])], check=True)
    runs = sacct_runs(job)
    day = time.strftime("%Y-%m-%d", time.gmtime(runs[0][0]))
    gauges = re.findall(r'^autopar_goodput_gpu_seconds\{user="[^"]*",partition="scavenger",day="([^"]+)",'
                        r'use="(\w+)"\} (\S+)$', prom.read_text(), re.M)
    assert {u for d, u, _ in gauges if d == day} >= {"steps_kept", "recovery", "preempted"}, prom.read_text()
    assert sum(float(v) for d, _, v in gauges if d == day) >= sum(e - s for s, e in runs) * ranks - 1e-6
    assert not (tmp / "autopar_goodput.prom.tmp").exists()


def test_preempted_twice_loses_no_step(tmp_path):
    ref, work, job = reference_and_preemptible(tmp_path, "scavenger")
    notices = []
    for n in range(2):
        wait_for(lambda: trained(work, n, 12), 240, f"run {n} training 12 steps")
        notices.append(preempt(job, tmp_path / f"preemptor-{n}"))
        wait_for(lambda: restarts(job) > n, 60, f"the requeue after preemption {n + 1}")
    state = wait_job(job, timeout=400)
    print(show_job(job))
    out = (work / "out.txt").read_text()
    evs = events(job, "preempted")
    story = tell(evs)
    assert state == "COMPLETED", out[-3000:] + "\n" + story
    # The reference ended long before (Slurm has forgotten it): its model file says it did.
    assert (ref / "final.pt").exists(), (ref / "out.txt").read_text()[-3000:]
    assert same_model(work / "final.pt", ref / "final.pt"), "the model differs from an unpreempted run"

    # Known as preemptions, from Slurm's record; requeued by autopard, never as failures.
    assert restarts(job) == 2, story
    preempted = kinds(evs, "preempted")
    assert len(preempted) == 2 and all("grace_s=" in e["detail"] for e in preempted), story
    requeues = kinds(evs, "requeue")
    assert len(requeues) == 2 and all("class=preemption" in e["detail"] for e in requeues), story
    assert not kinds(evs, "failure") and not kinds(evs, "stopped"), story
    assert "autopar-preempted count=2 last=1" in show_job(job), show_job(job)

    # Nothing but the current step lost: run n stopped at the step it checkpointed at its
    # notice, run n+1 trained on from the step after it.
    logged = steps_logged(work)
    for n, requeue in enumerate(requeues):
        step = requeue["step"]
        announced = [e for e in kinds(evs, "termination_checkpoint") if e["step"] == step]
        assert sorted(e["rank"] for e in announced) == [0, 1, 2, 3], story
        last = max(s for r, _, s, _ in logged if r == n)
        first = min(s for r, _, s, _ in logged if r == n + 1)
        assert last == step and first == step + 1, (n, step, last, first, story)
        took = min(t for r, _, s, t in logged if r == n + 1) - notices[n]
        record(f"preemption {n + 1}", notice_to_next_step_s=round(took, 1),
               notice_to_requeue_s=round(requeue["time"] - notices[n], 1), steps_redone=0)
    check_restores_where_committed(evs)
    check_goodput(job, ranks=4, preemptions=2, steps=STEPS - 1, redone_at_most=0)
    check_goodput_timer(job, 4, tmp_path)


def check_restores_where_committed(evs):
    """Each rank's restore read the node-local copy on the node that committed its files, and
    fetched them from storage anywhere else."""
    committed = {(e["step"], e["rank"]): e["node"] for e in kinds(evs, "ckpt_committed")}
    where = {"local": 0, "fetched": 0}
    for e in kinds(evs, "ckpt_restored"):
        f = e["fields"]
        if committed.get((e["step"], e["rank"])) == e["node"]:
            assert f["bytes_fetched"] == "0" and int(f["bytes_local"]) > 0, e
            where["local"] += 1
        else:
            assert f["bytes_local"] == "0" and int(f["bytes_fetched"]) > 0, e
            where["fetched"] += 1
    assert sum(where.values()) > 0, tell(evs)
    record("restores", **where)


def test_a_program_that_ends_at_the_notice_resumes_from_its_last_checkpoint(tmp_path):
    """A program that knows nothing of preemption (no time_limit_reached) dies of the SIGTERM.
    Its launchers ask autopard before they end; autopard finds the preemption in Slurm's record
    and requeues the job at once, so its batch script cannot end it COMPLETED, and the next run
    resumes from the last complete periodic checkpoint, as the timeline says."""
    work = tmp_path / "plain"
    job = submit(work, opts="--requeue-on-failure=1 --partition=scavenger",
                 program=train_cmd(work, steps=60, every=5, obey=False))
    wait_for(lambda: trained(work, 0, 12), 240, "run 0 training 12 steps")
    preempt(job, tmp_path / "preemptor")
    wait_for(lambda: restarts(job) > 0, 60, "the requeue after the preemption")
    state = wait_job(job, timeout=300)
    out = (work / "out.txt").read_text()
    evs = events(job, "preempted")
    story = tell(evs)
    assert state == "COMPLETED" and restarts(job) == 1, out[-3000:] + "\n" + story
    assert (work / "final.pt").exists(), out[-3000:]
    assert kinds(evs, "terminated") and len(kinds(evs, "preempted")) == 1, story
    requeues = kinds(evs, "requeue")
    assert len(requeues) == 1 and "class=preemption" in requeues[0]["detail"] \
        and "without a checkpoint of its own" in requeues[0]["detail"], story
    assert not kinds(evs, "failure") and not kinds(evs, "rank_exit"), story
    logged = steps_logged(work)
    last = max(s for r, _, s, _ in logged if r == 0)
    first = min(s for r, _, s, _ in logged if r == 1)
    assert first % 5 == 0 and last - first < 6, (last, first, story)  # a periodic checkpoint's
    # The steps past that checkpoint were redone: goodput counts their time as lost work, within
    # the run's allocation (Slurm ends it on a whole second, often before the program's end).
    check_goodput(job, ranks=4, preemptions=1, steps=59, redone_at_most=5)


def uploading(job: str) -> bool:
    """Whether a node's autopard holds a commit of JOB that is not uploaded yet."""
    out = run(["scontrol", "show", "job", job], check=True).stdout
    nodes = next((line.split("=", 1)[1] for line in out.split() if line.startswith("NodeList=")), "")
    return nodes not in ("", "(null)") and any(
        pending_uploads(cluster_dir() / "autopard" / n / "autopard.db", job) > 0
        for n in expand_nodes(nodes))


def test_preempted_while_uploading_and_again_while_resuming(tmp_path):
    """Two notices at the worst moments. First while a periodic checkpoint (200 MiB a rank) is
    still uploading: the ranks checkpoint the current step too, and autopard requeues once that
    step is COMPLETE, behind the upload in flight. Then while the next run restores it, before
    its program has trained a step: its launchers tell autopard they ended at the notice, and the
    run after resumes from the same step. Nothing is redone; the model is an unpreempted run's."""
    ref, work, job = reference_and_preemptible(tmp_path, "scavenger", every=10, extra="--pad-mb 200 ")
    wait_for(lambda: trained(work, 0, 12) and uploading(job), 240, "a checkpoint uploading")
    preempt(job, tmp_path / "preemptor-0")
    wait_for(lambda: restarts(job) > 0, 90, "the requeue after the first preemption")
    # The next run on its nodes: preempted before its program trains (it restores, starts Python).
    wait_for(lambda: "step_started" in [e["kind"] for e in events(job)
                                        if "restart=1" in e["detail"]], 60, "run 1 starting")
    preempt(job, tmp_path / "preemptor-1")
    wait_for(lambda: restarts(job) > 1, 90, "the requeue after the second preemption")
    state = wait_job(job, timeout=400)
    out = (work / "out.txt").read_text()
    evs = events(job, "preempted")
    story = tell(evs)
    assert state == "COMPLETED" and restarts(job) == 2, out[-3000:] + "\n" + story
    assert same_model(work / "final.pt", ref / "final.pt"), "the model differs from an unpreempted run"
    requeues = kinds(evs, "requeue")
    assert len(requeues) == 2 and all("class=preemption" in e["detail"] for e in requeues), story
    step = requeues[0]["step"]
    assert f"step {step} is COMPLETE" in requeues[0]["detail"], story
    assert "without a checkpoint of its own" in requeues[1]["detail"], story
    assert not kinds(evs, "failure") and not kinds(evs, "stopped"), story
    # The first notice came while an earlier step was uploading: both reached COMPLETE.
    complete = {e["step"] for e in kinds(evs, "ckpt_complete")}
    assert step in complete and any(s < step and s % 10 == 9 for s in complete), (complete, story)
    logged = steps_logged(work)
    assert max(s for r, _, s, _ in logged if r == 0) == step, story
    assert not [s for r, _, s, _ in logged if r == 1], "run 1 trained before its notice"
    assert min(s for r, _, s, _ in logged if r == 2) == step + 1, story
    check_goodput(job, ranks=4, preemptions=2, steps=STEPS - 1, redone_at_most=0)


def test_a_preemption_without_grace_resumes_from_the_last_complete_checkpoint(tmp_path):
    """In the `nograce` partition (GraceTime=0) Slurm requeues the job at the notice itself: the
    program's SIGTERM comes with the requeue, and the record of the requeued job no longer says
    why. The timeline says so (requeued_by_slurm), and the next run resumes from the last
    complete checkpoint: the one its ranks made at the SIGTERM if it was COMPLETE in time (Slurm's
    KillWait), else a periodic one, whose later steps are redone. The final model is an
    unpreempted run's."""
    ref, work, job = reference_and_preemptible(tmp_path, "nograce", steps=60, every=10)
    wait_for(lambda: trained(work, 0, 15), 240, "run 0 training 15 steps")
    preempt(job, tmp_path / "preemptor")
    wait_for(lambda: restarts(job) > 0, 60, "Slurm's requeue at the notice")
    state = wait_job(job, timeout=300)
    out = (work / "out.txt").read_text()
    evs = events(job, "requeued_by_slurm")
    story = tell(evs)
    assert state == "COMPLETED" and restarts(job) == 1, out[-3000:] + "\n" + story
    assert same_model(work / "final.pt", ref / "final.pt"), "the model differs from an unpreempted run"
    by_slurm = kinds(evs, "requeued_by_slurm")
    assert len(by_slurm) == 1 and "last complete checkpoint" in by_slurm[0]["detail"], story
    assert not kinds(evs, "requeue") and not kinds(evs, "failure"), story
    # Run 1 resumed from the newest step COMPLETE when it started: here the one its ranks
    # checkpointed at the SIGTERM, in KillWait, if that was done in time, else a periodic one.
    started = next(e["time"] for e in kinds(evs, "step_started") if "restart=1" in e["detail"])
    complete = {e["step"] for e in kinds(evs, "ckpt_complete") if e["time"] < started}
    logged = steps_logged(work)
    first = min(s for r, _, s, _ in logged if r == 1)
    last = max(s for r, _, s, _ in logged if r == 0)
    assert complete and first == max(complete) + 1, (first, complete, story)
    record("preemption without grace", steps_redone=last - max(complete))


def test_a_scancel_of_a_preemptible_job_is_not_a_preemption(tmp_path):
    """`scancel` of a job in the preemptible partition: its programs get the same SIGTERM as at a
    preemption notice, but Slurm's record says cancelled, not preempted. autopard does not
    requeue it, nor count a preemption; the job ends CANCELLED."""
    work = tmp_path / "c"
    job = submit(work, opts="--requeue-on-failure=2 --partition=scavenger",
                 program=train_cmd(work, steps=400, every=10))
    wait_for(lambda: trained(work, 0, 8), 240, "run 0 training 8 steps")
    run(["scancel", job], check=True)
    state = wait_job(job, timeout=120)
    time.sleep(2)  # the launchers' last words reach the journal
    evs = events(job)
    story = tell(evs)
    assert state == "CANCELLED" and restarts(job) == 0, story
    assert not kinds(evs, "preempted") and not kinds(evs, "requeue"), story
    assert not kinds(evs, "requeued_by_slurm") and not kinds(evs, "failure"), story


def test_an_upload_that_outlasts_the_job_is_waited_for_by_its_next_run(tmp_path):
    """No grace (`nograce`), and the store unreachable from the notice on (its bucket gone): the
    ranks checkpoint the notice's step in Slurm's KillWait, the run leaves its nodes, and the
    uploads keep failing. The next run starts; its rank 0's restore finds the step every rank
    committed in the job's timeline and waits for it (restore_wait_s) instead of starting again
    from scratch (the job has no other checkpoint). The store comes back, each node's autopard
    finishes its upload, and the run resumes from the notice's step: none is redone, and the
    model is an unpreempted run's."""
    s3, bucket = s3_client(), f"outlast-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    ref, work, job = reference_and_preemptible(tmp_path, "nograce", upload=f"s3://{bucket}/run",
                                               steps=40, every=1000, extra="--pad-mb 20 ")
    wait_for(lambda: trained(work, 0, 12), 240, "run 0 training 12 steps")
    s3.delete_bucket(Bucket=bucket)  # empty: the job has no checkpoint yet
    preempt(job, tmp_path / "preemptor")
    wait_for(lambda: restarts(job) > 0, 60, "Slurm's requeue at the notice")
    wait_for(lambda: "step_started" in [e["kind"] for e in events(job) if "restart=1" in e["detail"]],
             90, "run 1 starting")
    time.sleep(3)
    s3.create_bucket(Bucket=bucket)  # the store is back
    state = wait_job(job, timeout=300)
    out = (work / "out.txt").read_text()
    evs = events(job, "restore_waited")
    story = tell(evs)
    assert state == "COMPLETED" and restarts(job) == 1, out[-3000:] + "\n" + story
    assert same_model(work / "final.pt", ref / "final.pt"), "the model differs from an unpreempted run"
    notice = {e["step"] for e in kinds(evs, "termination_checkpoint")}
    assert len(notice) == 1, story
    step = notice.pop()
    started = next(e["time"] for e in kinds(evs, "step_started") if "restart=1" in e["detail"])
    done = [e["time"] for e in kinds(evs, "ckpt_complete") if e["step"] == step]
    assert done and min(done) > started, ("the step was COMPLETE before the next run", story)
    waited = kinds(evs, "restore_waited")
    assert len(waited) == 1 and waited[0]["step"] == step and "complete=yes" in waited[0]["detail"], story
    logged = steps_logged(work)
    assert max(s for r, _, s, _ in logged if r == 0) == step, story
    assert min(s for r, _, s, _ in logged if r == 1) == step + 1, story
    record("upload after the job left", waited_s=float(waited[0]["fields"]["waited_s"]), steps_redone=0)
