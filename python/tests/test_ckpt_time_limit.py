"""python/autopar/ckpt.py's time-limit side against a fake autopard on a Unix socket (no cluster):
heartbeat() returns the reply's checkpoint_requested (wait=True: this heartbeat's; by default, a
background thread's latest reply, one heartbeat late), time_limit_reached() agrees across ranks
(all_reduce MAX through torch.distributed, gloo, 2 processes) and announces the step, and a
program that exits after it holds instead (atexit). The module itself never imports torch."""
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import read_request

PYTHON_DIR = Path(__file__).resolve().parents[1]
TORCH_PYTHON = sys.executable  # the pinned environment's interpreter, with torch


class FakeAutopard:
    def __init__(self, path, requested, delay=0.0):
        self.requested = requested
        self.delay = delay  # seconds before each reply
        self.requests = []
        self.pids = []  # each request's sender (SO_PEERCRED)
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
            req = read_request(conn)
            if req is None:
                return
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            self.pids.append(struct.unpack("3i", creds)[0])
            self.requests.append(req)
            time.sleep(self.delay)
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
    """wait=True: the synchronous heartbeat returns its own reply's flag."""
    daemon = FakeAutopard(tmp_path / "d.sock", lambda rank: rank == 1)
    sys.path.insert(0, str(PYTHON_DIR))
    from autopar import ckpt
    for k, v in env_for(tmp_path, 0, 2).items():
        monkeypatch.setenv(k, v)
    assert ckpt.heartbeat(3, wait=True) is False
    monkeypatch.setenv("RANK", "1")
    assert ckpt.heartbeat(4, wait=True) is True
    assert [r["op"] for r in daemon.requests] == ["heartbeat", "heartbeat"]


def test_a_rank_that_leads_says_so_and_rank_zero_never_needs_to(tmp_path, monkeypatch):
    """autopar.ft's hook: the lowest member of a group without rank 0 reports in its place
    ("leads": true); rank 0 and a rank that does not lead send no such field."""
    daemon = FakeAutopard(tmp_path / "d.sock", lambda rank: False)
    sys.path.insert(0, str(PYTHON_DIR))
    from autopar import ckpt
    for k, v in env_for(tmp_path, 0, 4).items():
        monkeypatch.setenv(k, v)
    leads = [True]
    ckpt.lead_when(lambda: leads[0])
    ckpt.heartbeat(1, wait=True)  # rank 0
    monkeypatch.setenv("RANK", "2")
    ckpt.heartbeat(2, wait=True)
    leads[0] = False
    ckpt.heartbeat(3, wait=True)
    ckpt.lead_when(None)
    assert [(r["rank"], r["step"], r.get("leads")) for r in daemon.requests] == \
        [(0, 1, None), (2, 2, True), (2, 3, None)]


def test_heartbeat_does_not_wait_and_its_flag_lags_one_heartbeat(tmp_path, monkeypatch):
    """The default heartbeat returns before autopard answers (here after 0.3 s); the request
    comes with the next call; the latest heartbeat wins, a NaN loss is not lost on the way."""
    daemon = FakeAutopard(tmp_path / "d.sock", lambda rank: True, delay=0.3)
    from autopar import ckpt
    for k, v in env_for(tmp_path, 1, 2).items():
        monkeypatch.setenv(k, v)
    t0 = time.monotonic()
    assert ckpt.heartbeat(10, samples=8) is False  # no reply yet
    assert time.monotonic() - t0 < 0.1
    while not daemon.requests:  # 10 is in flight (its reply comes 0.3 s after it arrived)
        time.sleep(0.001)
    t0 = time.monotonic()
    assert ckpt.heartbeat(11, loss=float("nan")) is False  # pending
    assert ckpt.heartbeat(12, loss=1.5) is False  # replaces 11, keeping its NaN
    assert time.monotonic() - t0 < 0.1
    assert ckpt.flush_heartbeats(5.0)
    assert [(r["step"], r.get("loss")) for r in daemon.requests] == [(10, None), (12, "nan")]
    assert daemon.requests[0]["samples"] == 8
    assert ckpt.heartbeat(13) is True  # the replies to 10 and 12 asked
    assert ckpt.flush_heartbeats(5.0)
    assert ckpt.heartbeat_error() is None
    assert set(daemon.pids) == {os.getpid()}


