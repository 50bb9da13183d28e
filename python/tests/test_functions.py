"""Function jobs without a cluster: the call pickled into its folder, run as the job's tasks run it
(`python3 -m autopar run-function DIR`), and the outcome the Job reads back; the local mode."""
import os
import subprocess
import sys

import pytest

from autopar import functions, jobs

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fake_tool(tmp_path, name, text):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def forgotten(monkeypatch, tmp_path):
    """Slurm knows the job no more, accounting neither, autopard has no timeline of it."""
    monkeypatch.setenv("AUTOPAR_SCONTROL", _fake_tool(tmp_path, "scontrol", "exit 1\n"))
    monkeypatch.setenv("AUTOPAR_SACCT", _fake_tool(tmp_path, "sacct", "exit 0\n"))
    monkeypatch.setenv("AUTOPAR_CLI", _fake_tool(tmp_path, "autopar", "exit 1\n"))


@pytest.fixture
def sbatch(monkeypatch, tmp_path):
    """A fake sbatch that records its arguments and standard input, and answers job 40 (or
    refuses with Slurm's line when $REFUSE is set)."""
    log = tmp_path / "sbatch.log"
    monkeypatch.setenv("AUTOPAR_SBATCH", _fake_tool(tmp_path, "sbatch", f"""
if [ -n "$REFUSE" ]; then echo 'sbatch: error: Batch job submission failed: Invalid job array specification' >&2; exit 1; fi
echo "$@" >> {log}
cat >> {log}
echo 40
"""))
    return log


@pytest.fixture
def ended(monkeypatch, tmp_path):
    """Slurm says the job completed (accounting)."""
    monkeypatch.setenv("AUTOPAR_SCONTROL", _fake_tool(tmp_path, "scontrol", "exit 1\n"))
    monkeypatch.setenv("AUTOPAR_SACCT", _fake_tool(tmp_path, "sacct", "echo COMPLETED\n"))


def run_task(call_dir, rank, array_task=None):
    """One task of the job, as autopar-launch starts it (of a job array's task `array_task`)."""
    # The caller's modules are importable in the job (submit passes its sys.path): here, this file's.
    path = os.pathsep.join([PYTHON_DIR, os.path.dirname(os.path.abspath(__file__))])
    env = {**os.environ, "RANK": str(rank), "PYTHONPATH": path, "AUTOPAR_STACKS": "0"}
    if array_task is not None:
        env["SLURM_ARRAY_TASK_ID"] = str(array_task)
    return subprocess.run([sys.executable, "-m", "autopar", "run-function", str(call_dir)], env=env,
                          capture_output=True, text=True)


def add(a, b=0):
    return a + b


class Refused(Exception):
    pass


def refuse(why):
    raise Refused(why)


def test_a_value_comes_back(tmp_path, ended):
    call = tmp_path / "call"
    functions.write_call(str(call), add, (2,), {"b": 3}, "0")
    assert oct(call.stat().st_mode & 0o777) == "0o700"
    assert run_task(call, 0).returncode == 0
    job = jobs.FunctionJob("5", str(call))
    assert job.result(timeout=5) == 5
    assert job.exception(timeout=5) is None
    assert job.done()


def test_an_exception_comes_back_with_its_remote_traceback(tmp_path, ended):
    call = tmp_path / "call"
    functions.write_call(str(call), refuse, ("no",), {}, "0")
    p = run_task(call, 0)
    assert p.returncode == 1 and "Refused: no" in p.stderr
    job = jobs.FunctionJob("6", str(call))
    with pytest.raises(Refused, match="no") as raised:
        job.result(timeout=5)
    assert any("remote traceback" in n and "in refuse" in n for n in raised.value.__notes__)
    assert isinstance(job.exception(timeout=5), Refused)


def test_only_rank_zero_runs_it_unless_every_rank_should(tmp_path):
    one, every = tmp_path / "one", tmp_path / "every"
    functions.write_call(str(one), add, (1,), {}, "0")
    assert run_task(one, 1).returncode == 0
    assert functions.read_outcome(str(one), 1) is None and functions.read_outcome(str(one)) is None
    functions.write_call(str(every), add, (1,), {}, "all")
    assert run_task(every, 1).returncode == 0
    assert functions.read_outcome(str(every), 1) == ("ok", 1)


