"""Checkpoints end to end on the local cluster with real PyTorch DDP (gloo) and autopard on every
node: every step of a job reaches COMPLETE in s3rver and in a file:// target, a second job resumes
from the latest step and ends with exactly the model of one uninterrupted run, retention removes
old steps in storage and on local disk, a corrupt object makes the restore fall back to the
previous complete step, and a second Unix account cannot commit to, list or restore the job.

Needs: the cluster started with AUTOPAR_AUTOPARD (autopard on every node) and s3rver running with
AUTOPAR_S3_ENDPOINT/AUTOPAR_S3_BUCKET exported when the cluster started (scripts/test.sh).
"""
import json
import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import BUILD_DIR, PYTHON, SOURCE_DIR, cluster_dir, run, sbatch, wait_job

TRAIN = SOURCE_DIR / "tests/integration/ckpt_train.py"
AUTOPAR = BUILD_DIR / "cli/autopar"
LAUNCH = BUILD_DIR / "launcher/autopar-launch"
TEST_USER = "autopar-test2"


def s3_env():
    endpoint = os.environ.get("AUTOPAR_S3_ENDPOINT")
    if not endpoint:
        pytest.fail("AUTOPAR_S3_ENDPOINT is not set: start s3rver (tests/s3/start-s3rver.sh) and the "
                    "cluster with it exported (scripts/test.sh does)")
    return endpoint, os.environ.get("AUTOPAR_S3_BUCKET", "autopar-test")


def node_socket(node="node1"):
    sock = cluster_dir() / "run" / f"autopard-{node}.sock"
    if not sock.exists():
        pytest.fail(f"{sock} missing: start the cluster with AUTOPAR_AUTOPARD=<build>/service/autopard/autopard")
    return str(sock)


def train_job(tmp, steps, upload=None, keep=None, extra="", name="job"):
    """Submits ckpt_train.py on 2 nodes x 2 ranks; returns (job id, output file, model file)."""
    # On node1 and node2: node1's autopard is the one the tests ask (node_socket()).
    lines = ["#!/bin/bash", "#SBATCH -N 2 --ntasks-per-node=2 -w node[1-2]", f"#SBATCH --ckpt-dir={tmp}/ck/%j/%n"]
    if upload:
        lines.append(f"#SBATCH --ckpt-upload={upload}")
    if keep:
        lines.append(f"#SBATCH --ckpt-keep={keep}")
    out = tmp / f"{name}.out"
    model = tmp / f"{name}.pt"
    lines += [f"#SBATCH -o {out}",
              f"export PYTHONPATH={SOURCE_DIR}/python",
              f"srun --mpi=pmix {LAUNCH} -- {PYTHON} {TRAIN} --steps {steps} --every 4 "
              f"--out {model} --wait {extra}"]
    job = sbatch("\n".join(lines) + "\n", tmp)
    state = wait_job(job, timeout=240)
    text = out.read_text() if out.exists() else ""
    assert state == "COMPLETED", f"job {job} {state}:\n{text}"
    return job, text, model


def same_model(a: Path, b: Path) -> bool:
    code = ("import sys, torch; a = torch.load(sys.argv[1]); b = torch.load(sys.argv[2]); "
            "sys.exit(0 if a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a) else 1)")
    return subprocess.run([PYTHON, "-c", code, str(a), str(b)]).returncode == 0


