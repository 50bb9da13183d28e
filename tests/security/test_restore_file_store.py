"""Attack: a restore reads a file:// store the user chose; autopard (root) follows what it holds.

The second account (autopar-test2) makes a store directory of its own with autopard's layout
(programs/restore_store.py: job-<J>/owner.json, job-<J>/step-<N>/manifest.json, rank-0.json and
rank-0/<file>) claiming complete steps of its own job J whose rank-0 file is a root-only secret,
reached through a symlink (absolute or relative) at one of the key's components (the job's
directory, a step's, the rank's, a directory below it, the file itself), a hard link, or a FIFO;
or whose manifest.json is a sparse 1 TiB file; or a store at the filesystem's root. The same store
holds three claims of the file, so that one restore meets each: a wrong size (autopard's reply
then tells the real size), the right size and a wrong SHA-256 (it tells the real digest), and
both right (what the first two taught: autopard copies the secret into the job's --ckpt-dir, as
the user's). A task of the job then restores: autopar-launch at its start (--ckpt-upload=file://
the store, as a job would), and the program once more itself, printing autopard's whole reply.

What must hold after each attack:
- no file the user can read (the job's --ckpt-dir, anything else in the user's directory) holds
  the secret's bytes;
- neither the job's output (the launcher's notes, the reply), nor `autopar events JOB` as the user
  shows the secret's content, its SHA-256 or its size;
- the job starts fresh (no step is restored);
- autopard on the node is the same process, alive, did not allocate what the store claims, and
  answers another user's (root's) request within 3 s; a store of file:/// is answered within a few
  seconds (never a walk of the whole filesystem).

After the fix autopard reads a file:// store as the job's owner and follows no symlink below the
store's root: every forged step is skipped (at most "permission denied" or "symlink" in the
reason) and the job starts fresh.

About 1 minute when autopard holds.
"""
import contextlib
import json
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import (LAUNCH, PROGRAMS, PYTHON, USER, Secret, as_user, need_binaries, run,
                      user_events)

PROGRAM = PROGRAMS / "restore_store.py"
NODE = "node1"


@pytest.fixture(autouse=True)
def _binaries():
    need_binaries()


def attack(user_dir: Path, cfg: dict, *, launcher=True, timeout=120):
    """Runs the user's job: builds the store in its task, then restores from it. Returns (job id,
    everything the job printed)."""
    store = user_dir / "store"
    cfg = {"store": str(store), "elsewhere": str(user_dir / "elsewhere"),
           "ckpt_dir": str(user_dir / "ck"), "upload": f"file://{store}", **cfg}
    conf = user_dir / "attack.json"
    conf.write_text(json.dumps(cfg))
    name = f"autopar-sec-{uuid.uuid4().hex[:8]}"
    ask = f"{PYTHON} {PROGRAM} ask {conf}"
    if launcher:
        script = f"{PYTHON} {PROGRAM} build {conf} && exec {LAUNCH} -- {ask}"
        options = [f"--ckpt-dir={user_dir}/ck/%j", f"--ckpt-upload={cfg['upload']}"]
    else:
        script = f"{PYTHON} {PROGRAM} build {conf} && {ask}" if cfg.get("component") else ask
        options = [f"--ckpt-dir={user_dir}/ck/%j"]
    cmd = ["srun", "-N1", "-n1", "-w", NODE, "--mpi=pmix", "-t", "2", f"--job-name={name}",
           *options, "bash", "-c", script]
    try:
        p = as_user(cmd, cwd=user_dir, timeout=timeout)
    except subprocess.TimeoutExpired as e:  # the restore never came back
        run(["scancel", "--name", name])
        raise AssertionError(f"the user's restore job did not end within {timeout}s: "
                             f"{e!r}") from None
    out = p.stdout + p.stderr
    m = re.search(r"^JOB (\d+)$", out, re.M)
    assert m, f"the user's job printed no job id (srun exited {p.returncode}):\n{out[-3000:]}"
    return m.group(1), out


def excerpt(text: str, s: Secret, limit=8):
    """The lines of `text` that show the secret (shortened)."""
    lines = [ln for ln in text.splitlines() if s.leaks(ln)]
    return "\n".join(ln if len(ln) < 400 else ln[:400] + "..." for ln in lines[:limit])


