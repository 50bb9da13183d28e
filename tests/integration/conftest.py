"""Shared helpers for autopar's integration tests on the local Slurm cluster.

The cluster is started by scripts/test.sh (tests/cluster/start.sh) before ctest runs; these tests
find it through SLURM_CONF and the build tree through AUTOPAR_BUILD_DIR. Without SLURM_CONF they
fail (not skip): an integration test that silently does nothing proves nothing. A test that
skips itself (this machine cannot do what it needs: memory cgroups, hard links) fails its file in
ctest too, with the reason (ctest runs pytest with -rs), unless AUTOPAR_ALLOW_SKIPS=1 says that
this machine is known not to.
"""
import os
import re
import shlex
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("AUTOPAR_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("AUTOPAR_BUILD_DIR", SOURCE_DIR / "build"))
PYTHON = sys.executable  # the pinned environment's interpreter (scripts/install-deps.sh), with torch


_skipped = []


def pytest_runtest_logreport(report):
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    """ctest shows a file whose tests all skipped as passed: a skip fails it (see above)."""
    if _skipped and exitstatus == 0 and os.environ.get("AUTOPAR_ALLOW_SKIPS") != "1":
        print(f"\n{len(_skipped)} test(s) skipped, which fails the file (AUTOPAR_ALLOW_SKIPS=1 "
              f"allows it): {', '.join(_skipped)}")
        session.exitstatus = 1


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if outcome.get_result().failed:
        item.autopar_failed = True


@pytest.fixture(autouse=True)
def cancel_jobs_of_a_failed_test(request):
    """The jobs a failed test submitted are cancelled when it ends: left behind, a job that keeps
    recovering (what the test was about) takes the cluster's CPUs from the tests after it (the
    fresh-clone CI of 18c8238: test_ft's job of a failed test requeued itself for minutes, and the
    tests beside it slowed down until one timed out)."""
    before = job_ids()
    yield
    if getattr(request.node, "autopar_failed", False):
        left = sorted(job_ids() - before)
        if left:
            run(["scancel", *left])


def slurm_conf() -> Path:
    conf = os.environ.get("SLURM_CONF")
    if not conf or not Path(conf).exists():
        pytest.fail("SLURM_CONF does not name the test cluster's slurm.conf; "
                    "run the tests through scripts/test.sh")
    return Path(conf)


def cluster_dir() -> Path:
    return slurm_conf().parent.parent


def run(cmd, *, env=None, timeout=120, check=False, cwd=None, input=None):
    """Runs a command (list or shell string) against the cluster; returns CompletedProcess."""
    full_env = dict(os.environ)
    full_env["SLURM_CONF"] = str(slurm_conf())
    if env:
        full_env.update(env)
    shell = isinstance(cmd, str)
    p = subprocess.run(cmd, shell=shell, env=full_env, cwd=cwd, input=input, text=True,
                       capture_output=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd if shell else shlex.join(cmd)} exited {p.returncode}\n"
                             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def job_ids() -> set:
    """Every job the controller knows (pending, running and recently finished). Other tests' jobs
    leave this set while a test runs (MinJobAge), so "nothing was submitted" is `not after - before`,
    never equality."""
    p = run(["scontrol", "-o", "show", "jobs"], check=True)
    return set(re.findall(r"JobId=(\d+)", p.stdout))


def assert_refused_at_submit(opts: str, error: str, nodes: int = 2):
    """sbatch with `opts` fails with exactly one autopar line that contains `error`, and nothing is
    submitted (the contract for every bad option value)."""
    before = job_ids()
    p = run(["sbatch", f"-N{nodes}", *opts.split(), "--wrap", "true"])
    assert p.returncode != 0 and "autopar: " + error in p.stderr, p.stderr
    assert len([line for line in p.stderr.splitlines() if "autopar: " in line]) == 1, p.stderr
    assert not job_ids() - before, "a refused submission must not create a job"


def rank_pid(job_id: str, rank: int, script) -> int:
    """The host PID of the Python process running `script` as `rank` of the job (every node is
    this host, and root sees every node's PIDs)."""
    for pid in map(int, subprocess.run(["pgrep", "-f", str(script)], capture_output=True,
                                       text=True).stdout.split()):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != "python3":
                continue
            env = dict(kv.split("=", 1) for kv in
                       Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in kv)
        except OSError:
            continue
        if env.get("SLURM_JOB_ID") == job_id and env.get("RANK") == str(rank):
            return pid
    raise AssertionError(f"no Python process of rank {rank} of job {job_id} running {script}")


def job_state(job_id: str) -> str:
    p = run(["scontrol", "-o", "show", "job", job_id])
    m = re.search(r"JobState=(\S+)", p.stdout)
    return m.group(1) if m else "UNKNOWN"


def wait_job(job_id: str, timeout: float = 180) -> str:
    """Waits until the job has ended; returns its final state."""
    deadline = time.time() + timeout
    state = "UNKNOWN"
    while time.time() < deadline:
        state = job_state(job_id)
        if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                     "BOOT_FAIL", "DEADLINE", "PREEMPTED"):
            return state
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} still {state} after {timeout}s")


def sbatch(script: str, tmp_path: Path, *args, env=None) -> str:
    """Submits a script text; returns the job id."""
    path = tmp_path / "job.sh"
    path.write_text(script)
    p = run(["sbatch", "--parsable", f"--chdir={tmp_path}", *args, str(path)], env=env, check=True)
    return p.stdout.strip().split(";")[0]


