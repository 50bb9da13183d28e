"""Attack: keep root asking slurmctld about jobs that do not exist.

Every request names a job; autopard asks Slurm who owns it (root's slurm_load_job, under the
node's one libslurm lock, which other jobs' recovery waits for). Owners Slurm names are cached;
a job Slurm does not know was asked about again on every request, so a user with no job at all
could keep root calling slurmctld. Now each user has a budget of questions about unknown jobs
(16 in 10 s, Authorizer::kUnknownBudget): past it the request is refused without asking Slurm,
saying so, while a job whose owner is known is still answered and other users are not affected.

The second account sends node1's autopard an event for a job of root's (running; refused, its
owner now known), then 60 events for 60 job ids Slurm never gave out, then root's job again, over
one connection: what must hold is that at most 16 of the 60 were asked of Slurm (the rest refused
with "not asked of Slurm"), the last one refused as another user's job (its owner known without
asking), and root's own request about that job served. About 3 s.
"""
import json

from conftest import PYTHON, as_user, need_binaries, node_socket, root_sbatch, cancel, run, \
    wait_running  # noqa: F401

ASK = """
import json, socket, sys
path, jobs = sys.argv[1], sys.argv[2:]
replies = []
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
    s.settimeout(30)
    s.connect(path)
    f = s.makefile("rb")
    for job in jobs:
        req = {"v": 1, "op": "event", "job_id": job, "rank": 0, "kind": "note", "detail": "x"}
        s.sendall((json.dumps(req) + "\\n").encode())
        replies.append(json.loads(f.readline()).get("error", ""))
print(json.dumps(replies))
"""


def test_questions_about_unknown_jobs_are_budgeted():
    need_binaries()
    root_job = root_sbatch("-w", "node1", "-n1", "-o", "/dev/null", "-t", "2", "--wrap", "sleep 60")
    try:
        wait_running(root_job)
        unknown = [str(8_000_000 + i) for i in range(60)]
        p = as_user([PYTHON, "-c", ASK, node_socket("node1"), root_job, *unknown, root_job], check=True)
        replies = json.loads(p.stdout)
        first, middle, last = replies[0], replies[1:61], replies[61]
        assert "belongs to uid 0" in first, first
        skipped = [e for e in middle if "not asked of Slurm" in e]
        asked = [e for e in middle if "not asked of Slurm" not in e]
        assert len(asked) <= 16 and len(skipped) >= 44, middle[:20]
        assert all(middle), "an unknown job's request was served"
        assert "permission denied" in last and "belongs to uid 0" in last, last
        # Root is not budgeted, and the node still answers about real jobs.
        r = run([PYTHON, "-c", ASK, node_socket("node1"), root_job], check=True)
        assert json.loads(r.stdout) == [""], r.stdout
    finally:
        cancel(root_job)
