"""Attack: keep root asking slurmctld about jobs that do not exist.

Every request names a job; autopard asks Slurm who owns it (root's slurm_load_job, under the
node's one libslurm lock, which other jobs' recovery waits for). Owners Slurm names are cached;
a job Slurm does not know was asked about again on every request, at whatever rate a user with
no job at all sent them. Now past 16 such questions in 10 s (Authorizer::kUnknownBudget) a user's
lookups are throttled: one at a time, each after a 200 ms pause, so the user makes root call
slurmctld at most 5 times a second; nothing is refused, a job whose owner is known is answered at
once, and other users are not slowed.

The second account sends node1's autopard an event for a job of root's (refused; its owner now
known), then 56 events for job ids Slurm never gave out, then root's job again, over one
connection; then runs a job of its own at once. What must hold: the 56 took at least 40 x 200 ms
(the Slurm calls past the budget were paced), all were refused as unknown, root's job was
answered without a pause, the user's own new job commits its checkpoint (late, not refused), and
root is not throttled. About 12 s.
"""
import json
import re
import time

from conftest import (PYTHON, as_user, cancel, need_binaries, node_socket, root_sbatch, run,  # noqa: F401
                      user_dir, wait_running)

ASK = """
import json, socket, sys, time
path, jobs = sys.argv[1], sys.argv[2:]
replies = []
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
    s.settimeout(60)
    s.connect(path)
    f = s.makefile("rb")
    for job in jobs:
        start = time.monotonic()
        req = {"v": 1, "op": "event", "job_id": job, "rank": 0, "kind": "note", "detail": "x"}
        s.sendall((json.dumps(req) + "\\n").encode())
        replies.append([json.loads(f.readline()).get("error", ""), time.monotonic() - start])
print(json.dumps(replies))
"""

COMMIT = """
import os
os.environ["AUTOPAR_STACKS"] = "0"
from autopar import ckpt
d = ckpt.step_dir(1)
open(os.path.join(d, "w.bin"), "wb").write(b"x" * 100)
print("COMMITTED", ckpt.commit(1, timeout=60), flush=True)
"""


def test_questions_about_unknown_jobs_are_paced(user_dir):
    need_binaries()
    root_job = root_sbatch("-w", "node1", "-n1", "-o", "/dev/null", "-t", "2", "--wrap", "sleep 60")
    try:
        wait_running(root_job)
        unknown = [str(8_000_000 + i) for i in range(56)]
        p = as_user([PYTHON, "-c", ASK, node_socket("node1"), root_job, *unknown, root_job],
                    check=True, timeout=120)
        replies = json.loads(p.stdout)
        first, middle, last = replies[0], replies[1:57], replies[57]
        assert "belongs to uid 0" in first[0], first
        assert all("does not know" in e for e, _ in middle), middle[:5]
        paced = sum(s for _, s in middle)
        assert paced >= 40 * 0.2, f"56 unknown jobs asked in {paced:.2f} s: not paced"
        assert "belongs to uid 0" in last[0] and last[1] < 0.15, last  # known: no pause
        # The user's own new job, right after: its commit is looked up late, never refused.
        c = as_user(["srun", "-N1", "-n1", "-w", "node1", "-t", "2", f"--ckpt-dir={user_dir}/ck/%j",
                     PYTHON, "-c", COMMIT], cwd=user_dir, timeout=120)
        assert c.returncode == 0 and "COMMITTED" in c.stdout, c.stdout + c.stderr
        # Root is never throttled.
        start = time.monotonic()
        r = run([PYTHON, "-c", ASK, node_socket("node1"), *[str(9_000_000 + i) for i in range(30)]],
                check=True)
        assert time.monotonic() - start < 3, r.stdout
    finally:
        cancel(root_job)
