"""python/autopar/ckpt.py's time-limit side against a fake autopard on a Unix socket (no cluster):
heartbeat() returns the reply's checkpoint_requested, time_limit_reached() agrees across ranks
(all_reduce MAX through torch.distributed, gloo, 2 processes) and announces the step, and a
program that exits after it holds instead (atexit). The module itself never imports torch."""
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
TORCH_PYTHON = "/usr/bin/python3"  # Debian's interpreter, the one with torch


class FakeAutopard:
    def __init__(self, path, requested):
        self.requested = requested
        self.requests = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(16)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        with conn:
            buf = b""
            while b"\n" not in buf:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
            req = json.loads(buf.split(b"\n", 1)[0])
            self.requests.append(req)
            reply = {"ok": True}
            if req["op"] == "heartbeat" and self.requested(req["rank"]):
                reply["checkpoint_requested"] = True
            if req["op"] == "status":
                reply["uploads"] = []
            conn.sendall((json.dumps(reply) + "\n").encode())


def env_for(tmp_path, rank, world):
    env = dict(os.environ)
    env.update({"AUTOPAR_SOCKET": str(tmp_path / "d.sock"), "SLURM_JOB_ID": "42",
                "AUTOPAR_CKPT_DIR": str(tmp_path / "ck"), "RANK": str(rank),
                "WORLD_SIZE": str(world), "PYTHONPATH": str(PYTHON_DIR),
                "AUTOPAR_STACK_DIR": str(tmp_path / "stacks")})  # autopar's default stack dump
    return env


def test_heartbeat_returns_the_request(tmp_path, monkeypatch):
    daemon = FakeAutopard(tmp_path / "d.sock", lambda rank: rank == 1)
    sys.path.insert(0, str(PYTHON_DIR))
    from autopar import ckpt
    for k, v in env_for(tmp_path, 0, 2).items():
        monkeypatch.setenv(k, v)
    assert ckpt.heartbeat(3) is False
    monkeypatch.setenv("RANK", "1")
    assert ckpt.heartbeat(4) is True
    assert [r["op"] for r in daemon.requests] == ["heartbeat", "heartbeat"]


def test_module_does_not_import_torch(tmp_path):
    code = "import sys, autopar.ckpt; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([TORCH_PYTHON, "-c", code], env=env_for(tmp_path, 0, 1)).returncode == 0


AGREE = """
import os, sys, torch, torch.distributed as dist
from autopar import ckpt
rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=rank, world_size=2)
got = [ckpt.agree(rank == 1 and s == 2) for s in range(4)]
print("agree", rank, got, flush=True)
if ckpt.time_limit_reached(ckpt.heartbeat(7), 7):
    print("reached", rank, flush=True)
os._exit(0)  # skips the hold at exit (test_exit_after_the_request_holds)
"""


def test_ranks_agree_and_announce_the_step(tmp_path):
    """Only rank 1 is asked; both ranks see True at the same step and announce it."""
    daemon = FakeAutopard(tmp_path / "d.sock", lambda rank: rank == 1)
    procs = [subprocess.Popen([TORCH_PYTHON, "-c", AGREE, str(r), str(tmp_path / "store")],
                              env=env_for(tmp_path, r, 2), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for r, out in enumerate(outs):
        assert f"agree {r} [False, False, True, False]" in out, out
        assert f"reached {r}" in out, out
    announced = sorted(q["rank"] for q in daemon.requests if q["op"] == "event")
    assert announced == [0, 1]
    assert all(q["kind"] == "time_limit_checkpoint" and q["step"] == 7
               for q in daemon.requests if q["op"] == "event")


def test_exit_after_the_request_holds(tmp_path):
    """A program that returns after its time-limit checkpoint must not end the job as finished:
    it holds until the requeue ends it (here: until the test kills it)."""
    FakeAutopard(tmp_path / "d.sock", lambda rank: True)
    code = ("from autopar import ckpt\n"
            "assert ckpt.time_limit_reached(ckpt.heartbeat(5), 5)\n"
            "print('returning', flush=True)\n")
    p = subprocess.Popen([TORCH_PYTHON, "-c", code], env=env_for(tmp_path, 0, 1),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = p.stderr.readline()  # the hold's message, or "" if the program ended instead
        assert "holding until the requeue" in first, first + p.stderr.read()
        with pytest.raises(subprocess.TimeoutExpired):
            p.wait(timeout=1)
    finally:
        p.kill()
    out, _ = p.communicate()
    assert "returning" in out
