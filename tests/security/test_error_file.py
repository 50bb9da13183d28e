"""Attack: hand another user's launcher a false "out of memory" verdict through a file in /tmp.

autopar-launch gives its program TORCHELASTIC_ERROR_FILE, where torchrun's @record and autopar's
Python module write the error that ended it; an out-of-memory error there classes the failure
`oom` (the run is re-planned to fit in less memory). The file was /tmp/autopar-error-<job>.<step>-
<rank>.json: a name another user can guess and make first in the sticky /tmp, where the launcher
(the job's owner, not root) can neither remove nor replace it. It now lives in a directory the
launcher makes with mkdtemp (0700), read without following a symlink.

The victim here is the second account (autopar-test2): a launcher running as root removes any
file, so only an ordinary user's job shows the attack; the attacker is another ordinary account,
`nobody`. It plants an out-of-memory error at the old name for the victim's held job, which is
then released: its program exits with status 3. What must hold: the failure is a plain crash
(class rank-crash, not oom), nothing of the planted text in the job's timeline. About 5 s.
"""
import json
import time
from pathlib import Path

from conftest import LAUNCH, PYTHON, as_user, cancel, need_binaries, root_events, run, user_dir, \
    user_sbatch  # noqa: F401

PLANTED = json.dumps({"message": {"message": "torch.OutOfMemoryError: CUDA out of memory. (planted)"}})


def test_a_planted_error_file_is_never_read(user_dir):
    need_binaries()
    script = user_dir / "job.sh"
    script.write_text(f"""#!/bin/bash
if [[ ${{SLURM_RESTART_COUNT:-0}} -gt 0 ]]; then exit 0; fi
srun -N1 -n1 -w node1 --mpi=pmix {LAUNCH} -- {PYTHON} -c 'import sys; sys.exit(3)'
sleep 5
""")
    script.chmod(0o755)
    job = user_sbatch("--hold", "-N1", "-w", "node1", "--requeue-on-failure=1", "-t", "2",
                      f"--chdir={user_dir}", "-o", str(user_dir / "out.txt"), str(script))
    planted = Path(f"/tmp/autopar-error-{job}.0-0.json")
    try:
        run(["runuser", "-u", "nobody", "--", "bash", "-c",
             f"umask 022 && printf '%s' '{PLANTED}' > {planted}"], check=True)
        run(["scontrol", "release", job], check=True)
        deadline = time.time() + 60
        failures = []
        while time.time() < deadline and not failures:
            failures = [e for e in root_events(job) if e["kind"] == "failure"]
            time.sleep(0.5)
        assert failures, f"no failure in job {job}'s timeline: {root_events(job)}"
        details = [e.get("detail", "") for e in failures]
        assert "class=rank-crash" in details[0], details
        assert not any("class=oom" in d for d in details), details
        assert not any("planted" in json.dumps(e) for e in root_events(job)), root_events(job)
        assert planted.read_text() == PLANTED  # the launcher could not remove it: it ignored it
    finally:
        cancel(job)
        planted.unlink(missing_ok=True)
