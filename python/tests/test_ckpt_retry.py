"""python/autopar/ckpt.py while the node's autopard restarts (no cluster): a request waits for a
daemon that comes back within AUTOPAR_DAEMON_RETRY_S, fails with how often it tried when it does
not, and is sent again after a connection closed before its reply only when repeating it is safe
(a commit, not an event)."""
import json
import socket
import threading
import time

import pytest

from autopar import ckpt
from conftest import read_request


class Daemon:
    """A Unix-socket autopard stand-in: starts listening after `delay` s; the first `drop`
    connections are closed after their request was read, without a reply."""

    def __init__(self, path, delay=0.0, drop=0):
        self.path, self.drop, self.requests = str(path), drop, []
        self.ready = threading.Event()
        threading.Thread(target=self._serve, args=(delay,), daemon=True).start()

    def _serve(self, delay):
        time.sleep(delay)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.bind(self.path)
            s.listen(8)
            self.ready.set()
            while True:
                conn, _ = s.accept()
                with conn:
                    req = read_request(conn)
                    if req is None:
                        continue
                    self.requests.append(req)
                    if self.drop > 0:
                        self.drop -= 1
                        continue
                    reply = {"ok": True, "commit_id": 1, "files": 1, "bytes": 4, "duplicate": False}
                    conn.sendall((json.dumps(reply) + "\n").encode())


@pytest.fixture
def job(tmp_path, monkeypatch):
    for k, v in {"SLURM_JOB_ID": "42", "RANK": "0", "WORLD_SIZE": "1",
                 "AUTOPAR_CKPT_DIR": str(tmp_path / "ckpt"),
                 "AUTOPAR_SOCKET": str(tmp_path / "autopard.sock")}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AUTOPAR_CKPT_UPLOAD", raising=False)
    monkeypatch.delenv("AUTOPAR_DAEMON_RETRY_S", raising=False)
    return tmp_path


def test_a_commit_waits_for_a_restarting_autopard(job):
    daemon = Daemon(job / "autopard.sock", delay=1.0)
    t0 = time.monotonic()
    reply = ckpt.commit(3)
    assert reply["commit_id"] == 1
    assert time.monotonic() - t0 >= 0.9
    assert [r["step"] for r in daemon.requests] == [3]


def test_an_absent_autopard_is_an_error_after_the_retry_time(job, monkeypatch):
    monkeypatch.setenv("AUTOPAR_DAEMON_RETRY_S", "1")
    t0 = time.monotonic()
    with pytest.raises(ckpt.AutoparError, match=r"is autopard running\?\) \(tried \d+ times over 1 s\)"):
        ckpt.commit(3)
    assert 0.5 <= time.monotonic() - t0 < 5


def test_no_retry_when_the_retry_time_is_zero(job, monkeypatch):
    monkeypatch.setenv("AUTOPAR_DAEMON_RETRY_S", "0")
    t0 = time.monotonic()
    with pytest.raises(ckpt.AutoparError) as e:
        ckpt.commit(3)
    assert "tried" not in str(e.value)
    assert time.monotonic() - t0 < 0.5


def test_a_commit_is_sent_again_after_a_lost_reply_an_event_is_not(job):
    daemon = Daemon(job / "autopard.sock", drop=1)
    assert daemon.ready.wait(5)
    assert ckpt.commit(4)["commit_id"] == 1
    assert [r["op"] for r in daemon.requests] == ["commit", "commit"]
    daemon.drop = 1
    with pytest.raises(ckpt.AutoparError, match="connection closed before the reply"):
        ckpt._call({"op": "event", "job_id": "42", "rank": 0, "step": 4, "kind": "note",
                    "detail": "x"}, 5.0)
    assert [r["op"] for r in daemon.requests] == ["commit", "commit", "event"]


def test_a_commit_says_how_long_the_training_stalled_to_write_the_step(job):
    """save_s (autopar goodput's checkpoint stall): from the process's first step_dir(step) to
    commit(step); a caller's own measure wins; a step whose directory this process never asked
    for (another rank's restore) sends none."""
    daemon = Daemon(job / "autopard.sock")
    assert daemon.ready.wait(5)
    ckpt.step_dir(5)
    time.sleep(0.2)
    ckpt.step_dir(5)  # the second call does not restart the clock
    ckpt.commit(5)
    ckpt.step_dir(6)
    ckpt.commit(6, save_s=1.5)
    ckpt.commit(7)
    sent = {r["step"]: r.get("save_s") for r in daemon.requests}
    assert 0.2 <= sent[5] < 2.0
    assert sent[6] == 1.5
    assert sent[7] is None
