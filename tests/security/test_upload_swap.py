"""Attack: a file:// upload target is checked at commit time and written later, by root.

The second account (autopar-test2) runs a job with --ckpt-upload=file://<up>, <up> a directory
of its own, and commits a checkpoint of rank 0 (programs/commit_swap.py: a 200 MiB file, so that
the background upload takes a while, and a small one, both mode 0600). Right after the commit's
reply, before autopard's upload has written its objects, it replaces <up> itself (swap-root), or
the job's directory below it (swap-job), with a symlink to a root-only directory (0700 root:root).

What must hold:
- with a swap, nothing appears in the root-only directory (autopard follows no symlink below the
  store's root, and writes as the job's owner, who cannot write there);
- without a swap, the upload completes and every object and directory autopard made in the store
  is owned by autopar-test2 (not root), and no object is readable by group or others beyond what
  its source file allowed (the manifests and owner record have no source: owned by the user is
  enough).

After the fix autopard writes file:// stores with the job owner's identity, following no symlink
below the store's root. About 30 s.
"""
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from conftest import PROGRAMS, PYTHON, USER, as_user, need_binaries, run, user_ids

NODE = "node1"
PROGRAM = PROGRAMS / "commit_swap.py"


def commit_job(user_dir: Path, mode: str, target: Path):
    """The user's job: commit, swap (mode), wait for the upload. Returns (job, output, uploads)."""
    uid, gid = user_ids()
    up = user_dir / "up"
    up.mkdir()
    os.chown(up, uid, gid)
    name = f"autopar-sec-{uuid.uuid4().hex[:8]}"
    cmd = ["srun", "-N1", "-n1", "-w", NODE, "-t", "3", f"--job-name={name}",
           f"--ckpt-dir={user_dir}/ck/%j", f"--ckpt-upload=file://{up}",
           PYTHON, PROGRAM, mode, target]
    try:
        p = as_user(cmd, cwd=user_dir, timeout=150)
    except subprocess.TimeoutExpired as e:
        run(["scancel", "--name", name])
        raise AssertionError(f"the user's commit job did not end: {e!r}") from None
    out = p.stdout + p.stderr
    m = re.search(r"^JOB (\d+)$", out, re.M)
    assert m and "COMMITTED " in out, \
        f"the commit did not happen (srun exited {p.returncode}):\n{out}"
    u = re.search(r"^UPLOADS (.*)$", out, re.M)
    return m.group(1), out, json.loads(u.group(1)) if u else []


@pytest.fixture
def root_only_dir():
    d = Path(tempfile.mkdtemp(prefix="autopar-rootonly-"))
    d.chmod(0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("mode", ["swap-root", "swap-job"])
def test_swap_after_commit_writes_nothing_into_root_only_directory(mode, user_dir, root_only_dir):
    need_binaries()
    job, out, uploads = commit_job(user_dir, mode, root_only_dir)
    inside = sorted(str(p.relative_to(root_only_dir)) for p in root_only_dir.rglob("*"))
    assert not inside, (f"autopard wrote into the root-only directory {root_only_dir} through "
                        f"{USER}'s symlink ({mode}, job {job}): {inside}; the uploads: {uploads}")


def test_upload_is_written_as_the_job_owner(user_dir, root_only_dir):
    need_binaries()
    uid, _ = user_ids()
    job, out, uploads = commit_job(user_dir, "none", root_only_dir)
    assert uploads and all(u["state"] == "uploaded" for u in uploads), \
        f"the undisturbed upload did not complete: {uploads}\n{out}"
    up = user_dir / "up"
    step = up / f"job-{job}" / "step-1"
    assert (step / "manifest.json").is_file(), sorted(str(p) for p in up.rglob("*"))
    sources = {p.name: p.lstat() for p in (user_dir / "ck" / job).glob("step-1/rank-0/*")}
    assert set(sources) == {"big.bin", "small.txt"}, sources
    wrong_owner, too_open = [], []
    for p in [up / f"job-{job}", *sorted((up / f"job-{job}").rglob("*"))]:
        st = p.lstat()
        if st.st_uid != uid:
            wrong_owner.append(f"{p.relative_to(up)} (uid {st.st_uid})")
        if p.parent.name == "rank-0" and stat.S_ISREG(st.st_mode):
            src = sources[p.name].st_mode
            extra = st.st_mode & 0o077 & ~(src & 0o077)
            if extra:
                too_open.append(f"{p.relative_to(up)} mode {stat.S_IMODE(st.st_mode):04o}, "
                                f"its source {stat.S_IMODE(src):04o}")
    assert not wrong_owner, f"autopard wrote {USER}'s store as another user: {wrong_owner}"
    assert not too_open, f"uploaded objects are more readable than their sources: {too_open}"
