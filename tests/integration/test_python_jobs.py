"""Jobs submitted and followed from Python, on the local cluster: autopar.jobs (stdlib
only) submits the README's demo training (etc/examples), a rank is killed, and the job object
tells the whole story (Slurm's state, the recovery in the timeline, the checkpoints in storage,
the plan); a sweep and a job array are waited on together; pending and running jobs are
cancelled; every bad value raises before a job exists; and the Python option names are exactly
the plugin's (read from `sbatch --help`).

Needs the cluster with autopard on every node (as test_requeue_faults.py). About 1.5 min.
"""
import os
import re
import signal
import time

import pytest

from conftest import PYTHON, SOURCE_DIR, job_ids, run
from test_requeue_faults import CLI, LAUNCH, need_autopard, rank_pid, sockets  # noqa: F401

import sys
sys.path.insert(0, str(SOURCE_DIR / "python"))
from autopar import jobs  # noqa: E402


@pytest.fixture(autouse=True)
def tools(monkeypatch):
    """The build's launcher and CLI, node1's autopard, and the module for the jobs' Python."""
    monkeypatch.setenv("AUTOPAR_LAUNCH", str(LAUNCH))
    monkeypatch.setenv("AUTOPAR_CLI", str(CLI))
    monkeypatch.setenv("AUTOPAR_SOCKET", str(sockets()[0]))
    monkeypatch.setenv("PYTHONPATH", str(SOURCE_DIR / "python"))


def shared(tmp_path):
    tmp_path.chmod(0o1777)
    return tmp_path


DEMO = SOURCE_DIR / "etc" / "examples" / "train_ddp.py"


def test_the_demo_training_submitted_from_python_is_followed_to_its_end(tmp_path):
    """The README's demo job (etc/examples/train.sbatch's options and training) from Python: once
    a checkpoint is COMPLETE (seen through job.checkpoints()) rank 5 is killed; the job object
    shows the recovery in place and the resume in its events, its checkpoints and its plan."""
    work = shared(tmp_path)
    job = jobs.submit([PYTHON, str(DEMO), "--steps", "60", "--step-sleep", "0.2"],
                      name="autopar-demo", nodes=4, tasks_per_node=2, output=str(work / "out.txt"),
                      chdir=str(work), auto_parallel=True, model="llama-2-7b", gpu_type="a100-80gb",
                      global_batch=64, seq_len=2048, ckpt_dir=f"{work}/local/%n", ckpt_keep=2,
                      ckpt_upload=f"file://{work}/store", requeue_on_failure=2, heartbeat_timeout=60)
    assert re.fullmatch(r"\d+", job.id)
    try:
        assert job.state() in ("PENDING", "CONFIGURING", "RUNNING")
        deadline = time.time() + 180
        while not any(s["state"] == "COMPLETE" for s in job.checkpoints()):
            assert time.time() < deadline and job.state() in ("PENDING", "CONFIGURING", "RUNNING"), \
                job.output(40)
            time.sleep(0.5)
        assert job.state() == "RUNNING"
        os.kill(rank_pid(job.id, 5, DEMO), signal.SIGKILL)
        assert job.wait(timeout=300) == "COMPLETED", job.output(40)
    finally:
        job.cancel()
    evs = job.events()
    assert all(isinstance(e, jobs.Event) for e in evs) and evs == sorted(evs, key=lambda e: e.time)
    crash = [e for e in evs if e.kind == "failure"]
    assert crash and crash[0].fields["class"] == "rank-crash" and crash[0].fields["signal"] == "9", crash
    assert [e.fields["action"] for e in evs if e.kind == "recovery"] == ["restart-in-place"]
    # The nodes' periodic usage records may trail the end by a tick (a node's programs exit after
    # rank 0's launcher journals it): the timeline's last event of the run itself is its end.
    run = [e for e in evs if e.kind != "usage"]
    assert any(e.kind == "resumed" for e in evs) and run[-1].kind == "finished", [e.kind for e in evs]
    steps = job.checkpoints()
    assert steps and all(s["job_id"] == job.id for s in steps), steps
    assert any(s["state"] == "COMPLETE" and s["uri"].startswith(f"file://{work}/store") for s in steps), steps
    plan = job.plan()
    assert plan["model"] == "llama-2-7b" and plan["gpus"] == "8", plan
    assert int(plan["tp"]) * int(plan["pp"]) * int(plan["dp"]) == 8, plan
    assert job.output(100).strip()


