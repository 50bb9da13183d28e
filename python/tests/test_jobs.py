"""autopar.jobs without a cluster: what each argument becomes on sbatch's command line, and the one
line a refusal comes back as. The cluster tests (tests/integration/test_python_jobs.py) submit."""
import datetime
import json

import pytest

from autopar import jobs


def test_the_seed_call_maps_one_to_one():
    args = jobs.sbatch_arguments(name="llm-training", gpu_type="A100", gpu_count=8, memory="64GiB")
    assert args == ["--job-name=llm-training", "--gpus-per-node=8", "--ntasks-per-node=8",
                    "--mem=65536M", "--gpu-type=a100-80gb"]


def test_slurm_and_autopar_options():
    args = jobs.sbatch_arguments(
        nodes="2-4", tasks_per_node=2, cpus_per_task=4, time="01:00:00", partition="gpu",
        account="ml", qos="high", output="/tmp/o-%j.txt", error="/tmp/e-%j.txt", array="0-2",
        gpu_count=4, gres_type="h100", auto_parallel={"tp": 2, "pp": 1}, model="llama-2-7b",
        global_batch=512, seq_len=4096, ckpt_dir="/local/%j", ckpt_upload="s3://b/p", ckpt_keep=3,
        requeue_on_failure=True, heartbeat_timeout=600, restarts_in_place=2, spare_nodes=0,
        min_nodes=2, extra=["--exclusive"])
    assert args == ["--nodes=2-4", "--gpus-per-node=h100:4", "--ntasks-per-node=2", "--cpus-per-task=4",
                    "--time=01:00:00", "--partition=gpu", "--account=ml", "--qos=high",
                    "--output=/tmp/o-%j.txt", "--error=/tmp/e-%j.txt", "--array=0-2",
                    "--auto-parallel=tp=2,pp=1", "--model=llama-2-7b", "--global-batch=512",
                    "--seq-len=4096", "--ckpt-dir=/local/%j", "--ckpt-upload=s3://b/p", "--ckpt-keep=3",
                    "--requeue-on-failure", "--heartbeat-timeout=600", "--restarts-in-place=2",
                    "--spare-nodes=0", "--min-nodes=2", "--exclusive"]
    assert jobs.sbatch_arguments(auto_parallel=True) == ["--auto-parallel"]
    assert jobs.sbatch_arguments(auto_parallel={"tp": 8, "fsdp": 124}) == ["--auto-parallel=tp=8,fsdp=124"]
    assert jobs.sbatch_arguments(auto_parallel={"fsdp": True}) == ["--auto-parallel=fsdp"]
    assert jobs.sbatch_arguments(auto_parallel={"hsdp": (8, 4)}) == ["--auto-parallel=hsdp=8,4"]
    assert jobs.sbatch_arguments(auto_parallel=False, model=None) == []


@pytest.mark.parametrize("value,mib", [("64GiB", 65536), ("64G", 65536), ("64GB", 61036), ("500M", 500),
                                       ("1.5GiB", 1536), ("2T", 2097152), ("100MB", 96)])
def test_memory_units(value, mib):
    assert jobs._memory_mib(value) == mib


@pytest.mark.parametrize("kwargs,error", [
    ({"memory": "lots"}, "memory: 'lots' is not a size"),
    ({"memory": "64Gi"}, "memory: '64Gi' is not a size"),
    ({"memory": 64}, "memory: '64' has no unit .Slurm would read it as 64 MiB.: say '64GiB' or '64MiB'"),
    ({"memory": "4096"}, "memory: '4096' has no unit"),
    ({"time": 3600}, "time: 3600 is not a time limit .Slurm would read 3600 as minutes.: give '01:00:00'"),
    ({"time": "90"}, "time: '90' is not a time limit: give 'HH:MM:SS'"),
    ({"time": "1h"}, "time: '1h' is not a time limit"),
    ({"time": datetime.timedelta(0)}, "time: 0:00:00 must be more than 0"),
    ({"extra": 5}, "extra: must be a list of strings"),
    ({"extra": ["--exclusive", 3]}, "extra: must be a list of strings"),
    ({"extra": "--comment='unclosed"}, "extra: .* No closing quotation"),
    ({"gpu_count": 0}, "gpu_count: must be an integer >= 1"),
    ({"nodes": "two"}, "nodes: must be an integer >= 1"),
    ({"tasks_per_node": True}, "tasks_per_node: must be an integer >= 1"),
    ({"partition": " "}, "partition: must not be empty"),
    ({"model": True}, "model: needs a value"),
])
def test_values_that_cannot_be_one_name_the_argument(kwargs, error):
    with pytest.raises(ValueError, match=error):
        jobs.sbatch_arguments(**kwargs)


