"""Attack: read another user's node-local checkpoints, or feed them files, through the shared
directories their --ckpt-dir lies under (docs/security.md).

A job's checkpoint directory sits under paths every user of the node shares (/tmp, scratch). The
plugin makes it in task_init_privileged, before the task drops root (core/private_dir.h): every
component that exists must be a directory (no symlink), root's or the job owner's, and not
writable by others unless sticky; the site's shared root (/tmp/autopar of the built-in
/tmp/autopar/%u/%j) is made root's, 0755, and what is below it the owner's, 0700, whatever the
owner's umask. autopar.ckpt checks the same on its side before it writes a step.

The second account (autopar-test2) attacks a job of root's:
- it makes a directory of its own, open to all, where the victim's --ckpt-dir will be: the task
  is refused with one line naming --ckpt-dir, the directory and its owner, and nothing of the
  victim's is written into it;
- it reads the checkpoint a victim with umask 022 wrote under the built-in pattern's root: the
  directory is 0700 and the user gets "Permission denied"; it cannot make the victim's directory
  under /tmp/autopar either.
About 3 s.
"""
import os
import re
import secrets
import stat
from pathlib import Path

from conftest import PYTHON, SOURCE_DIR, as_user, need_binaries, run, user_ids  # noqa: F401

WRITE = """
import os, sys
os.environ["AUTOPAR_STACKS"] = "0"
os.umask(0o022)  # a user's usual umask: what it makes is readable by everyone
from autopar import ckpt
d = ckpt.step_dir(1)
with open(os.path.join(d, "model.bin"), "wb") as f:
    f.write(b"the victim's weights")
print("WROTE", d, flush=True)
"""


def test_a_directory_another_user_made_first_is_refused():
    need_binaries()
    uid, _ = user_ids()
    trap = Path(f"/tmp/autopar-sec-trap-{secrets.token_hex(4)}")
    as_user(["mkdir", "-m", "0777", trap], check=True)
    try:
        p = run(["env", f"PYTHONPATH={SOURCE_DIR}/python", "srun", "-N1", "-n1", "-w", "node1", "-t", "2", f"--ckpt-dir={trap}/%u/%j",
                 PYTHON, "-c", WRITE], timeout=60)
        out = p.stdout + p.stderr
        assert p.returncode != 0, f"the job ran in a directory another user made:\n{out}"
        refusals = re.findall(r"autopar: --ckpt-dir: .*", out)
        assert refusals == [f"autopar: --ckpt-dir: {trap}: is owned by uid {uid}, not by root or "
                            f"the job's owner (uid 0) (refused: another user could read or "
                            f"replace the job's files there)"], out
        assert "WROTE" not in out
        assert list(trap.iterdir()) == [], "the victim wrote into the attacker's directory"
    finally:
        run(["rm", "-rf", str(trap)])


def test_a_checkpoint_under_umask_022_is_private():
    need_binaries()
    p = run(["env", f"PYTHONPATH={SOURCE_DIR}/python", "srun", "-N1", "-n1", "-w", "node1", "-t", "2", "--ckpt-dir=/tmp/autopar/%u/%j",
             PYTHON, "-c", WRITE], timeout=60, check=True)
    written = Path(re.search(r"^WROTE (.*)$", p.stdout, re.M).group(1))
    job_dir = written.parents[1]
    try:
        shared, mine = Path("/tmp/autopar"), Path("/tmp/autopar/root")
        for d, mode in ((shared, 0o755), (mine, 0o700), (job_dir, 0o700)):
            st = d.lstat()
            assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == mode, \
                f"{d}: uid {st.st_uid} mode {stat.S_IMODE(st.st_mode):04o}, not root's {mode:04o}"
        # The attacker reads the victim's weights: the kernel says no.
        for cmd in (["cat", str(written / "model.bin")], ["ls", str(job_dir)], ["ls", str(mine)]):
            r = as_user(cmd)
            assert r.returncode != 0 and "Permission denied" in r.stderr, (cmd, r.stdout, r.stderr)
        # ... nor makes a victim's directory in the shared root before the victim does.
        r = as_user(["mkdir", "/tmp/autopar/some-victim"])
        assert r.returncode != 0 and "Permission denied" in r.stderr, r.stderr
    finally:
        run(["rm", "-rf", str(job_dir)])
