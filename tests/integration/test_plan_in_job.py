"""--auto-parallel in a job: the plan is made once per step from the step's real allocation (in
srun), travels in AUTOPAR_PLAN_JSON, and every task gets its own TP/PP/DP coordinates; pinned sizes
are checked; a model that cannot fit stops the step before any training process starts."""
import json

from conftest import env_lines, run, sbatch, wait_job
from test_requeue_faults import LAUNCH, events

PRINT_PLAN = ("echo PLAN rank=$RANK tp=$AUTOPAR_TP pp=$AUTOPAR_PP dp=$AUTOPAR_DP "
              "tp_rank=$AUTOPAR_TP_RANK pp_rank=$AUTOPAR_PP_RANK dp_rank=$AUTOPAR_DP_RANK "
              "micro=$AUTOPAR_MICRO_BATCH accum=$AUTOPAR_GRAD_ACCUM recompute=$AUTOPAR_RECOMPUTE "
              "json_len=${#AUTOPAR_PLAN_JSON} megatron=${AUTOPAR_MEGATRON_ARGS// /_}; "
              "[ \"$RANK\" = 0 ] && printf '%s\\n' \"$AUTOPAR_PLAN_JSON\" > plan.json "
              "&& printf '%s\\n' \"$AUTOPAR_DEEPSPEED_CONFIG\" > ds.json "
              "&& cp \"$AUTOPAR_DEEPSPEED_CONFIG_FILE\" ds_file.json; true")

PLAN_OPTS = ["--model=llama-2-7b", "--gpu-type=a100-80gb", "--global-batch=64", "--seq-len=2048"]


