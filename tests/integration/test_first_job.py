"""README's first job (etc/examples/first_job.sbatch) on the local cluster, submitted as the README
says, with the installed programs' stand-ins first on PATH (the build's autopar-launch and autopar,
the source tree's Python module): it is planned, every rank prints its place and the plan's sizes,
each commits a checkpoint, and the job's own `autopar events` shows the story. README shows the
output; this test holds it to what the job prints. About 15 s.
"""
import os
import re

from conftest import BUILD_DIR, SOURCE_DIR, run, wait_job
from test_requeue_faults import need_autopard  # noqa: F401

SCRIPT = SOURCE_DIR / "etc" / "examples" / "first_job.sbatch"


def test_the_readmes_first_job_runs_as_written(tmp_path):
    tmp_path.chmod(0o1777)
    env = {**os.environ,
           "PATH": os.pathsep.join([str(BUILD_DIR / "launcher"), str(BUILD_DIR / "cli"), os.environ["PATH"]]),
           "PYTHONPATH": str(SOURCE_DIR / "python")}
    p = run(["sbatch", "--parsable", f"--chdir={tmp_path}", str(SCRIPT)], env=env, check=True)
    job = p.stdout.strip().split(";")[0]
    assert wait_job(job, timeout=120) == "COMPLETED", (tmp_path / f"first-{job}.out").read_text()
    out = (tmp_path / f"first-{job}.out").read_text()
    ranks = sorted(re.findall(r"^rank (\d) of 4 on (node\d) dp 4 micro-batch (\d+)$", out, re.M))
    assert [r[0] for r in ranks] == ["0", "1", "2", "3"], out
    assert len({r[1] for r in ranks}) == 2, out  # two nodes
    for kind in ("submitted", "step_started", "rendezvous", "ckpt_committed", "ckpt_complete", "finished"):
        assert re.search(rf"\b{kind}\b", out), (kind, out)
