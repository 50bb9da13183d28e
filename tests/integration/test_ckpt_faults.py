"""autopard under faults, against a private s3rver and a private autopard (no Slurm needed: the
requests come from root, who may act on any job):
  * autopard SIGKILLed in the middle of a multipart upload and restarted: the step completes from
    the parts already recorded, with exactly the committed content and no stray objects;
  * s3rver stopped for 20 s in the middle of an upload: retries with backoff carry it through;
  * s3rver down for longer than the retry budget: the upload fails, keeps its multipart upload
    and parts, and completes where it stopped once s3rver is back and autopard restarts;
  * the same, without a restart: autopard retries the failed upload on its timer (backoff) until
    s3rver is back, and the step completes where it stopped;
  * autopard SIGKILLed right after commits returned, their uploads pending (s3rver stopped
    before): none of them is lost.
"""
import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BUILD_DIR, PYTHON, SOURCE_DIR, pending_uploads, s3rver_script, wait_for

AUTOPARD = BUILD_DIR / "service/autopard/autopard"
AUTOPAR = BUILD_DIR / "cli/autopar"
TOOL = BUILD_DIR / "service/storage/autopar-storage-tool"
PORT = int(os.environ.get("AUTOPAR_S3_FAULT_PORT", "18950"))
ENDPOINT = f"http://127.0.0.1:{PORT}"
BUCKET = "autopar-test"
SIZE_MIB = 160


def s3rver(action, state):
    s3rver_script(action, state, PORT, BUCKET)


class Daemon:
    def __init__(self, root: Path):
        self.root = root
        self.sock = root / "autopard.sock"
        self.conf = root / "autopard.conf"
        self.write_conf(retry_max_elapsed_s=120)
        self.log = root / "autopard.log"
        self.proc = None

    def write_conf(self, retry_max_elapsed_s, upload_retry_initial_s=30, upload_retry_max_s=1800):
        # Multipart (5 MiB parts) for every file above 5 MiB: these faults are about resuming it.
        self.conf.write_text(
            f"socket = {self.sock}\nstate_dir = {self.root}/state\nnode = faults\n"
            f"s3_endpoint = {ENDPOINT}\ns3_access_key = S3RVER\ns3_secret_key = S3RVER\n"
            "part_size = 5M\nmultipart_threshold = 5M\nconcurrency = 2\n"
            "retry_initial_ms = 200\nretry_max_delay_ms = 2000\n"
            f"retry_max_elapsed_s = {retry_max_elapsed_s}\ns3_stall_timeout_s = 5\n"
            "s3_connect_timeout_ms = 1000\n"
            f"upload_retry_initial_s = {upload_retry_initial_s}\nupload_retry_max_s = {upload_retry_max_s}\n")
        self.conf.chmod(0o600)

    def start(self):
        if self.sock.exists():
            self.sock.unlink()  # left by a SIGKILLed daemon; wait for the new one's
        self.proc = subprocess.Popen([str(AUTOPARD), "--config", str(self.conf)],
                                     stdout=open(self.log, "a"), stderr=subprocess.STDOUT)
        for _ in range(100):
            if self.sock.exists():
                return
            time.sleep(0.05)
        raise AssertionError("autopard did not start:\n" + self.log.read_text())

    def kill(self, sig=signal.SIGKILL):
        self.proc.send_signal(sig)
        self.proc.wait(timeout=30)

    def cli(self, *args, env=None, check=True):
        p = subprocess.run([str(AUTOPAR), *args, "--socket", str(self.sock)], env=env,
                           capture_output=True, text=True, timeout=60)
        if check:
            assert p.returncode == 0, p.stdout + p.stderr
        return p

    def uploads(self):
        return json.loads(self.cli("ckpt", "status", "--json").stdout)


@pytest.fixture
def setup(tmp_path):
    s3rver("start", tmp_path / "s3")
    d = Daemon(tmp_path)
    try:
        d.start()
        yield d, tmp_path
    finally:
        if d.proc and d.proc.poll() is None:
            d.kill(signal.SIGTERM)
        s3rver("stop", tmp_path / "s3")


def commit_env(d, ck, job, **extra):
    return dict(os.environ, SLURM_JOB_ID=job, AUTOPAR_CKPT_DIR=str(ck), RANK="0", WORLD_SIZE="1",
                AUTOPAR_CKPT_UPLOAD=f"s3://{BUCKET}/faults", AUTOPAR_SOCKET=str(d.sock), **extra)