def check_grid(rows, world):
    assert len(rows) == world
    tp, pp, dp = (int(rows[0][k]) for k in ("tp", "pp", "dp"))
    assert tp * pp * dp == world
    coords = set()
    for r in rows:
        assert (int(r["tp"]), int(r["pp"]), int(r["dp"])) == (tp, pp, dp), "one plan for the step"
        rank = int(r["rank"])
        # Megatron-LM's order: tp fastest, then dp, then pp (core/plan/planner.h).
        assert int(r["tp_rank"]) == rank % tp
        assert int(r["dp_rank"]) == (rank // tp) % dp
        assert int(r["pp_rank"]) == rank // (tp * dp)
        coords.add((r["tp_rank"], r["pp_rank"], r["dp_rank"]))
        assert f"--tensor-model-parallel-size_{tp}" in r["megatron"]
    assert len(coords) == world
    assert len({r["json_len"] for r in rows}) == 1
    return tp, pp, dp


def test_srun_auto_parallel_plans_the_step(shared_tmp):
    p = run(["srun", "-N4", "--ntasks-per-node=2", "--auto-parallel", *PLAN_OPTS, "bash", "-c",
             PRINT_PLAN], cwd=shared_tmp, check=True)
    tp, pp, dp = check_grid(env_lines(p.stdout, "PLAN"), 8)
    assert "autopar: plan for llama-2-7b on 8 GPUs" in p.stderr  # said once, by srun
    plan = json.loads((shared_tmp / "plan.json").read_text())
    assert (plan["tp"], plan["pp"], plan["dp"]) == (tp, pp, dp)
    assert plan["micro_batch"] * plan["grad_accum"] * dp == 64
    for key in ("recompute", "optimizer_sharding", "mem_per_gpu_gib", "step_time_s",
                "tokens_per_s", "mfu"):
        assert key in plan
    ds = json.loads((shared_tmp / "ds.json").read_text())
    assert ds == json.loads((shared_tmp / "ds_file.json").read_text())  # the same, as a file
    assert ds["train_batch_size"] == 64
    assert ds["train_micro_batch_size_per_gpu"] == plan["micro_batch"]


def test_sbatch_pinned_layout_reaches_the_job_step(shared_tmp):
    script = f"""#!/bin/bash
#SBATCH -N 4 --ntasks-per-node=2 -o out.txt
#SBATCH --auto-parallel=tp=2,pp=2
#SBATCH {' '.join(PLAN_OPTS)}
srun --mpi=pmix {LAUNCH} -- bash -c '{PRINT_PLAN}'
"""
    jid = sbatch(script, shared_tmp)
    assert wait_job(jid) == "COMPLETED", (shared_tmp / "out.txt").read_text()
    rows = env_lines((shared_tmp / "out.txt").read_text(), "PLAN")
    assert check_grid(rows, 8) == (2, 2, 2)
    # The job's timeline begins with the plan it was submitted with (autopar-launch's rank 0).
    evs = events(jid, "submitted", "finished")
    submitted = [e for e in evs if e["kind"] == "submitted"]
    assert len(submitted) == 1, evs
    f = submitted[0]["fields"]
    assert (f["model"], f["gpus"], f["tp"], f["pp"], f["dp"]) == ("llama-2-7b", "8", "2", "2", "2"), f


def test_pinned_layout_that_cannot_work_is_refused(shared_tmp):
    marker = shared_tmp / "ran"
    p = run(["srun", "-N2", "--ntasks-per-node=2", "--auto-parallel=tp=3", *PLAN_OPTS,
             "touch", str(marker)])
    assert p.returncode != 0
    ours = [l for l in p.stderr.splitlines() if "autopar:" in l]
    assert len(ours) == 1 and "--auto-parallel=tp=3" in ours[0], p.stderr
    assert not marker.exists(), "no task may start"


def test_model_that_cannot_fit_is_refused_before_training_starts(shared_tmp):
    marker = shared_tmp / "ran"
    p = run(["srun", "-N1", "--ntasks-per-node=2", "--auto-parallel", "--model=llama-3-405b",
             "--gpu-type=a100-40gb", "--global-batch=16", "touch", str(marker)])
    assert p.returncode != 0
    ours = [l for l in p.stderr.splitlines() if "autopar:" in l]
    assert len(ours) == 1 and "GiB" in ours[0], p.stderr
    assert not marker.exists()


def test_fault_tolerance_plans_the_whole_state_or_refuses_before_training_starts(shared_tmp):
    """--fault-tolerance=step heals only a state every rank holds whole (docs/ft.md, "Limits"):
    the step is planned as data parallelism alone, and llama-2-7b's whole state (16 bytes a
    parameter) fits no A100: refused in one line that names the layout that would plan without
    it, before any task starts."""
    marker = shared_tmp / "ran"
    p = run(["srun", "-N2", "--ntasks-per-node=2", "--fault-tolerance=step", "--requeue-on-failure=2",
             "--auto-parallel", *PLAN_OPTS, "touch", str(marker)])
    assert p.returncode != 0
    ours = [l for l in p.stderr.splitlines() if "autopar:" in l]
    assert len(ours) == 1, p.stderr
    assert "--fault-tolerance=step (every rank holds the whole state: tp=pp=cp=ep=1, no sharding): " \
           "does not fit" in ours[0] and "without the pins it plans: " in ours[0], ours[0]
    assert not marker.exists(), "no task may start"


def test_sbatch_hsdp_pin_reaches_every_task(shared_tmp):
    """#SBATCH --auto-parallel=hsdp=4,2: FSDP sharded over groups of 4 ranks, replicated twice;
    each task gets the shard group and its place in it, and the arguments for torchtitan."""
    script = f"""#!/bin/bash
#SBATCH -N 4 --ntasks-per-node=2 -o out.txt
#SBATCH --auto-parallel=hsdp=4,2
#SBATCH {' '.join(PLAN_OPTS)}
srun --mpi=pmix {LAUNCH} -- bash -c 'echo FSDP rank=$RANK shard=$AUTOPAR_FSDP_SHARD replicate=$AUTOPAR_FSDP_REPLICATE \
shard_rank=$AUTOPAR_FSDP_SHARD_RANK replicate_rank=$AUTOPAR_FSDP_REPLICATE_RANK tp=$AUTOPAR_TP pp=$AUTOPAR_PP dp=$AUTOPAR_DP'
"""
    jid = sbatch(script, shared_tmp)
    assert wait_job(jid) == "COMPLETED", (shared_tmp / "out.txt").read_text()
    rows = sorted(env_lines((shared_tmp / "out.txt").read_text(), "FSDP"), key=lambda r: int(r["rank"]))
    assert len(rows) == 8
    for r in rows:
        rank = int(r["rank"])
        assert (r["shard"], r["replicate"], r["tp"], r["pp"], r["dp"]) == ("4", "2", "1", "1", "8"), r
        assert (int(r["shard_rank"]), int(r["replicate_rank"])) == (rank % 4, rank // 4), r