@pytest.mark.parametrize("value,slurm", [
    ("04:00:00", "04:00:00"), ("30:00", "30:00"), ("2-12", "2-12"), ("1-00:30:00", "1-00:30:00"),
    ("UNLIMITED", "UNLIMITED"), (datetime.timedelta(hours=1), "0-01:00:00"),
    (datetime.timedelta(days=2, minutes=1, seconds=0.5), "2-00:01:01")])
def test_time_limits_in_slurms_forms(value, slurm):
    assert jobs.sbatch_arguments(time=value) == [f"--time={slurm}"]


def test_extra_as_one_string_is_split_as_a_shell_would():
    assert jobs.sbatch_arguments(extra="--exclusive --comment='two words'") == \
        ["--exclusive", "--comment=two words"]
    assert jobs.sbatch_arguments(extra=("--exclusive",)) == ["--exclusive"]


@pytest.mark.parametrize("env,error", [
    ({"A": [1]}, r"env: A: \[1\] is not a string or a number"),
    ({"A B": "1"}, "env: 'A B' is not a variable name"),
    ({1: "x"}, "env: 1 is not a variable name"),
    (["A=1"], "env: must be a dict"),
])
def test_env_values_are_checked_by_name(env, error):
    with pytest.raises(ValueError, match=error):
        jobs.submit("true", env=env)


def test_env_numbers_become_strings():
    assert jobs._environment({"A": 1, "B": 0.5, "C": "x"}) == {"A": "1", "B": "0.5", "C": "x"}