def ls(target, socket=None, user=None):
    cmd = [str(AUTOPAR), "ckpt", "ls", target, "--json", "--socket", socket or node_socket()]
    if user:
        cmd = ["runuser", "-u", user, "--"] + cmd
    return run(cmd)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted 20-step run without checkpoints."""
    tmp = tmp_path_factory.mktemp("ckpt-ref")
    tmp.chmod(0o1777)
    _, _, model = train_job(tmp, 20, name="ref")
    return model


@pytest.fixture
def store_uri(tmp_path, request):
    kind = request.param
    if kind == "s3":
        _, bucket = s3_env()
        return f"s3://{bucket}/it-{uuid.uuid4().hex[:8]}"
    d = tmp_path / "store"
    d.mkdir()
    return f"file://{d}"


@pytest.mark.parametrize("store_uri", ["s3", "file"], indirect=True)
def test_steps_complete_and_second_job_resumes_to_identical_model(tmp_path, store_uri, reference):
    tmp_path.chmod(0o1777)
    job1, out1, _ = train_job(tmp_path, 12, upload=store_uri, keep=2, name="first")
    assert "no complete checkpoint to resume from: starting fresh" in out1
    steps = json.loads(ls(store_uri).stdout)
    # keep=2: step 3 was deleted in storage and on every node's disk, never the newest.
    assert [(s["job_id"], s["step"], s["state"]) for s in steps] == [(job1, 11, "COMPLETE"), (job1, 7, "COMPLETE")]
    assert all(s["ranks"] == 4 and s["world_size"] == 4 for s in steps), steps
    for _ in range(150):  # a node that did not complete step 11 removes step 3 once it sees it
        local = sorted(p.name for p in (tmp_path / "ck" / job1).glob("node*/step-*"))
        if "step-3" not in local:
            break
        time.sleep(0.2)
    assert "step-3" not in local and local.count("step-11") == 2, local
    # Every step reached COMPLETE (step 3 before retention removed it): whichever node saw the
    # last rank manifest recorded it in its journal; any node's autopard merges every node's
    # journal (journal_uri).
    for _ in range(50):  # nodes publish their journals at most once a second
        events = json.loads(run([str(AUTOPAR), "events", job1, "--json", "--socket",
                                 node_socket("node1")], check=True).stdout)["events"]
        completed = {e["step"] for e in events if e["kind"] == "ckpt_complete"}
        if completed == {3, 7, 11}:
            break
        time.sleep(0.2)
    assert completed == {3, 7, 11}, events
    assert sum(e["kind"] == "ckpt_committed" for e in events) == 12  # 3 steps x 4 ranks
    # Two ranks per node apply retention to the same step directories: neither may fail.
    assert not [e for e in events if e["kind"] == "ckpt_retention_failed"], events

    job2, out2, model2 = train_job(tmp_path, 20, upload=store_uri, keep=2, name="second")
    assert f"resuming from checkpoint step 11 (job {job1})" in out2, out2
    assert sorted(re.findall(r"train: rank (\d) resumed from step 11 run 0", out2)) == list("0123"), out2
    assert same_model(model2, reference), "resumed run differs from the uninterrupted run"
    steps = json.loads(ls(store_uri).stdout)
    assert (job2, 19, "COMPLETE") in [(s["job_id"], s["step"], s["state"]) for s in steps]


def test_corrupt_object_falls_back_to_previous_complete_step(tmp_path, reference):
    endpoint, bucket = s3_env()
    tmp_path.chmod(0o1777)
    uri = f"s3://{bucket}/it-corrupt-{uuid.uuid4().hex[:8]}"
    job1, _, _ = train_job(tmp_path, 20, upload=uri, name="first")
    creds = tmp_path / "creds"
    creds.write_text("S3RVER\nS3RVER\n")
    # Rank 0's object (its launcher's probe reads manifests only: the restore after the rendezvous
    # finds the corruption and every rank falls back). Same size, one byte flipped: only the
    # SHA-256 can tell.
    good = next((tmp_path / "ck" / job1).glob("node*/step-19/rank-0/state.pt")).read_bytes()
    bad = tmp_path / "bad.pt"
    bad.write_bytes(good[:100] + bytes([good[100] ^ 0xFF]) + good[101:])
    key = f"job-{job1}/step-19/rank-0/state.pt"
    run([str(BUILD_DIR / "service/storage/autopar-storage-tool"), "--endpoint", endpoint,
         "--credentials", str(creds), uri, "put", str(bad), key], check=True)
    job2, out2, model2 = train_job(tmp_path, 20, upload=uri, name="second")
    assert f"{uri}/{key}: SHA-256 mismatch" in out2, out2  # the object is named
    assert f"resuming from checkpoint step 15 (job {job1})" in out2, out2
    assert same_model(model2, reference)


def test_second_user_cannot_commit_list_or_restore(tmp_path):
    _, bucket = s3_env()
    tmp_path.chmod(0o1777)
    uri = f"s3://{bucket}/it-users-{uuid.uuid4().hex[:8]}"
    job, _, _ = train_job(tmp_path, 4, upload=uri, name="owner")
    sock = node_socket()
    # The owner (root) sees the step; the other account is refused or sees nothing.
    listed = ls(job)
    assert listed.returncode == 0, listed.stderr
    assert [s["step"] for s in json.loads(listed.stdout)] == [3]
    p = ls(job, user=TEST_USER)
    assert p.returncode == 1 and "permission denied: job " + job in p.stderr, p.stderr
    p = ls(uri, user=TEST_USER)
    assert p.returncode == 0 and json.loads(p.stdout) == [], p.stdout
    env = ["env", f"SLURM_JOB_ID={job}", f"AUTOPAR_CKPT_DIR={tmp_path}/ck/{job}/node1",
           f"AUTOPAR_CKPT_UPLOAD={uri}", f"AUTOPAR_SOCKET={sock}", "RANK=0", "WORLD_SIZE=4",
           f"PYTHONPATH={SOURCE_DIR}/python"]
    p = run(["runuser", "-u", TEST_USER, "--"] + env + [str(AUTOPAR), "ckpt", "commit", "--step", "3"])
    assert p.returncode == 1 and "permission denied" in p.stderr, p.stderr
    restore = ("from autopar import ckpt\n"
               "try:\n"
               "    ckpt._call({'op': 'restore', 'job_id': ckpt._require('SLURM_JOB_ID'), 'rank': 0,\n"
               "                'world_size': 4, 'ckpt_dir': '/tmp/x', 'upload': ckpt._require('AUTOPAR_CKPT_UPLOAD')}, 30)\n"
               "    print('RESTORED')\n"
               "except ckpt.AutoparError as e:\n"
               "    print('REFUSED', e)\n")
    p = run(["runuser", "-u", TEST_USER, "--"] + env + [PYTHON, "-c", restore])
    assert "REFUSED" in p.stdout and "permission denied" in p.stdout, p.stdout + p.stderr
    p = run(["runuser", "-u", TEST_USER, "--", str(AUTOPAR), "events", job, "--socket", sock])
    assert p.returncode == 1 and "permission denied" in p.stderr