def assert_nothing_leaked(s: Secret, user_dir: Path, job: str, out: str, guard, *, fresh=True,
                          size_is_theirs=False):
    guard.assert_alive()
    guard.assert_no_big_allocation()
    _, events = user_events(job, NODE)
    shown = {"the job's output (launcher notes, autopard's reply)": s.leaks(out, size_is_theirs),
             f"`autopar events {job}` as {USER}": s.leaks(events, size_is_theirs)}
    assert not any(shown.values()), (
        f"the root-only secret ({s.size} bytes, sha256 {s.sha256}) reached the user: {shown}\n"
        f"job output:\n{excerpt(out, s)}\nevents:\n{excerpt(events, s)}")
    holders = s.holders(user_dir, skip=[user_dir / "store", user_dir / "elsewhere"])
    assert not holders, f"files the user can read hold the secret's bytes: {holders}"
    if fresh:
        assert "no complete checkpoint to resume from: starting fresh" in out, out[-3000:]
        assert "ENV AUTOPAR_RESUME_STEP=\n" in out + "\n", out[-3000:]
    guard.assert_serving(within=3.0)


SYMLINKS = [(c, how) for c in ("job", "step", "rank", "subdir", "file")
            for how in ("absolute", "relative")]


@pytest.mark.parametrize("component,how", SYMLINKS, ids=[f"{c}-{h}" for c, h in SYMLINKS])
def test_symlink_into_root_only_directory(component, how, secret, user_dir, autopard_guard):
    guard = autopard_guard(NODE)
    job, out = attack(user_dir, {"component": component, "link": how, "secret": str(secret.path),
                                 "size": secret.size, "sha256": secret.sha256})
    assert "BUILT store" in out, out[-3000:]
    assert_nothing_leaked(secret, user_dir, job, out, guard)


@contextlib.contextmanager
def hard_links_to_anything():
    """fs.protected_hardlinks off while the attack runs, restored after: a kernel that lets a user
    link any file they can reach is what autopard must withstand on its own (Debian turns the
    protection on by default, which would keep this attack from ever being tried)."""
    knob = Path("/proc/sys/fs/protected_hardlinks")
    before = knob.read_text().strip()
    try:
        knob.write_text("0")
    except OSError as e:
        pytest.skip(f"cannot turn fs.protected_hardlinks off here ({e}): the kernel refuses "
                    f"{USER} the hard link this attack needs")
    try:
        yield
    finally:
        knob.write_text(before)


def test_hard_link_to_root_only_file(user_dir, autopard_guard):
    # The secret of this variant lies in a directory the user may traverse (in a 0700 one no link
    # could be made at all).
    s = Secret(dir_mode=0o711)
    try:
        guard = autopard_guard(NODE)
        with hard_links_to_anything():  # the job makes the link (restore_store.py)
            probe = as_user(["ln", s.path, user_dir / "probe"])
            assert probe.returncode == 0, probe.stderr
            (user_dir / "probe").unlink()
            job, out = attack(user_dir, {"component": "hardlink", "link": "absolute",
                                         "secret": str(s.path), "hardlink_target": str(s.path),
                                         "size": s.size, "sha256": s.sha256})
        assert "BUILT store" in out, out[-3000:]
        # The link is the user's to stat (its directory is theirs): the size is no secret to them,
        # the content is.
        assert_nothing_leaked(s, user_dir, job, out, guard, size_is_theirs=True)
    finally:
        s.remove()


def test_fifo_as_object(secret, user_dir, autopard_guard):
    guard = autopard_guard(NODE)
    job, out = attack(user_dir, {"component": "fifo", "link": "absolute",
                                 "secret": str(secret.path), "size": secret.size,
                                 "sha256": secret.sha256}, timeout=90)
    assert "BUILT store" in out, out[-3000:]
    assert_nothing_leaked(secret, user_dir, job, out, guard)


def test_store_at_filesystem_root(user_dir, autopard_guard):
    """file:/// (the plugin refuses it at submit time, so the task asks autopard itself)."""
    guard = autopard_guard(NODE)
    job, out = attack(user_dir, {"upload": "file:///", "ask_timeout": 30}, launcher=False)
    took = float(re.search(r"^ASKED in ([\d.]+)s$", out, re.M).group(1))
    assert "REPLY " in out, f"autopard did not answer the restore of file:///:\n{out[-3000:]}"
    assert took < 5, f"the restore of file:/// took {took:.1f}s (a walk of the filesystem?)"
    guard.assert_alive()
    guard.assert_no_big_allocation()
    guard.assert_serving(within=3.0)


def test_sparse_terabyte_manifest(secret, user_dir, autopard_guard):
    """Last in this file: on a daemon that reads the manifest whole, autopard dies here."""
    guard = autopard_guard(NODE)
    job, out = attack(user_dir, {"component": "sparse", "link": "absolute",
                                 "secret": str(secret.path), "size": secret.size,
                                 "sha256": secret.sha256})
    assert "BUILT store" in out, out[-3000:]
    guard.assert_alive()
    guard.assert_no_big_allocation()
    assert_nothing_leaked(secret, user_dir, job, out, guard)
    assert "REPLY " in out, f"autopard did not answer the task's own restore:\n{out[-3000:]}"