# Functions the jobs below call: importable on every node (this file's directory is on the
# submitter's sys.path, which submit passes to the job).
def where_am_i(tag):
    return {"tag": tag, "job": os.environ["SLURM_JOB_ID"], "rank": int(os.environ["RANK"]),
            "world": int(os.environ["WORLD_SIZE"]), "restart": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))}


class BadLearningRate(ValueError):
    pass


def refuse(lr):
    raise BadLearningRate(f"lr={lr} diverges")


def crash_once(marker):
    """The first run dies as a killed rank does; the run that follows returns."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return "the run after the crash"


def test_a_function_job_returns_its_value_from_every_rank(tmp_path):
    work = shared(tmp_path)
    job = jobs.submit(where_am_i, "a", folder=str(work / "calls"), ranks="all", nodes=2, tasks_per_node=2)
    value = job.result(timeout=120)
    assert value == {"tag": "a", "job": job.id, "rank": 0, "world": 4, "restart": 0}, job.stderr()
    assert job.state() == "COMPLETED" and job.done()
    outcomes = [jobs._functions().read_outcome(job.call_dir, r) for r in range(4)]
    assert [o[1]["rank"] for o in outcomes] == [0, 1, 2, 3], outcomes


def test_a_function_jobs_exception_is_raised_with_its_remote_traceback(tmp_path):
    work = shared(tmp_path)
    job = jobs.submit(refuse, 0.5, folder=str(work / "calls"), nodes=1, tasks_per_node=2)  # rank 0 only
    with pytest.raises(BadLearningRate, match="lr=0.5 diverges") as raised:
        job.result(timeout=120)
    assert any("remote traceback" in n and "in refuse" in n for n in raised.value.__notes__)
    assert job.state() == "FAILED"
    assert "BadLearningRate: lr=0.5 diverges" in job.stderr()
    assert jobs._functions().read_outcome(job.call_dir, 1) is None  # rank 1 did not call it


@pytest.mark.parametrize("restarts_in_place,recovered_by", [
    (None, [("recovery", "restart-in-place")]), (0, [("requeue", None)])])
def test_a_restarted_function_job_returns_the_finished_runs_value(tmp_path, restarts_in_place, recovered_by):
    work = shared(tmp_path)
    job = jobs.submit(crash_once, str(work / "crashed"), folder=str(work / "calls"), nodes=1,
                      tasks_per_node=1, requeue_on_failure=2, restarts_in_place=restarts_in_place)
    assert job.result(timeout=180) == "the run after the crash", job.stderr()
    assert job.state() == "COMPLETED"
    evs = job.events()
    assert [(e.kind, e.fields.get("action")) for e in evs if e.kind in ("recovery", "requeue")] == \
        recovered_by, [e.kind for e in evs]


def test_an_executor_maps_a_function_over_values_as_one_array(tmp_path):
    work = shared(tmp_path)
    ex = jobs.Executor(folder=str(work / "calls"), nodes=1, tasks_per_node=1)
    ex.update_parameters(time="00:05:00")
    mapped = ex.map_array(where_am_i, ["x", "y", "z"])
    assert [j.result(timeout=120)["tag"] for j in mapped] == ["x", "y", "z"]
    array_id = mapped[0].id.split("_")[0]
    assert [j.id for j in mapped] == [f"{array_id}_{i}" for i in range(3)]  # one Slurm array
    assert [t.id for t in jobs.Job(array_id).tasks()] == [j.id for j in mapped]
    assert all(j.state() == "COMPLETED" for j in mapped)


def test_a_sweep_and_a_job_array_are_waited_on_together(tmp_path):
    work = shared(tmp_path)
    sweep = [jobs.submit(["bash", "-c", f"echo lr={lr}"], name=f"sweep-{lr}", nodes=1, tasks_per_node=1,
                         output=str(work / f"lr-{lr}.txt"))
             for lr in ("1e-3", "3e-4", "1e-4")]
    array = jobs.submit(["bash", "-c", "echo task=$SLURM_ARRAY_TASK_ID"], array="0-2", nodes=1,
                        tasks_per_node=1, output=str(work / "array-%a.txt"))
    states = jobs.wait_all([*sweep, array], timeout=120, poll=0.3)
    assert states == {j.id: "COMPLETED" for j in [*sweep, array]}, states
    for lr in ("1e-3", "3e-4", "1e-4"):
        assert (work / f"lr-{lr}.txt").read_text().strip() == f"lr={lr}"
    assert sorted((work / f"array-{i}.txt").read_text().strip() for i in range(3)) == \
        ["task=0", "task=1", "task=2"]
    tasks = array.tasks()
    assert [t.id for t in tasks] == [f"{array.id}_{i}" for i in range(3)], tasks
    assert [t.output().strip() for t in tasks] == ["task=0", "task=1", "task=2"]
    assert all(t.state() == "COMPLETED" for t in tasks)


def test_pending_and_running_jobs_are_cancelled(tmp_path):
    work = shared(tmp_path)
    pending = jobs.submit("sleep 60", nodes=1, tasks_per_node=1, output="/dev/null",
                          extra=["--begin=now+3600"])
    running = jobs.submit("sleep 60", nodes=1, tasks_per_node=1, output=str(work / "out.txt"))
    deadline = time.time() + 30
    while running.state() != "RUNNING":
        assert time.time() < deadline, running.state()
        time.sleep(0.2)
    assert pending.state() == "PENDING"
    pending.cancel()
    running.cancel()
    assert jobs.wait_all([pending, running], timeout=60, poll=0.3) == \
        {pending.id: "CANCELLED", running.id: "CANCELLED"}
    with pytest.raises(TimeoutError, match="jobs still running after 0.5s"):
        jobs.wait_all([jobs.submit("sleep 30", nodes=1, tasks_per_node=1, output="/dev/null")], timeout=0.5)


@pytest.mark.parametrize("kwargs,error,kind", [
    ({"ckpt_keep": 0, "ckpt_dir": "/tmp/x"}, "autopar: --ckpt-keep: must be an integer", jobs.SubmitError),
    ({"min_nodes": 2}, "autopar: --min-nodes: needs in-place restarts", jobs.SubmitError),
    ({"auto_parallel": True}, "autopar: --auto-parallel: needs --model", jobs.SubmitError),
    ({"partition": "nope"}, "nvalid partition", jobs.SubmitError),
    ({"memory": "lots"}, "memory: 'lots' is not a size", ValueError),
    ({"image": "pytorch:latest"}, "image: this site's sbatch has no --container-image", ValueError),
    ({"gpus": 8}, "unexpected keyword argument 'gpus'", TypeError),
])
def test_bad_values_raise_before_a_job_exists(tmp_path, kwargs, error, kind):
    before = job_ids()
    with pytest.raises(kind) as raised:
        jobs.submit("true", nodes=1, output="/dev/null", **kwargs)
    assert error in str(raised.value) and "\n" not in str(raised.value), str(raised.value)
    assert not job_ids() - before


def test_the_python_options_are_the_plugins():
    """Every option the plugin registers (sbatch --help lists them) has its Python name, and no
    other: the two cannot drift."""
    p = run(["sbatch", "--help"], check=True)
    section = p.stdout.split("Options provided by plugins:", 1)
    assert len(section) == 2, p.stdout[-2000:]
    plugins = re.split(r"^\S.*:$", section[1], maxsplit=1, flags=re.M)[0]  # up to the next section
    flags = set(re.findall(r"^\s+(--[a-z][a-z-]*)", plugins, re.M))
    assert flags == set(jobs.AUTOPAR_OPTIONS.values()), flags ^ set(jobs.AUTOPAR_OPTIONS.values())