def test_every_argument_is_checked_without_slurm(monkeypatch, tmp_path):
    """No sbatch anywhere: a bad argument is still named; a good one gets as far as looking for
    sbatch."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("AUTOPAR_SBATCH", raising=False)
    with pytest.raises(ValueError, match="memory: '8' has no unit"):
        jobs.submit("true", memory=8, launcher="/x/autopar-launch")
    with pytest.raises(TypeError, match="command: a shell command .* or a function, got int"):
        jobs.submit(command=42)
    with pytest.raises(FileNotFoundError, match="sbatch not found"):
        jobs.submit(print, "x", folder=str(tmp_path / "calls"), launcher="/x/autopar-launch")
    assert not (tmp_path / "calls").exists()  # nothing written for a job that cannot be submitted
    with pytest.raises(FileNotFoundError, match="sbatch not found"):
        jobs.submit("true", memory="8GiB", time="01:00:00", launcher="/x/autopar-launch")


def test_the_output_path_submit_expects(tmp_path):
    assert jobs._stdout_path({"output": "/o/%x-%j.txt", "name": "n"}, "12") == "/o/n-12.txt"
    assert jobs._stdout_path({"output": "/o/100%%-%j"}, "12") == "/o/100%-12"
    assert jobs._stdout_path({"chdir": "/w"}, "12") == "/w/slurm-12.out"
    assert jobs._stdout_path({"output": "/o/%N.txt"}, "12") is None
    assert jobs._stdout_path({"output": "/o/%x.txt"}, "12") is None  # sbatch names it, not us
    assert jobs._stdout_path({"array": "0-3"}, "12") is None
    assert jobs._stdout_path({"array": "0-3", "output": "/o/%A_%a.out"}, "12", 3) == "/o/12_3.out"
    assert jobs._stdout_path({"array": "0-3", "output": "/o/%j.out"}, "12", 3) is None


def _fake_tool(tmp_path, name, text):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return str(path)


def test_a_job_slurm_has_forgotten(monkeypatch, tmp_path):
    """scontrol no longer knows it and there is no accounting: wait() returns UNKNOWN at once,
    cancel() has nothing to do, output() reads the file submit expected."""
    monkeypatch.setenv("AUTOPAR_SCONTROL", _fake_tool(
        tmp_path, "scontrol", "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1\n"))
    monkeypatch.setenv("AUTOPAR_SACCT", _fake_tool(tmp_path, "sacct", "exit 0\n"))
    monkeypatch.setenv("AUTOPAR_SCANCEL", _fake_tool(
        tmp_path, "scancel", "echo 'scancel: error: Invalid job id specified' >&2; exit 1\n"))
    monkeypatch.setenv("AUTOPAR_CLI", _fake_tool(
        tmp_path, "autopar", "echo 'autopar report: no events of job 999' >&2; exit 1\n"))
    out = tmp_path / "slurm-999.out"
    out.write_text("a\nb\nlast\n")
    job = jobs.Job("999", stdout_path=str(out))
    assert job.state() == "UNKNOWN"
    assert job.wait(timeout=5) == "UNKNOWN"
    job.cancel()
    assert job.output(lines=1) == "last\n"


def test_accounting_tells_a_forgotten_jobs_state(monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOPAR_SCONTROL", _fake_tool(tmp_path, "scontrol", "exit 1\n"))
    monkeypatch.setenv("AUTOPAR_SACCT", _fake_tool(tmp_path, "sacct", "echo 'FAILED'\n"))
    assert jobs.Job("999").wait(timeout=5) == "FAILED"


@pytest.mark.parametrize("end,state", [("finished exit=0", "COMPLETED"),
                                       ("stopped: crash, no requeues left", "FAILED"), ("", "UNKNOWN")])
def test_autopars_timeline_tells_a_forgotten_jobs_end(monkeypatch, tmp_path, end, state):
    """Neither scontrol nor accounting knows the job: `autopar report`'s end says how it ended."""
    monkeypatch.setenv("AUTOPAR_SCONTROL", _fake_tool(tmp_path, "scontrol", "exit 1\n"))
    monkeypatch.setenv("AUTOPAR_SACCT", _fake_tool(tmp_path, "sacct", "exit 0\n"))
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"job_id": "999", "end": end}))
    monkeypatch.setenv("AUTOPAR_CLI", _fake_tool(
        tmp_path, "autopar", f'[ "$1 $2 $3" = "report 999 --json" ] || exit 9\ncat {report}\n'))
    assert jobs.Job("999").wait(timeout=5) == state


def test_unknown_keywords_are_refused():
    with pytest.raises(TypeError, match="unexpected keyword argument 'gpus'"):
        jobs.sbatch_arguments(gpus=8)


def test_a_refusal_is_one_line():
    plugin = ("sbatch: error: autopar: --ckpt-keep: must be an integer in [1, 100], got '0'\n"
              "sbatch: error: spank: required plugin autopar.so: init_post_opt() failed with rc=-1\n")
    assert jobs._one_line(plugin) == "autopar: --ckpt-keep: must be an integer in [1, 100], got '0'"
    slurm = "sbatch: error: invalid partition specified: nope\nsbatch: error: Batch job submission failed\n"
    assert jobs._one_line(slurm) == "invalid partition specified: nope"


def test_the_batch_script_runs_the_command_under_the_launcher():
    text = jobs.batch_script(["python", "train.py", "--lr", "1e-3 x"], launcher="/opt/autopar-launch")
    assert text.splitlines()[-1] == "srun --mpi=pmix /opt/autopar-launch -- python train.py --lr '1e-3 x'"
    assert text.startswith("#!/bin/bash\n")
    with pytest.raises(ValueError, match="command: must not be empty"):
        jobs.batch_script(" ", launcher="x")
    with pytest.raises(ValueError, match="exactly one of command= and script="):
        jobs.submit()


