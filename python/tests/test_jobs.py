"""autopar.jobs without a cluster: what each argument becomes on sbatch's command line, and the one
line a refusal comes back as. The cluster tests (tests/integration/test_python_jobs.py) submit."""
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
    assert jobs.sbatch_arguments(auto_parallel=False, model=None) == []


@pytest.mark.parametrize("value,mib", [("64GiB", 65536), ("64G", 65536), ("64GB", 61036), ("500M", 500),
                                       ("1.5GiB", 1536), (4096, 4096), ("2T", 2097152), ("100MB", 96)])
def test_memory_units(value, mib):
    assert jobs._memory_mib(value) == mib


@pytest.mark.parametrize("kwargs,error", [
    ({"memory": "lots"}, "memory: 'lots' is not a size"),
    ({"memory": "64Gi"}, "memory: '64Gi' is not a size"),
    ({"gpu_count": 0}, "gpu_count: must be an integer >= 1"),
    ({"nodes": "two"}, "nodes: must be an integer >= 1"),
    ({"tasks_per_node": True}, "tasks_per_node: must be an integer >= 1"),
    ({"partition": " "}, "partition: must not be empty"),
    ({"model": True}, "model: needs a value"),
])
def test_values_that_cannot_be_one_name_the_argument(kwargs, error):
    with pytest.raises(ValueError, match=error):
        jobs.sbatch_arguments(**kwargs)


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
