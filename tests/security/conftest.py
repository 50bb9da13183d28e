"""Shared helpers of autopar's security tests (tests/security).

Each test runs one attack as the second, unprivileged account (autopar-test2, created by
tests/cluster/start.sh) with a job of its own, against the real autopard (root) on the local Slurm
cluster, and checks what must hold afterwards: nothing of root's reaches the user, and autopard
still serves everyone else. The cluster, SLURM_CONF and the build tree come from the environment
exactly as for the integration tests (tests/integration/conftest.py, whose helpers are reused here:
run, job_state, wait_job, slurm_conf, cluster_dir, ...).

What the attacks need from root, made and removed here:
- a root-only secret: a file of random text, mode 0600 root:root, in a fresh 0700 root directory
  (`secret`); its size (7 digits, so that no pid or step number is taken for it), SHA-256 and
  lines are what must never appear in anything the user can read;
- a directory of the user's own (`user_dir`, under /tmp, owned by autopar-test2);
- a guard on a node's autopard (`autopard_guard`): its pid before the attack (it must be the same
  one after: alive, not restarted), its peak RSS reset (it must not grow by hundreds of MiB), and
  its address space capped at 4 GiB above what it maps, so that an attack that makes it read an
  endless file (/dev/zero, a sparse TiB) fails fast with ENOMEM instead of taking this machine's
  memory. The cap is lifted afterwards; an autopard that died is brought back (the node is killed
  and revived: tests/cluster/kill-node.sh, revive-node.sh) so that the next test has one.
"""
import hashlib
import json
import os
import pwd
import re
import resource
import secrets
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import pytest


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from integration_helpers import integration as _it  # noqa: E402
run = _it.run
job_state = _it.job_state
wait_job = _it.wait_job
slurm_conf = _it.slurm_conf
cluster_dir = _it.cluster_dir
restart_node = _it.restart_node
BUILD_DIR = _it.BUILD_DIR
SOURCE_DIR = _it.SOURCE_DIR
PYTHON = _it.PYTHON
pytest_runtest_logreport = _it.pytest_runtest_logreport  # a skip fails the file (see there)
pytest_sessionfinish = _it.pytest_sessionfinish
pytest_runtest_makereport = _it.pytest_runtest_makereport  # a failed test's jobs are cancelled
cancel_jobs_of_a_failed_test = _it.cancel_jobs_of_a_failed_test

USER = "autopar-test2"
CLI = BUILD_DIR / "cli" / "autopar"
LAUNCH = BUILD_DIR / "launcher" / "autopar-launch"
PROGRAMS = Path(__file__).resolve().parent / "programs"  # what the user's jobs run


def user_ids():
    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        pytest.fail(f"no account {USER}: tests/cluster/start.sh creates it")
    return pw.pw_uid, pw.pw_gid


def as_user(args, *, env=None, timeout=120, cwd=None, check=False):
    """Runs `args` as the unprivileged account with the cluster's SLURM_CONF and the Python module
    on PYTHONPATH (plus `env`); returns the CompletedProcess."""
    assignments = [f"SLURM_CONF={slurm_conf()}", f"PYTHONPATH={SOURCE_DIR}/python"]
    assignments += [f"{k}={v}" for k, v in (env or {}).items()]
    return run(["runuser", "-u", USER, "--", "env", *assignments, *map(str, args)],
               timeout=timeout, cwd=cwd, check=check)


def user_sbatch(*args, env=None, cwd=None) -> str:
    """Submits a batch job as the unprivileged account; returns its id."""
    p = as_user(["sbatch", "--parsable", *args], env=env, cwd=cwd, check=True)
    return p.stdout.strip().split(";")[0]


def root_sbatch(*args) -> str:
    p = run(["sbatch", "--parsable", *args], check=True)
    return p.stdout.strip().split(";")[0]


def cancel(*jobs):
    for j in jobs:
        if j:
            run(["scancel", j])


