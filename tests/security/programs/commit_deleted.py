"""The user's side of tests/security/test_complete_deleted.py: one task of a 2-task step (one
task per node) with --ckpt-dir and --ckpt-upload=file://UP (UP a directory of the user's). Each
rank writes its files of a step (model.bin, 1 MiB, and meta.txt) and commits it:

    step 1   both ranks, undisturbed
    step 2   rank 0 commits and waits for its upload; then its uploaded objects (UP/job-J/step-2/
             rank-0/*, not its rank manifest rank-0.json) are deleted, and only then does rank 1
             commit
    step 3   the same, but rank 0's model.bin in the store is truncated to half (its size is not
             the manifest's) instead of deleted
    step 4   both ranks, undisturbed

The ranks meet through files in SYNC (both nodes are this host). Each rank waits for its node's
uploads after each commit; rank 1 prints UPLOADS <json> (its node's uploads) at the end; rank 0
then restores from UP, as a fresh rank would: a probe and a full restore (into RESTORE) with
max_step=3, and a probe of any step, and prints

    RESTORE {"probe_max3": {...}, "restore_max3": {...}, "probe_any": {...}}

with each reply's step and skipped[] (or its error).

    commit_deleted.py SYNC RESTORE
"""
import json
import os
import sys
import time

os.environ["AUTOPAR_STACKS"] = "0"  # no stack dump directory left in /tmp/autopar-stacks
from autopar import ckpt  # noqa: E402

sync, restore_dir = sys.argv[1], sys.argv[2]
rank = ckpt.rank()
job = os.environ["SLURM_JOB_ID"]
up = os.environ["AUTOPAR_CKPT_UPLOAD"][len("file://"):]
if rank == 0:
    print(f"JOB {job}", flush=True)


def tell(name):
    with open(os.path.join(sync, name), "w"):
        pass


def wait_for(name, timeout=60):
    deadline = time.monotonic() + timeout
    while not os.path.exists(os.path.join(sync, name)):
        if time.monotonic() > deadline:
            sys.exit(f"rank {rank}: {name} did not come within {timeout} s")
        time.sleep(0.05)


def commit(step):
    d = ckpt.step_dir(step)
    with open(os.path.join(d, "model.bin"), "wb") as f:
        f.write(os.urandom(1 << 20))
    with open(os.path.join(d, "meta.txt"), "w") as f:
        f.write(f"rank {rank} step {step}\n")
    ckpt.commit(step)
    ckpt.wait_uploads(timeout=60)


def objects(step):
    return os.path.join(up, f"job-{job}", f"step-{step}", "rank-0")


for step in (1, 2, 3, 4):
    disturbed = step in (2, 3)
    if rank == 0:
        commit(step)
        if step == 2:
            for name in os.listdir(objects(step)):
                os.unlink(os.path.join(objects(step), name))
        elif step == 3:
            os.truncate(os.path.join(objects(step), "model.bin"), 1 << 19)
        tell(f"{step}-rank0")
        wait_for(f"{step}-rank1")
    else:
        if disturbed:
            wait_for(f"{step}-rank0")  # rank 0's objects are gone (or cut) by now
        commit(step)
        tell(f"{step}-rank1")
        if not disturbed:
            wait_for(f"{step}-rank0")

if rank == 1:
    print("UPLOADS " + json.dumps(ckpt.uploads()), flush=True)
    tell("done")
    sys.exit(0)

wait_for("done")


def restore(**extra):
    req = {"op": "restore", "job_id": job, "rank": 0, "world_size": 2, "upload": f"file://{up}",
           "ckpt_dir": restore_dir, **extra}
    try:
        reply = ckpt._call(req, 60)
    except ckpt.AutoparError as e:
        return {"error": str(e)}
    return {"step": reply.get("step"), "skipped": reply.get("skipped", [])}


print("RESTORE " + json.dumps({"probe_max3": restore(probe=True, max_step=3),
                               "restore_max3": restore(max_step=3),
                               "probe_any": restore(probe=True)}), flush=True)