def commit_big_file(d, tmp, job, step=1):
    ck = tmp / "ck"
    rank_dir = ck / f"step-{step}" / "rank-0"
    rank_dir.mkdir(parents=True)
    data = os.urandom(SIZE_MIB << 20)
    (rank_dir / "model.bin").write_bytes(data)
    (rank_dir / "meta.json").write_text('{"step": 1}\n')
    t = time.time()
    d.cli("ckpt", "commit", "--step", str(step), env=commit_env(d, ck, job))
    assert time.time() - t < 2
    return hashlib.sha256(data).hexdigest()


def storage_tool(tmp, *args):
    creds = tmp / "creds"
    creds.write_text("S3RVER\nS3RVER\n")
    return subprocess.run([str(TOOL), "--endpoint", ENDPOINT, "--credentials", str(creds),
                           f"s3://{BUCKET}/faults", *args], capture_output=True, text=True, check=True)


def objects(tmp, prefix):
    p = storage_tool(tmp, "ls", prefix)
    return sorted(line.split()[1] for line in p.stdout.splitlines() if line.strip())


def verify_download(tmp, key, sha):
    storage_tool(tmp, "get", key, str(tmp / "downloaded.bin"), sha)


def steps(d):
    return json.loads(d.cli("ckpt", "ls", f"s3://{BUCKET}/faults", "--json").stdout)


def step_state(d, job, step):
    """The step's state in the store; None while it cannot be listed (s3rver just restarted and
    not answering yet: the listing times out once, which only means "not yet")."""
    p = d.cli("ckpt", "ls", f"s3://{BUCKET}/faults", "--json", check=False)
    if p.returncode != 0:
        return None
    return next((s["state"] for s in json.loads(p.stdout) if s["job_id"] == job and s["step"] == step), None)


def wait_uploaded(d, fraction, what):
    total = SIZE_MIB << 20
    wait_for(lambda: any(u["bytes_done"] > total * fraction for u in d.uploads()), 120, what)


def assert_resumed_without_loss_or_duplicates(d, tmp, job, sha):
    """The step of commit_big_file completed by resuming its multipart upload: exactly its objects,
    with the committed content."""
    wait_for(lambda: step_state(d, job, 1) == "COMPLETE", 180, "step COMPLETE after the restart")
    log = d.log.read_text()
    assert f"resuming multipart upload of job-{job}/step-1/rank-0/model.bin" in log, log
    assert objects(tmp, f"job-{job}/") == [
        f"job-{job}/owner.json", f"job-{job}/step-1/manifest.json", f"job-{job}/step-1/rank-0.json",
        f"job-{job}/step-1/rank-0/meta.json", f"job-{job}/step-1/rank-0/model.bin"]
    verify_download(tmp, f"job-{job}/step-1/rank-0/model.bin", sha)


def test_sigkill_mid_multipart_upload_resumes_without_loss_or_duplicates(setup):
    d, tmp = setup
    sha = commit_big_file(d, tmp, "kill1")
    # Kill once a good part of the file is out (parts recorded in SQLite), well before the end.
    wait_uploaded(d, 1 / 4, "a quarter uploaded")
    d.kill(signal.SIGKILL)
    d.start()
    assert_resumed_without_loss_or_duplicates(d, tmp, "kill1", sha)


def test_s3rver_down_20s_mid_upload_is_ridden_through(setup):
    d, tmp = setup
    sha = commit_big_file(d, tmp, "outage1")
    wait_uploaded(d, 1 / 8, "an eighth uploaded")
    s3rver("stop", tmp / "s3")
    time.sleep(20)
    assert [u["state"] for u in d.uploads()] == ["uploading"]  # still retrying, not failed
    s3rver("start", tmp / "s3")
    wait_for(lambda: step_state(d, "outage1", 1) == "COMPLETE", 180, "step COMPLETE after the outage")
    # The request retries carried the one upload through: it never failed, no timer retry.
    events = json.loads(d.cli("events", "outage1", "--json").stdout)["events"]
    assert not [e for e in events if e["kind"] in ("ckpt_failed", "ckpt_upload_retry")], events
    verify_download(tmp, "job-outage1/step-1/rank-0/model.bin", sha)