def test_a_value_that_cannot_travel_back_is_an_error(tmp_path):
    call = tmp_path / "call"
    functions.write_call(str(call), lambda: (x for x in ()), (), {}, "0")  # a generator
    assert run_task(call, 0).returncode == 1
    outcome = functions.read_outcome(str(call))
    assert outcome[0] == "error" and "cannot be pickled" in str(outcome[1])


def test_a_job_that_ended_without_an_outcome_says_so(tmp_path, ended):
    call = tmp_path / "call"
    functions.write_call(str(call), add, (1,), {}, "0")
    (call / "7.err").write_text("Killed\n")
    job = jobs.FunctionJob("7", str(call), stderr_path=str(call / "7.err"))
    with pytest.raises(RuntimeError, match="job 7 ended COMPLETED without the function's outcome; "
                                           "its stderr ends: Killed"):
        job.result(timeout=5)


def test_the_last_finished_run_wins(tmp_path):
    """A requeued or restarted job runs the call again: its outcome replaces the earlier one."""
    call = tmp_path / "call"
    functions.write_call(str(call), add, (1,), {}, "0")
    run_task(call, 0)
    functions.write_call(str(call), add, (2,), {}, "0")
    run_task(call, 0)
    assert functions.read_outcome(str(call)) == ("ok", 2)
    assert sorted(os.listdir(call)) == ["call.pkl", "result.pkl"]


def test_local_mode_calls_it_here():
    job = jobs.submit(add, 2, kwargs={"b": 5}, local=True)
    assert (job.result(), job.state(), job.done(), job.job_id) == (7, "COMPLETED", True, "local")
    failed = jobs.submit(refuse, "x", local=True)
    assert failed.state() == "FAILED" and isinstance(failed.exception(), Refused)
    with pytest.raises(Refused):
        failed.result()


def test_function_arguments_are_checked():
    with pytest.raises(ValueError, match="ranks: 'some' is not one of 0, all"):
        functions.write_call("/nonexistent/x", add, (), {}, "some")
    with pytest.raises(ValueError, match="array: a function job is one call"):
        jobs.submit(add, 1, array="0-3")
    with pytest.raises(TypeError, match="args, kwargs=, folder= and local= go with a function"):
        jobs.submit("true", 1)
    with pytest.raises(TypeError, match="the call cannot be pickled"):
        import threading
        functions.write_call("/tmp/autopar-unpicklable-test", add, (threading.Lock(),), {}, "0")


def test_the_entry_point_says_how_to_use_it():
    p = subprocess.run([sys.executable, "-m", "autopar"], env={**os.environ, "PYTHONPATH": PYTHON_DIR},
                       capture_output=True, text=True)
    assert p.returncode == 2 and "usage: python3 -m autopar run-function DIR" in p.stderr


def test_the_executor_holds_the_keywords_and_maps():
    ex = jobs.Executor(local=True, nodes=1)
    ex.update_parameters(time="01:00:00", memory="1GiB")
    assert ex.parameters == {"local": True, "nodes": 1, "time": "01:00:00", "memory": "1GiB"}
    assert ex.submit(add, 1, b=2).result() == 3
    assert [j.result() for j in ex.map_array(add, [1, 2], [10, 20])] == [11, 22]
    with pytest.raises(ValueError, match="time: 60 is not a time limit"):
        ex.update_parameters(time=60)
    assert ex.parameters["time"] == "01:00:00"  # a refused value changes nothing
    with pytest.raises(TypeError, match="unexpected keyword argument 'gpus'"):
        jobs.Executor(gpus=8)