def preempt(job_id: str, work: Path) -> float:
    """Preempts a job of the `scavenger` partition (tests/cluster/start.sh: PreemptMode=REQUEUE,
    GraceTime=20): submits a 3-second job of the `debug` partition that needs every node the job
    holds, its files in WORK (made here). Returns when."""
    out = run(["scontrol", "show", "job", job_id], check=True).stdout
    m = re.search(r"\n\s*NodeList=(\S+)", out)
    assert m and m.group(1) != "(null)", out
    work.mkdir(parents=True)
    t = time.time()
    sbatch("#!/bin/bash\nsleep 3\n", work, "-p", "debug", f"-N{len(expand_nodes(m.group(1)))}",
           f"--nodelist={m.group(1)}", "--exclusive", f"-o{work}/out.txt")
    return t


def expand_nodes(hostlist: str):
    return run(["scontrol", "show", "hostnames", hostlist], check=True).stdout.split()


def wait_for(pred, timeout, what):
    """Calls PRED every 0.1 s until it returns something true, and returns that; fails naming WHAT
    after TIMEOUT seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def s3rver_script(action: str, state: Path, port: int, bucket: str):
    """Starts or stops (ACTION: start, stop) a test's own s3rver on loopback PORT with BUCKET, its
    data in STATE, by tests/s3/ACTION-s3rver.sh."""
    env = dict(os.environ, AUTOPAR_S3_PORT=str(port), AUTOPAR_S3_STATE=str(state),
               AUTOPAR_S3_BUCKET=bucket)
    script = SOURCE_DIR / "tests" / "s3" / f"{action}-s3rver.sh"
    p = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"{script.name} failed:\n{p.stdout}{p.stderr}"


def pending_uploads(state_db: Path, job: str) -> int:
    """Commits of JOB that a stopped autopard had recorded and not uploaded yet (queued, uploading
    or failed), from its state database STATE_DB, read-only."""
    db = sqlite3.connect(f"file:{state_db}?mode=ro", uri=True)
    try:
        return db.execute("SELECT COUNT(*) FROM commits WHERE job_id=? AND"
                          " state IN ('queued', 'uploading', 'failed')", (job,)).fetchone()[0]
    finally:
        db.close()


def env_lines(text: str, tag: str = "ENV") -> list:
    """Parses lines 'ENV k=v k=v ...' printed by tasks into dicts."""
    out = []
    for line in text.splitlines():
        if line.startswith(tag + " "):
            out.append(dict(kv.split("=", 1) for kv in line.split()[1:]))
    return out


@pytest.fixture
def shared_tmp(tmp_path):
    """A temporary directory every node of the cluster can read and write (all nodes are this host)."""
    tmp_path.chmod(0o1777)
    return tmp_path


# ---- Prometheus metrics (docs/metrics.md) -----------------------------------------------------
# Every node's autopard serves them on loopback (tests/cluster/start.sh: metrics_listen).

def metrics_address(node: str) -> str:
    conf = (cluster_dir() / "etc" / f"autopard-{node}.conf").read_text()
    return re.search(r"^metrics_listen = (\S+)$", conf, re.M).group(1)


def scrape(node: str) -> str:
    """GET /metrics from `node`'s autopard, checked with Prometheus' own linter (promtool)."""
    import urllib.request
    with urllib.request.urlopen(f"http://{metrics_address(node)}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
        text = r.read().decode()
    p = subprocess.run(["promtool", "check", "metrics"], input=text, text=True, capture_output=True)
    assert p.returncode == 0, f"promtool check metrics on {node}:\n{p.stdout}{p.stderr}"
    return text


def metric_samples(text: str) -> dict:
    """{(name, ((label, value), ...)): value} of an exposition text (labels sorted)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)', line)
        assert m, line
        labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or "")))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric(samples: dict, name: str, **labels) -> float:
    """One sample's value (0 when absent: a counter not yet seen)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def cluster_plugstack():
    """The cluster's own plugstack.conf (every node's and submit host's), rewritten by the test
    and put back afterwards; yields a function that writes the autopar line with its kind
    (required/optional) and arguments."""
    conf = slurm_conf().read_text()
    path = Path(re.search(r"^PlugStackConfig=(\S+)", conf, re.M).group(1))
    saved = path.read_text()
    line = next(l for l in saved.splitlines() if "autopar" in l and not l.startswith("#"))
    plugin, args = line.split()[1], line.split()[2:]

    def write(kind, replace, extra=()):
        """kind None: no autopar line at all."""
        new_args = [replace.get(a, a) for a in args] + list(extra)
        path.write_text(f"{kind} {plugin} {' '.join(new_args)}\n" if kind else "# none\n")

    yield write, args
    path.write_text(saved)


def cluster_script(name: str, *args, timeout=180, check=True):
    """Runs tests/cluster/NAME ARGS... against this test's cluster (its directory and ports)."""
    port = re.search(r"^SlurmctldPort=(\d+)", slurm_conf().read_text(), re.M).group(1)
    env = {"AUTOPAR_CLUSTER_DIR": str(cluster_dir()), "AUTOPAR_CLUSTER_PORT_BASE": port}
    return run(["bash", str(SOURCE_DIR / "tests" / "cluster" / name), *args], env=env,
               timeout=timeout, check=check)


def restart_node(node):
    """Kills NODE as a whole and revives it: a fresh slurmd and autopard."""
    for script in ("kill-node.sh", "revive-node.sh"):
        cluster_script(script, node)


def s3_client():
    """boto3's client of the suite's S3 server (tests/s3/start-s3rver.sh, started by scripts/test.sh)."""
    endpoint = os.environ.get("AUTOPAR_S3_ENDPOINT")
    if not endpoint:
        pytest.fail("AUTOPAR_S3_ENDPOINT is not set: start s3rver first (tests/s3/start-s3rver.sh, "
                    "as scripts/test.sh does)")
    import boto3
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="S3RVER",
                        aws_secret_access_key="S3RVER", region_name="us-east-1")