def test_background_errors_never_raise(tmp_path, monkeypatch, capfd):
    """Without autopard the background send fails: the program goes on; the first error is
    printed once and kept; the synchronous heartbeat raises as before."""
    from autopar import ckpt
    for k, v in env_for(tmp_path, 0, 1).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AUTOPAR_SOCKET", str(tmp_path / "nobody.sock"))
    # As the plugin sets it for a job that runs without autopard (on_autopard_missing=warn).
    monkeypatch.setenv("AUTOPAR_DAEMON_RETRY_S", "0")
    monkeypatch.setattr(ckpt, "_sender", None)
    for step in range(3):
        assert ckpt.heartbeat(step) is False
        assert ckpt.flush_heartbeats(5.0)
    err = capfd.readouterr().err
    assert err.count("autopar: rank 0: heartbeat of step 0: autopard (") == 1, err
    assert "heartbeat of step 1" not in err
    assert ckpt.heartbeat_error().startswith("heartbeat of step 0: autopard (")
    with pytest.raises(ckpt.AutoparError, match="is autopard running"):
        ckpt.heartbeat(3, wait=True)
    # Outside a job: the synchronous heartbeat and a process's first one raise; later ones are
    # sends that fail (the first error stays the one reported).
    monkeypatch.delenv("SLURM_JOB_ID")
    assert ckpt.heartbeat(4) is False
    assert ckpt.flush_heartbeats(5.0)
    assert ckpt.heartbeat_error().startswith("heartbeat of step 0: ")
    with pytest.raises(ckpt.AutoparError, match="SLURM_JOB_ID is not set"):
        ckpt.heartbeat(5, wait=True)
    monkeypatch.setattr(ckpt, "_sender", None)
    with pytest.raises(ckpt.AutoparError, match="SLURM_JOB_ID is not set"):
        ckpt.heartbeat(6)


FORKED = """
import os, sys
from autopar import ckpt
ckpt.heartbeat(1)  # starts the parent's thread
assert ckpt.flush_heartbeats(5.0)
pid = os.fork()
if pid == 0:
    ckpt.heartbeat(2)  # a thread of the child's own
    os._exit(0 if ckpt.flush_heartbeats(5.0) else 1)
_, status = os.waitpid(pid, 0)
ckpt.heartbeat(3)
print(os.getpid(), pid, status, flush=True)
"""