def test_upload_failed_past_the_retry_budget_resumes_after_restart(setup):
    d, tmp = setup
    d.kill(signal.SIGTERM)
    d.write_conf(retry_max_elapsed_s=3)
    d.start()
    sha = commit_big_file(d, tmp, "budget1")
    wait_uploaded(d, 1 / 8, "an eighth uploaded")
    s3rver("stop", tmp / "s3")
    wait_for(lambda: [u["state"] for u in d.uploads()] == ["failed"], 120, "the upload to fail")
    assert "retried where it stopped" in d.uploads()[0]["error"]
    s3rver("start", tmp / "s3")
    d.kill(signal.SIGTERM)
    d.write_conf(retry_max_elapsed_s=120)
    d.start()
    assert_resumed_without_loss_or_duplicates(d, tmp, "budget1", sha)
    events = json.loads(d.cli("events", "budget1", "--json").stdout)["events"]
    assert [e["kind"] for e in events if e["kind"] in ("ckpt_failed", "ckpt_upload_retry", "ckpt_complete")] == [
        "ckpt_failed", "ckpt_upload_retry", "ckpt_complete"], events


def test_upload_failed_past_the_retry_budget_is_retried_on_a_timer(setup):
    d, tmp = setup
    d.kill(signal.SIGTERM)
    d.write_conf(retry_max_elapsed_s=3, upload_retry_initial_s=2, upload_retry_max_s=4)
    d.start()
    pid = d.proc.pid
    sha = commit_big_file(d, tmp, "timer1")
    wait_uploaded(d, 1 / 8, "an eighth uploaded")
    s3rver("stop", tmp / "s3")
    # Failed past the budget; the status says when autopard tries again.
    up = wait_for(lambda: [u for u in d.uploads() if u["state"] == "failed" and "next_retry_s" in u], 60,
                  "the upload to fail with a retry scheduled")[0]
    assert 0 <= up["next_retry_s"] <= 2, up
    assert "retried where it stopped" in up["error"], up
    # The table shows it as "retry-in-Ns" (between attempts; each one fails while s3rver is down).
    wait_for(lambda: "retry-in-" in d.cli("ckpt", "status").stdout, 60, "retry-in- in `autopar ckpt status`")

    def retries():
        events = json.loads(d.cli("events", "timer1", "--json").stdout)["events"]
        return [e for e in events if e["kind"] == "ckpt_upload_retry"]
    # A timer retry while s3rver is still down fails again; the next one is scheduled.
    wait_for(lambda: len(retries()) >= 1 and [u.get("next_retry_s") is not None for u in d.uploads()] == [True],
             60, "a timer retry to fail while s3rver is down")
    s3rver("start", tmp / "s3")
    # No restart, no other upload: the timer brings the step to COMPLETE where it stopped.
    assert_resumed_without_loss_or_duplicates(d, tmp, "timer1", sha)
    assert d.proc.poll() is None and d.proc.pid == pid
    details = [e["detail"] for e in retries()]
    assert len(details) >= 2, details
    for n, detail in enumerate(details, start=1):
        assert detail.startswith(f"attempt {n}: resuming the upload to s3://{BUCKET}/faults where it stopped"), details
    events = json.loads(d.cli("events", "timer1", "--json").stdout)["events"]
    kinds = [e["kind"] for e in events if e["kind"] in ("ckpt_failed", "ckpt_complete")]
    assert kinds == ["ckpt_failed", "ckpt_complete"], events


def test_commits_survive_sigkill_right_after_they_return(setup):
    d, tmp = setup
    ck = tmp / "ck-kill"
    count = 40
    for step in range(1, count + 1):
        rank_dir = ck / f"step-{step}" / "rank-0"
        rank_dir.mkdir(parents=True)
        (rank_dir / "w.bin").write_bytes(os.urandom(4096))
    env = commit_env(d, ck, "kill2", PYTHONPATH=str(SOURCE_DIR / "python"))
    # With the store down, every upload is still pending when autopard dies (at once after every
    # commit returned: no chance to flush anything).
    s3rver("stop", tmp / "s3")
    subprocess.run([PYTHON, "-c",
                    f"from autopar import ckpt\nfor s in range(1, {count + 1}): ckpt.commit(s)"],
                   env=env, check=True, timeout=120)
    d.kill(signal.SIGKILL)
    assert pending_uploads(d.root / "state" / "autopard.db", "kill2") == count
    s3rver("start", tmp / "s3")
    d.start()
    want = list(range(1, count + 1))
    wait_for(lambda: sorted(s["step"] for s in steps(d) if s["job_id"] == "kill2" and s["state"] == "COMPLETE") == want,
             180, f"all {count} committed steps COMPLETE after the SIGKILL")
