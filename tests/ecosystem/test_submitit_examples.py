"""submitit's own documented examples (its docs/examples.md, submitit 1.5.4) run against
autopar.jobs on the local cluster, one test each, as a submitit user would port them: the
executor is `jobs.Executor`, the parameters take autopar's names (docs/python.md, "Beside
submitit": `time=` for `timeout_min=`, `partition=` for `slurm_partition=`,
`array_parallelism=` for `slurm_array_parallelism=`), and every documented outcome is asserted.
Where autopar's answer differs (an exception is the function's own, not FailedJobError; a
multi-task job's result() is rank 0's, results() every rank's) the test says so and
docs/python.md states it. About 40 s."""
import asyncio
import os
import shutil
import time
from operator import truediv

import pytest
import submitit

from conftest import CLI, LAUNCH, SOURCE_DIR, socket_of

import sys
sys.path.insert(0, str(SOURCE_DIR / "python"))
from autopar import jobs  # noqa: E402

PARTITION = "debug"  # the examples' "dev"


@pytest.fixture(autouse=True)
def tools(monkeypatch):
    monkeypatch.setenv("AUTOPAR_LAUNCH", str(LAUNCH))
    monkeypatch.setenv("AUTOPAR_CLI", str(CLI))
    monkeypatch.setenv("AUTOPAR_SOCKET", str(socket_of()))


@pytest.fixture
def log_folder(tmp_path):
    tmp_path.chmod(0o1777)
    return str(tmp_path / "log_test")


def add(a, b):
    return a + b


def slow_multiplication(x, y):
    time.sleep(x * y)
    return x * y


def where_am_i():
    """What submitit's JobEnvironment gives (num_tasks, local_rank, node, global_rank), from the
    variables autopar-launch sets."""
    return {"num_tasks": int(os.environ["WORLD_SIZE"]), "local_rank": int(os.environ["LOCAL_RANK"]),
            "node": int(os.environ["SLURM_NODEID"]), "global_rank": int(os.environ["RANK"])}


def test_the_explained_add_example(log_folder):
    executor = jobs.Executor(folder=log_folder)
    executor.update_parameters(time="00:04:00", partition=PARTITION)
    job = executor.submit(add, 5, 7)
    assert job.job_id.isdigit()
    assert job.result(timeout=120) == 12


def test_job_arrays_with_at_most_two_at_once(log_folder):
    a = [1, 2, 3, 4]  # the example's `a = [1, 2, 3, 4],` (a tuple of one list) is a typo there
    b = [10, 20, 30, 40]
    executor = jobs.Executor(folder=log_folder)
    executor.update_parameters(array_parallelism=2)
    mapped = executor.map_array(add, a, b)
    array_id = mapped[0].job_id.split("_")[0]
    assert [j.job_id for j in mapped] == [f"{array_id}_{i}" for i in range(4)]
    assert any(r.get("ArrayTaskThrottle") == "2" for r in jobs.Job(array_id)._records())
    assert [j.result(timeout=120) for j in mapped] == [11, 22, 33, 44]


def test_job_arrays_through_a_context_manager(log_folder):
    executor = jobs.Executor(folder=log_folder)
    submitted = []
    with executor.batch():
        for arg in [1, 2, 3]:
            submitted.append(executor.submit(add, arg, b=10 * arg))
    assert len({j.job_id.split("_")[0] for j in submitted}) == 1  # one array
    assert [j.result(timeout=120) for j in submitted] == [11, 22, 33]


def test_concurrent_jobs(log_folder):
    executor = jobs.Executor(folder=log_folder)
    executor.update_parameters(time="00:01:00", partition=PARTITION)
    submitted = [executor.submit(time.sleep, k) for k in range(1, 5)]
    assert sum(job.done() for job in submitted) < 4
    assert [job.result(timeout=120) for job in submitted] == [None] * 4
    assert all(job.done() for job in submitted)


def test_asyncio(log_folder):
    executor = jobs.Executor(folder=log_folder)
    executor.update_parameters(time="00:01:00", partition=PARTITION)

    async def main():
        job = executor.submit(slow_multiplication, 1, 2)
        assert await job.async_result(poll=0.3) == 2
        submitted = [executor.submit(slow_multiplication, k, 1) for k in (3, 1, 2)]
        return [await aws for aws in asyncio.as_completed([j.async_result(poll=0.3) for j in submitted])]

    assert sorted(asyncio.run(main())) == [1, 2, 3]
    # and without coroutines: jobs.as_completed (submitit's helpers.as_completed)
    submitted = [executor.submit(slow_multiplication, k, 1) for k in (4, 0)]
    first = next(jobs.as_completed(submitted, timeout=120, poll=0.3))
    assert first.result() == 0


def test_errors(log_folder):
    executor = jobs.Executor(folder=log_folder)
    executor.update_parameters(time="00:01:00", partition=PARTITION)
    job = executor.submit(truediv, 1, 0)
    # submitit raises FailedJobError with the trace in its message; autopar raises the function's
    # own exception, the remote trace in its notes
    with pytest.raises(ZeroDivisionError) as raised:
        job.result(timeout=120)
    assert any("remote traceback" in note for note in raised.value.__notes__)
    assert "ZeroDivisionError" in job.stderr()  # the full stack trace, if need be
    assert job.stderr_path and os.path.exists(job.stderr_path)  # submitit's get_logs_path("stderr")


def test_working_with_commands(log_folder):
    function = submitit.helpers.CommandFunction(["which", "python3"])  # submitit's helper, as it is
    executor = jobs.Executor(folder=log_folder)
    executor.update_parameters(time="00:01:00", partition=PARTITION)
    job = executor.submit(function)
    # the Python the job runs is the one used here (sbatch passes PATH on)
    assert job.result(timeout=120).strip() == shutil.which("python3")


def test_multi_task_jobs(log_folder):
    executor = jobs.Executor(folder=log_folder)
    executor.update_parameters(tasks_per_node=3, nodes=2, time="00:01:00", partition=PARTITION, ranks="all")
    job = executor.submit(add, 5, 7)
    # submitit's result() is the list of every task's; autopar's result() is rank 0's, results()
    # every rank's (submitit's job.task(2).result() is results()[2])
    assert job.result(timeout=120) == 12
    assert job.results() == [12, 12, 12, 12, 12, 12]
    job = executor.submit(where_am_i)
    envs = job.results(timeout=120)
    assert [e["global_rank"] for e in envs] == list(range(6))
    assert [(e["node"], e["local_rank"]) for e in envs] == [(n, r) for n in range(2) for r in range(3)]
    assert {e["num_tasks"] for e in envs} == {6}