def test_heartbeats_after_fork(tmp_path):
    """A forked child (a DataLoader worker, say) that sends heartbeats starts its own thread;
    the parent's keeps working; the last heartbeat is sent at exit."""
    daemon = FakeAutopard(tmp_path / "d.sock", lambda rank: False)
    p = subprocess.run([sys.executable, "-c", FORKED], env=env_for(tmp_path, 0, 1),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    parent, child, status = map(int, p.stdout.split())
    assert status == 0, p.stderr
    # At its exit the parent says it is finishing (with its last step); the child left by
    # os._exit, without exit handlers.
    assert [(r["step"], r.get("finishing", False)) for r in daemon.requests] == \
        [(1, False), (2, False), (3, False), (3, True)]
    assert daemon.pids == [parent, child, parent, parent]


def test_module_does_not_import_torch(tmp_path):
    code = "import sys, autopar.ckpt; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([TORCH_PYTHON, "-c", code], env=env_for(tmp_path, 0, 1)).returncode == 0


AGREE = """
import os, sys, time, torch, torch.distributed as dist
from autopar import ckpt
rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=rank, world_size=2)
got = [ckpt.agree(rank == 1 and s == 2) for s in range(4)]
print("agree", rank, got, flush=True)
for step in range(7, 100):  # a training loop: the request arrives one heartbeat late
    requested = ckpt.heartbeat(step)
    time.sleep(0.1)  # the step's work
    if ckpt.time_limit_reached(requested, step):
        print("reached", rank, step, flush=True)
        break
os._exit(0)  # skips the hold at exit (test_exit_after_the_request_holds)
"""


def test_ranks_agree_and_announce_the_step(tmp_path):
    """Only rank 1 is asked; both ranks see True at the same step (a later one than the first
    heartbeat's: the flag lags) and announce it."""
    daemon = FakeAutopard(tmp_path / "d.sock", lambda rank: rank == 1)
    procs = [subprocess.Popen([TORCH_PYTHON, "-c", AGREE, str(r), str(tmp_path / "store")],
                              env=env_for(tmp_path, r, 2), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    steps = set()
    for r, out in enumerate(outs):
        assert f"agree {r} [False, False, True, False]" in out, out
        reached = [line.split() for line in out.splitlines() if line.startswith("reached")]
        assert len(reached) == 1 and reached[0][1] == str(r), out
        steps.add(int(reached[0][2]))
    assert len(steps) == 1 and steps.pop() > 7
    announced = sorted(q["rank"] for q in daemon.requests if q["op"] == "event")
    assert announced == [0, 1]
    step = next(q["step"] for q in daemon.requests if q["op"] == "event")
    assert all(q["kind"] == "time_limit_checkpoint" and q["step"] == step
               for q in daemon.requests if q["op"] == "event")


def test_exit_after_the_request_holds(tmp_path):
    """A program that returns after its time-limit checkpoint must not end the job as finished:
    it holds until the requeue ends it (here: until the test kills it)."""
    FakeAutopard(tmp_path / "d.sock", lambda rank: True)
    code = ("from autopar import ckpt\n"
            "assert ckpt.time_limit_reached(ckpt.heartbeat(5, wait=True), 5)\n"
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


def test_a_sigterm_while_holding_ends_the_program_at_once(tmp_path):
    """Holding for the requeue after the notice's checkpoint, the next SIGTERM is Slurm ending
    the task (the requeue itself): the program ends then with 128+15, not KillWait seconds later
    at Slurm's SIGKILL, so the next run gets the node sooner."""
    FakeAutopard(tmp_path / "d.sock", lambda rank: False)
    code = ("import os, signal, threading\n"
            "from autopar import ckpt\n"
            "assert not ckpt.time_limit_reached(ckpt.heartbeat(1, wait=True), 1)\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"
            "assert ckpt.time_limit_reached(ckpt.heartbeat(2, wait=True), 2)\n"
            "threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()\n"
            "ckpt.wait_for_requeue()\n")
    t0 = time.monotonic()
    p = subprocess.run([TORCH_PYTHON, "-c", code], env=env_for(tmp_path, 0, 1),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 128 + 15, p.stdout + p.stderr
    assert "waiting for the requeue" in p.stderr and time.monotonic() - t0 < 30, p.stderr


def test_sigterm_asks_for_the_checkpoint_and_says_why(tmp_path):
    """From the first time_limit_reached() on, SIGTERM (a preemption's notice) does not end the
    program: the next call returns True and announces "termination_checkpoint"."""
    daemon = FakeAutopard(tmp_path / "d.sock", lambda rank: False)
    code = ("import os, signal\n"
            "from autopar import ckpt\n"
            "assert not ckpt.time_limit_reached(ckpt.heartbeat(1, wait=True), 1)\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"
            "print('alive', ckpt.time_limit_reached(ckpt.heartbeat(2, wait=True), 2), flush=True)\n"
            "os._exit(0)\n")
    p = subprocess.run([TORCH_PYTHON, "-c", code], env=env_for(tmp_path, 0, 1),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "alive True" in p.stdout, p.stdout + p.stderr
    announced = [q for q in daemon.requests if q["op"] == "event"]
    assert [(q["kind"], q["step"]) for q in announced] == [("termination_checkpoint", 2)]
