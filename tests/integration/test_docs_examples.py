"""The docs' examples run as written (README.md and docs/*.md; tests/docs/examples.py says how a
block is marked). Each `sbatch` example is submitted as it stands, from a directory holding its
`train.py` (tests/docs/train.py, or the file it names); each `python-job` example is run as a
program there. The cluster is what the examples assume of a site (tests/cluster/start.sh): a `gpu`
partition, 8 GPUs and 64 GiB a node, the `scavenger` partition, and the buckets they name on
the suite's S3 server, emptied under the example's prefix first (a run resumes from what an earlier
one with the same --ckpt-upload left). Every job must end COMPLETED with each of its ranks' lines
and a complete checkpoint, and each job that asked for a plan got one. Examples that share an
upload prefix run one after another; the others side by side.
"""
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import time

from conftest import BUILD_DIR, PYTHON, SOURCE_DIR, job_state, run, s3_client
from test_requeue_faults import events, kinds, need_autopard, sockets  # noqa: F401

sys.path.insert(0, str(SOURCE_DIR / "tests" / "docs"))
import examples  # noqa: E402

SBATCH = [e for e in examples.all_examples() if e.kind == "sbatch"]
PYTHON_JOBS = [e for e in examples.all_examples() if e.kind == "python-job"]


def upload_prefixes(text):
    """The (bucket, prefix) of each s3:// URI an example names."""
    return sorted(set(re.findall(r"s3://([a-z0-9.-]+)/([\w./-]*)", text)))


def fresh_storage(s3, text):
    """The buckets an example's s3:// URIs name exist on the suite's S3 server (a site has its
    own), with nothing under their prefixes: a run resumes from what an earlier run with the same
    --ckpt-upload left there, and an example is run from the start."""
    have = {b["Name"] for b in s3.list_buckets()["Buckets"]}
    for bucket, prefix in upload_prefixes(text):
        if bucket not in have:
            s3.create_bucket(Bucket=bucket)
            have.add(bucket)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                s3.delete_object(Bucket=bucket, Key=obj["Key"])


def workdir(tmp_path, example):
    d = tmp_path / re.sub(r"\W", "_", example.where)
    d.mkdir()
    d.chmod(0o1777)
    shutil.copy(SOURCE_DIR / example.params.get("train.py", "tests/docs/train.py"), d / "train.py")
    return d


def job_env():
    return {**os.environ,
            "PATH": os.pathsep.join([str(BUILD_DIR / "launcher"), str(BUILD_DIR / "cli"),
                                     str(os.path.dirname(PYTHON)), os.environ["PATH"]]),
            "PYTHONPATH": str(SOURCE_DIR / "python"),
            # autopar.jobs asks autopard on this host (a site's is at /run/autopard/autopard.sock)
            "AUTOPAR_SOCKET": str(sockets()[0])}


FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
         "DEADLINE", "PREEMPTED")


def wait_ended(job, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = job_state(job)
        if s in FINAL:
            return s
        time.sleep(0.5)
    return f"not ended after {timeout} s"


def ranks_done(text):
    """The ranks whose train.py ended, and the world size they were told."""
    found = re.findall(r"^train\.py: rank (\d+) of (\d+) on node\d", text, re.M)
    return sorted(int(r) for r, _ in found), {int(w) for _, w in found}


def run_sbatch(e, d, env):
    script = e.text if e.text.startswith("#!") else "#!/bin/bash\n" + e.text
    (d / "job.sbatch").write_text(script)
    p = run(["sbatch", "--parsable", "job.sbatch"], env=env, cwd=d)
    assert p.returncode == 0, f"{e.where}: sbatch refused it: {p.stderr.strip()}"
    job = p.stdout.strip().split(";")[0]
    state = wait_ended(job, 300)
    out = "".join(f.read_text() for f in sorted(d.glob("*.out")))
    assert state == "COMPLETED", f"{e.where}: job {job} ended {state}:\n{out[-3000:]}"
    if "train.py" not in e.params:  # every rank of the world (the spare nodes' tasks wait)
        ranks, worlds = ranks_done(out)
        assert len(worlds) == 1 and ranks == list(range(worlds.pop())), f"{e.where}: job {job}:\n{out[-3000:]}"
        if "--auto-parallel" in e.text:
            assert re.search(r"^train\.py: rank 0 .* tp=\d+ pp=\d+ dp=\d+$", out, re.M), out[-3000:]
    if "--ckpt" in e.text:  # it keeps checkpoints: train.py committed its last step
        evs = events(job, "ckpt_complete")
        assert kinds(evs, "ckpt_complete"), f"{e.where}: job {job}: no checkpoint completed: {evs}"


def run_python_job(e, d, env):
    (d / "example.py").write_text(e.text)
    p = subprocess.run([PYTHON, "example.py"], cwd=d, env=env, text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=300)
    jobs_out = "".join(f.read_text() for f in sorted(d.glob("*.out")))
    assert p.returncode == 0, f"{e.where}: exit {p.returncode}:\n{p.stdout[-3000:]}\n{jobs_out[-2000:]}"
    if "train.py" in e.text:
        assert ranks_done(jobs_out)[0], f"{e.where}: no rank of train.py ended:\n{p.stdout}\n{jobs_out[-3000:]}"


def groups(runnable):
    """The examples in groups that share an upload prefix (run one after another, each from empty
    storage); the groups run side by side."""
    out = []
    for e in runnable:
        mine = set(upload_prefixes(e.text))
        joined = [g for g in out if mine & set(p for x in g for p in upload_prefixes(x.text))]
        merged = [e] + [x for g in joined for x in g]
        out = [g for g in out if g not in joined] + [sorted(merged, key=lambda x: x.where)]
    return out


def test_every_sbatch_and_python_example_runs_as_written(tmp_path, need_autopard):
    runnable = [e for e in examples.all_examples() if e.kind in ("sbatch", "python-job")]
    assert len(runnable) >= 8, "tests/docs/examples.py found too few examples to run"
    env, s3 = job_env(), s3_client()

    def run_group(group):
        for e in group:
            fresh_storage(s3, e.text)
            d = workdir(tmp_path, e)
            (run_sbatch if e.kind == "sbatch" else run_python_job)(e, d, env)

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(run_group, g) for g in groups(runnable)]
        failures = [str(f.exception()) for f in futures if f.exception() is not None]
    assert not failures, "\n\n".join(failures)
