"""Out of memory (docs/health.md) on the local cluster, end to end: the deterministic DDP
training of test_requeue_faults.py (2 nodes x 2 ranks, checkpoints every 5 steps) under a plan
(llama-2-7b on a100-80gb, a memory-bound layout), where rank 1 of the first program allocates 4 GiB
at step 20:

- past its memory cgroup's limit (the job script puts rank 1's task in a 1.5 GiB cgroup, as Slurm's
  task/cgroup does with --mem): the kernel's OOM killer ends it; autopar-launch sees the cgroup's
  oom_kill count go up;
- past an address-space limit it sets itself: PyTorch raises "can't allocate memory", and
  autopar's Python module writes the error to TORCHELASTIC_ERROR_FILE for the launcher.

Either way the failure is classed `oom`, the program restarts in place with a plan that fits in 15%
less memory than the one that ran out (journalled as `replanned`, and the restarted program gets
it), and the run finishes with the uninterrupted run's model.

Needs the cluster as test_requeue_faults.py does, and (for the first test) a memory cgroup the
tests may create (root, cgroup v1 or v2). About 2 min.
"""
import re
from pathlib import Path

import pytest

from conftest import SOURCE_DIR, sbatch, wait_job
from test_requeue_faults import (LAUNCH, events, kinds, need_autopard, reference, restarts,  # noqa: F401
                                 same_model, show_job, submit, train_cmd)

PLAN = ("--auto-parallel --model=llama-2-7b --gpu-type=a100-80gb --global-batch=64 "
        "--seq-len=4096")
OPTS = f"--requeue-on-failure=3 --heartbeat-timeout=20 {PLAN}"

# Rank 1's task in a memory cgroup of its own (v1 or v2), 1.5 GiB: the training (and the
# interpreter prepared for its restart) needs well under that, the 4 GiB allocation does not fit.
# Named job_<id>, as Slurm's task/cgroup names a job's: autopar-launch trusts the OOM kill count
# of the job's own cgroup only (core/failure/oom.h).
LIMIT_SH = r"""#!/bin/bash
if [ "$SLURM_PROCID" = 1 ]; then
  rel=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
  if [ -n "$rel" ]; then
    cg=/sys/fs/cgroup/memory${rel%/}/job_$SLURM_JOB_ID; limit=memory.limit_in_bytes
  else
    rel=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
    cg=/sys/fs/cgroup${rel%/}/job_$SLURM_JOB_ID; limit=memory.max
  fi
  mkdir -p "$cg" && echo 1610612736 > "$cg/$limit" && echo $$ > "$cg/cgroup.procs" ||
    { echo "limit.sh: cannot put rank 1 in a memory cgroup"; exit 97; }
  echo "$cg" > "$WORK/cgroup.txt"
fi
exec "$@"
"""


def can_make_memory_cgroups() -> str:
    """'' when this machine lets root make a memory-limited cgroup, else why not."""
    text = Path("/proc/self/cgroup").read_text()
    m = re.search(r"^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(\S+)$", text, re.M)
    base = Path(f"/sys/fs/cgroup/memory{m.group(1).rstrip('/')}") if m else None
    limit = "memory.limit_in_bytes"
    if base is None:
        m = re.search(r"^0::(\S+)$", text, re.M)
        base = Path(f"/sys/fs/cgroup{m.group(1).rstrip('/')}") if m else None
        limit = "memory.max"
    if base is None:
        return "no memory cgroup in /proc/self/cgroup"
    probe = base / "autopar-oom-probe"
    try:
        probe.mkdir(exist_ok=True)
        (probe / limit).write_text("1610612736")
        return ""
    except OSError as e:
        return f"cannot make a memory cgroup under {base}: {e}"
    finally:
        try:
            probe.rmdir()
        except OSError:
            pass


def assert_oom_replanned(job, work, reference, error):
    assert restarts(job) == 0, show_job(job)
    assert same_model(work / "final.pt", reference), "the model differs from an uninterrupted run"
    evs = events(job, "first_step", "finished", "replanned")
    failure = kinds(evs, "failure")
    assert [(f["fields"]["class"], f["rank"]) for f in failure] == [("oom", 1)], failure
    assert "rank 1" in failure[0]["fields"]["reason"] and "ran out of memory" in failure[0]["fields"]["reason"]
    assert error in failure[0]["fields"]["reason"], failure
    decision = kinds(evs, "recovery")
    assert len(decision) == 1 and decision[0]["fields"]["action"] == "restart-in-place", decision
    cap = float(decision[0]["fields"]["max_mem_gib"])
    replanned = kinds(evs, "replanned")
    assert len(replanned) == 1, replanned
    r = replanned[0]["fields"]
    assert r["generation"] == "1" and r["plan_before"] != r["plan_after"], r
    assert abs(cap - 0.85 * float(r["mem_before_gib"])) < 0.02, (cap, r)
    assert 0 < float(r["mem_after_gib"]) <= cap, r
    # The restarted program ran with the new plan.
    plans = dict(re.findall(r"train: plan run (\d+): (.*)", (work / "out.txt").read_text()))
    assert set(plans) == {"0", "1"} and plans["0"] != plans["1"], plans
    return evs


def test_a_rank_the_kernel_kills_for_memory_is_classed_oom_and_replanned(tmp_path, reference):
    why = can_make_memory_cgroups()
    if why:
        pytest.skip(why)
    work = tmp_path / "kernel"
    work.mkdir()
    work.chmod(0o1777)
    (work / "limit.sh").write_text(LIMIT_SH)
    program = train_cmd(work) + " --oom-at 20"
    script = f"""#!/bin/bash
#SBATCH -N2 --ntasks-per-node=2 --open-mode=append -o {work}/out.txt -e {work}/out.txt
#SBATCH --ckpt-upload=file://{work}/store --ckpt-dir={work}/local/%n
#SBATCH {OPTS}
export PYTHONPATH={SOURCE_DIR}/python WORK={work}
srun --mpi=pmix bash {work}/limit.sh {LAUNCH} -- {program}
"""
    job = sbatch(script, work)
    try:
        assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
        assert_oom_replanned(job, work, reference, "killed by the kernel's OOM killer")
    finally:
        cg = work / "cgroup.txt"
        if cg.exists():
            try:
                Path(cg.read_text().strip()).rmdir()
            except OSError:
                pass


def test_an_allocation_the_program_cannot_make_is_classed_oom_and_replanned(tmp_path, reference):
    work = tmp_path / "rlimit"
    job = submit(work, opts=OPTS, program=train_cmd(work) + " --oom-at 20 --oom-by rlimit")
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    assert_oom_replanned(job, work, reference, "can't allocate memory")