def test_map_array_is_one_slurm_array_with_a_job_per_task(tmp_path, sbatch, forgotten):
    ex = jobs.Executor(folder=str(tmp_path / "calls"), launcher="/x/autopar-launch", nodes=1)
    tasks = ex.map_array(add, [1, 2, 3], [10, 20, 30])
    submitted = sbatch.read_text()
    assert submitted.count("--parsable") == 1 and "--array=0-2" in submitted.split()
    assert [t.job_id for t in tasks] == ["40_0", "40_1", "40_2"]
    call_dir = os.path.dirname(tasks[0].call_dir)
    assert f"--output={call_dir}/%a/%A_%a.out" in submitted
    assert tasks[1].stdout_path == f"{call_dir}/1/40_1.out"
    assert f"run-function {call_dir}\n" in submitted  # every task the same line; its index picks
    for i in range(3):
        assert run_task(call_dir, 0, array_task=i).returncode == 0
    assert [t.result(timeout=5) for t in tasks] == [11, 22, 33]
    assert [t.state() for t in tasks] == ["COMPLETED"] * 3  # from each task's outcome file


def test_map_array_parallelism_and_refusals(tmp_path, sbatch, monkeypatch):
    ex = jobs.Executor(folder=str(tmp_path / "calls"), launcher="/x/autopar-launch",
                       array_parallelism=2)
    assert ex.map_array(add, []) == []
    assert [t.job_id for t in ex.map_array(add, [5])] == ["40_0"]
    assert "--array=0-0%2" in sbatch.read_text().split()
    with pytest.raises(ValueError, match="array_parallelism: must be an integer >= 1"):
        ex.update_parameters(array_parallelism=0)
    with pytest.raises(ValueError, match="array: map_array makes the array"):
        ex.update_parameters(array="0-3")
    monkeypatch.setenv("REFUSE", "1")
    before = sorted(os.listdir(tmp_path / "calls"))
    with pytest.raises(jobs.SubmitError, match="Invalid job array specification"):
        ex.map_array(add, [1, 2])
    assert sorted(os.listdir(tmp_path / "calls")) == before  # nothing left of a refused array


def test_a_forgotten_function_jobs_state_is_its_outcome(tmp_path, forgotten):
    good, bad = tmp_path / "good", tmp_path / "bad"
    functions.write_call(str(good), add, (1,), {}, "0")
    functions.write_call(str(bad), refuse, ("x",), {}, "0")
    run_task(good, 0), run_task(bad, 0)
    assert jobs.FunctionJob("8", str(good)).wait(timeout=5) == "COMPLETED"
    assert jobs.FunctionJob("9", str(bad)).wait(timeout=5) == "FAILED"
    functions.write_call(str(tmp_path / "never"), add, (1,), {}, "0")
    assert jobs.FunctionJob("10", str(tmp_path / "never")).state() == "UNKNOWN"


# Unpickling runs code: nothing is unpickled from a folder or a file another user could write.
def test_a_folder_others_can_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone may replace what is in it
    with pytest.raises(PermissionError, match="writable by group or others and not sticky"):
        functions.write_call(str(shared / "run"), len, ([1],), {}, "0")
    assert not (shared / "run").exists()
    with pytest.raises(PermissionError, match="writable by group or others"):
        functions.read_outcome(str(shared))


def test_a_pickle_through_a_symlink_or_writable_by_others_is_never_read(tmp_path):
    folder = tmp_path / "call"
    functions.write_call(str(folder), len, ([1, 2],), {}, "0")
    assert (folder.stat().st_mode & 0o777) == 0o700
    planted = tmp_path / "planted.pkl"
    planted.write_bytes((folder / "call.pkl").read_bytes())
    (folder / "result.pkl").symlink_to(planted)
    with pytest.raises(PermissionError, match="never through a symlink"):
        functions.read_outcome(str(folder))
    (folder / "result.pkl").unlink()
    (folder / "call.pkl").chmod(0o666)
    with pytest.raises(PermissionError, match="not unpickled"):
        functions.run(str(folder))


def test_a_temporary_file_is_never_written_through(tmp_path):
    folder = tmp_path / "call"
    functions.write_call(str(folder), len, ([1],), {}, "0")
    victim = tmp_path / "victim"
    victim.write_text("unchanged")
    os.symlink(victim, f"{folder}/result.pkl.tmp-{os.getpid()}")
    assert functions.run(str(folder)) == 0
    assert victim.read_text() == "unchanged"
    assert functions.read_outcome(str(folder)) == ("ok", 1)