def wait_running(job: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        state = job_state(job)
        if state == "RUNNING":
            return
        if state not in ("PENDING", "CONFIGURING", "UNKNOWN"):
            raise AssertionError(f"job {job} is {state}, not RUNNING")
        time.sleep(0.3)
    raise AssertionError(f"job {job} did not start within {timeout}s")


def need_binaries():
    for p in (CLI, LAUNCH):
        if not p.exists():
            pytest.fail(f"{p} is not built")


# ---- autopard ----------------------------------------------------------------------------------

def node_socket(node: str = "node1") -> Path:
    sock = cluster_dir() / "run" / f"autopard-{node}.sock"
    if not sock.exists():
        pytest.fail(f"{sock} missing: start the cluster with AUTOPAR_AUTOPARD "
                    "(scripts/cluster-env.sh)")
    return sock


def call(sock, request: dict, timeout: float = 5.0):
    """One request over autopard's socket as this process (root): (reply dict, seconds taken)."""
    t0 = time.monotonic()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(sock))
        s.sendall((json.dumps({"v": 1, **request}) + "\n").encode())
        buf = b""
        while b"\n" not in buf:
            s.settimeout(max(0.001, timeout - (time.monotonic() - t0)))
            chunk = s.recv(1 << 20)
            if not chunk:
                raise ConnectionError("autopard closed the connection before the reply")
            buf += chunk
    return json.loads(buf.split(b"\n", 1)[0]), time.monotonic() - t0


def assert_serving(node: str = "node1", within: float = 3.0):
    """autopard on `node` answers a root `status` request (another user's) within `within` s."""
    try:
        reply, took = call(node_socket(node), {"op": "status"}, timeout=within)
    except (OSError, ConnectionError) as e:  # socket.timeout is an OSError
        raise AssertionError(f"autopard on {node} did not answer a root status request within "
                             f"{within}s: {e!r}") from None
    assert reply.get("ok"), reply
    return took


def autopard_pid(node: str):
    """The host pid of this cluster's autopard on `node` (None when it does not run)."""
    conf = str(cluster_dir() / "etc" / f"autopard-{node}.conf")
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv if a]
        if args and os.path.basename(args[0]) == "autopard" and conf in args:
            return int(cmdline.parent.name)
    return None