def test_an_arrays_tasks_are_jobs_of_their_own(monkeypatch, tmp_path):
    records = "\n".join(f"JobId={20 + i} ArrayJobId=20 ArrayTaskId={i} JobState=COMPLETED "
                        f"StdOut={tmp_path}/a-{i}.txt" for i in (2, 0, 1))
    monkeypatch.setenv("AUTOPAR_SCONTROL", _fake_tool(tmp_path, "scontrol", f"cat <<'X'\n{records}\nX\n"))
    for i in range(3):
        (tmp_path / f"a-{i}.txt").write_text(f"task {i}\n")
    tasks = jobs.Job("20").tasks()
    assert [t.id for t in tasks] == ["20_0", "20_1", "20_2"]
    assert [t.stdout_path for t in tasks] == [f"{tmp_path}/a-{i}.txt" for i in range(3)]



def _double(x):
    return 2 * x


def _negate(x):
    return -x


def test_a_batch_is_one_array_of_its_calls(monkeypatch, tmp_path):
    """Executor.batch(): the calls made inside (different functions too) go to one sbatch at the
    block's end, as an array of that many tasks; each shell becomes its task's FunctionJob."""
    log = tmp_path / "sbatch.args"
    monkeypatch.setenv("AUTOPAR_SBATCH", _fake_tool(tmp_path, "sbatch", f'echo "$@" >> {log}; echo 77\n'))
    monkeypatch.setenv("AUTOPAR_LAUNCH", "/bin/true")
    ex = jobs.Executor(folder=str(tmp_path / "calls"), nodes=1, array_parallelism=2)
    with ex.batch():
        shells = [ex.submit(_double, 3), ex.submit(_negate, x=4)]
        with pytest.raises(RuntimeError, match="not submitted yet"):
            shells[0].state()
        with pytest.raises(RuntimeError, match="not inside a batch"):
            ex.update_parameters(nodes=2)
    assert log.read_text().count("--array=0-1%2") == 1 and len(log.read_text().splitlines()) == 1
    assert [j.id for j in shells] == ["77_0", "77_1"]
    functions = jobs._functions()
    calls = [functions._cloudpickle().loads(functions._read_own(f"{j.call_dir}/call.pkl")) for j in shells]
    assert [fn(*args, **kwargs) for fn, args, kwargs, _ in calls] == [6, -4]


def test_an_exception_inside_a_batch_submits_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOPAR_SBATCH", _fake_tool(tmp_path, "sbatch", "echo called >&2; exit 1\n"))
    monkeypatch.setenv("AUTOPAR_LAUNCH", "/bin/true")
    ex = jobs.Executor(folder=str(tmp_path / "calls"), nodes=1)
    with pytest.raises(KeyError):
        with ex.batch():
            ex.submit(_double, 1)
            raise KeyError("the caller's own error")
    assert not (tmp_path / "calls").exists()
    with pytest.raises(jobs.SubmitError, match="called"):  # the refusal at the end leaves nothing
        with ex.batch():
            shell = ex.submit(_double, 1)
    assert not any((tmp_path / "calls").iterdir())
    with pytest.raises(RuntimeError, match="not submitted yet"):
        shell.result()
    with ex.batch():  # and the executor is usable again, an empty block submits nothing
        pass


def test_local_jobs_complete_as_submitits_helpers_do():
    ex = jobs.Executor(local=True)
    done = list(jobs.as_completed([ex.submit(_double, 2), ex.submit(_negate, 2)], timeout=1))
    assert [j.result() for j in done] == [4, -2] and [j.results() for j in done] == [[4], [-2]]
    import asyncio
    assert asyncio.run(ex.submit(_double, 5).async_result()) == 10
