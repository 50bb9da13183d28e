"""Attack: run code as another user through the folder of their function job.

`autopar.jobs.submit(fn, folder=...)` pickles the call into the folder and unpickles its outcome
from there; unpickling runs whatever the pickle names. A folder another user made first (or can
write) let them replace call.pkl or result.pkl with a pickle of their own, run as the victim. Now
the folder and every directory above it are checked (autopar.private_dir: no symlink, root's or the
caller's, not writable by others unless sticky; the folder itself the caller's), a pickle is read
only from a regular file of the caller's that others cannot write, never through a symlink, and
temporary files are created exclusively.

The second account makes, open to all, the folder root's function job is about to use: the submit
is refused with one line naming the folder and its owner, and nothing is written there (no call,
so no job). A folder of root's own is 0700. About 1 s.
"""
import secrets
import stat
from pathlib import Path

from conftest import LAUNCH, PYTHON, SOURCE_DIR, as_user, run  # noqa: F401

SUBMIT = """
import sys
from autopar import jobs
try:
    jobs.submit(len, [1, 2], folder=sys.argv[1], nodes=1)
except PermissionError as e:
    print("REFUSED", e)
    sys.exit(3)
"""


def test_a_folder_another_user_made_is_refused():
    trap = Path(f"/tmp/autopar-sec-jobs-{secrets.token_hex(4)}")
    as_user(["mkdir", "-m", "0777", trap], check=True)
    try:
        p = run(["env", f"PYTHONPATH={SOURCE_DIR}/python", f"AUTOPAR_LAUNCH={LAUNCH}", PYTHON, "-c",
                 SUBMIT, str(trap)])
        assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
        lines = [l for l in p.stdout.splitlines() if l.startswith("REFUSED")]
        assert len(lines) == 1 and f"folder: {trap}: is owned by uid" in lines[0] and \
            "the job's owner (uid 0)" in lines[0], p.stdout
        assert list(trap.iterdir()) == [], "the victim wrote its call into the attacker's folder"
    finally:
        run(["rm", "-rf", str(trap)])


def test_a_folder_of_ones_own_is_private(tmp_path):
    folder = tmp_path / "jobs"
    p = run(["env", f"PYTHONPATH={SOURCE_DIR}/python", PYTHON, "-c",
             "import sys; from autopar import functions; functions.write_call(sys.argv[1], len, ([1],), {}, '0')",
             str(folder / "run")], check=True)
    assert stat.S_IMODE((folder / "run").stat().st_mode) == 0o700, p.stdout