def _start_ticks(pid: int):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def _status_kib(pid: int, key: str) -> int:
    m = re.search(rf"^{key}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    return int(m.group(1)) if m else 0


class AutopardGuard:
    """A node's autopard during an attack (see the module docstring)."""

    # Address space allowed above what autopard maps when the test starts: room for the threads
    # and malloc arenas of a restore or a capture, far below what an endless read would take.
    HEADROOM = 4 << 30

    def __init__(self, node: str):
        self.node = node
        self.pid = autopard_pid(node)
        if self.pid is None:
            pytest.fail(f"autopard does not run on {node}")
        self.start = _start_ticks(self.pid)
        self.old_limit = resource.prlimit(self.pid, resource.RLIMIT_AS)
        cap = _status_kib(self.pid, "VmSize") * 1024 + self.HEADROOM
        soft, hard = self.old_limit
        if soft != resource.RLIM_INFINITY:
            cap = min(cap, soft)  # never more than autopard was allowed already
        resource.prlimit(self.pid, resource.RLIMIT_AS, (cap, hard))
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
        self.rss0 = _status_kib(self.pid, "VmRSS")

    def alive(self) -> bool:
        return _start_ticks(self.pid) == self.start

    def assert_alive(self):
        assert self.alive(), (f"autopard on {self.node} (pid {self.pid}) died during the attack; "
                              f"its log: {cluster_dir()}/log/autopard-{self.node}.log")

    def assert_serving(self, within: float = 3.0):
        self.assert_alive()
        return assert_serving(self.node, within)

    def peak_growth_mib(self) -> float:
        return (_status_kib(self.pid, "VmHWM") - self.rss0) / 1024

    def assert_no_big_allocation(self, limit_mib: float = 256):
        growth = self.peak_growth_mib()
        assert growth < limit_mib, (f"autopard on {self.node}'s peak RSS grew by {growth:.0f} MiB "
                                    f"during the attack (it read or allocated what the user chose)")

    def close(self):
        if self.alive():
            try:
                resource.prlimit(self.pid, resource.RLIMIT_AS, self.old_limit)
            except OSError:
                pass
            return
        # Killed by the attack (the proof is the test's failure): a node with a fresh autopard for
        # whatever runs next.
        restart_node(self.node)
        deadline = time.time() + 30
        while time.time() < deadline and not node_socket_alive(self.node):
            time.sleep(0.5)


def node_socket_alive(node: str) -> bool:
    try:
        return bool(call(cluster_dir() / "run" / f"autopard-{node}.sock", {"op": "status"}, 2)[0])
    except (OSError, ConnectionError, ValueError):
        return False


@pytest.fixture
def autopard_guard():
    """guard(node) -> AutopardGuard; every guard is closed when the test ends."""
    guards = []

    def make(node: str = "node1") -> AutopardGuard:
        g = AutopardGuard(node)
        guards.append(g)
        return g

    yield make
    for g in guards:
        g.close()


# ---- what the user owns, what root keeps -------------------------------------------------------

@pytest.fixture
def user_dir():
    """A fresh directory under /tmp owned by the unprivileged account (removed afterwards)."""
    uid, gid = user_ids()
    d = Path(tempfile.mkdtemp(prefix="autopar-sec-"))
    os.chown(d, uid, gid)
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


class Secret:
    """A root-only file: `path` (0600 root:root) in `dir` (root:root, 0700 unless `dir_mode`
    says otherwise)."""

    def __init__(self, dir_mode: int = 0o700):
        self.dir = Path(tempfile.mkdtemp(prefix="autopar-secret-"))  # root's
        self.dir.chmod(dir_mode)
        size = 5_000_000 + secrets.randbelow(3_000_000)
        lines, total = [], 0
        while total < size:
            line = f"autopar-secret-{secrets.token_hex(24)}\n"
            lines.append(line)
            total += len(line)
        self.data = "".join(lines).encode()[:size]
        self.size = size
        self.sha256 = hashlib.sha256(self.data).hexdigest()
        self.markers = [lines[0].strip(), lines[1].strip(), lines[len(lines) // 2].strip()]
        self.path = self.dir / "secret.bin"
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(self.data)

    def leaks(self, text: str, size_is_theirs: bool = False):
        """What of the secret `text` shows: its content, its SHA-256, its size (as a number),
        unless the user may know the size anyway (`size_is_theirs`: stat of a link they made)."""
        found = []
        if any(m in text for m in self.markers):
            found.append("content")
        if self.sha256 in text.lower():
            found.append(f"sha256 {self.sha256}")
        if not size_is_theirs and re.search(rf"(?<![\d.]){self.size}(?![\d.])", text):
            found.append(f"size {self.size}")
        return found

    def holders(self, *roots: Path, skip=()):
        """Regular files below `roots` (symlinks not followed; `skip` subtrees left out) that hold
        any of the secret's bytes (its first line, or a line from its middle)."""
        marks = [m.encode() for m in self.markers]
        skip = [Path(s) for s in skip]
        out = []
        for root in roots:
            for dirpath, dirnames, filenames in os.walk(root):
                here = Path(dirpath)
                dirnames[:] = [d for d in dirnames if here / d not in skip]
                for name in filenames:
                    p = here / name
                    try:
                        if not p.is_file() or p.is_symlink():
                            continue
                        with open(p, "rb", opener=lambda f, fl: os.open(f, fl | os.O_NOFOLLOW |
                                                                         os.O_NONBLOCK)) as fh:
                            data = fh.read()
                    except OSError:
                        continue
                    if any(m in data for m in marks):
                        out.append(str(p))
        return out

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def secret():
    s = Secret()
    yield s
    s.remove()


def user_events(job: str, node: str = "node1"):
    """`autopar events JOB --json` as the unprivileged account: (events, everything it printed)."""
    p = as_user([CLI, "events", job, "--json", "--socket", node_socket(node)], timeout=30)
    text = p.stdout + p.stderr
    try:
        evs = json.loads(p.stdout)["events"]
    except (ValueError, KeyError):
        evs = []
    return evs, text


def root_events(job: str, node: str = "node1"):
    p = run([str(CLI), "events", job, "--json", "--socket", str(node_socket(node))], timeout=30)
    try:
        return json.loads(p.stdout)["events"]
    except (ValueError, KeyError):
        return []
