"""Attack: stall, join or pose in another user's fault-tolerant group (docs/security.md, docs/ft.md).

Every member of a --fault-tolerance=step group serves the rendezvous store on a TCP port, and
gloo listens on more; any user of the node sees which ports a user listens on (/proc/net/tcp).
Before, the store was torch's TCPStore: unauthenticated, its keys under a guessable prefix, and
(torch 1.13) a server that serves nobody once one connection sends one byte of a request; a heal
unpickled what a peer sent. Now the store admits a connection only once it answers a challenge
with the job's key (which the launchers derive from their step's secret and give only to their
programs), serves each connection in its own thread, names keys under a namespace derived from
the key and seals every value; a heal is encrypted and authenticated with keys derived from it
and carries tensors and plain data only, never a pickle (python/tests/test_ft_store.py proves
the pieces one by one).

A job of root's trains etc/examples/ft_train.py on 2 nodes x 2 ranks; from its start the second
account (autopar-test2, programs/ft_intruder.py) attacks the store port of every program of the
job (what a scan of /proc/net/tcp by uid finds; the test narrows it to this job's stores,
rewritten as programs come and go), again and again; after 10 committed steps rank 1's program
is SIGKILLed: the group must re-form and heal rank 1's replacement under the attack. What must hold: the job
completes with every rank's final state bit for bit the fault-free run's (the same program, run
beside it on two other nodes), the replacement was healed, the healthy ranks never stopped.
gloo's own listeners are not attacked: a connection that begins gloo's handshake and never ends it
stalls the group's making (docs/security.md, known limits; an abortable group is #48's). The attack
starts with the job, so that the first group is made under it too. This test does not fail with
the old TCPStore in our runs (the test took 20.6 s against 15.2 s; why the old group got through
was not found), so what it proves is that
strangers on autopar's stores change nothing; the stall itself, and each piece of the store and
the heal, are proven in python/tests/test_ft_store.py.
About 1 min.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from conftest import PYTHON, PROGRAMS, cancel, SOURCE_DIR, LAUNCH, as_user, need_binaries, run, \
    wait_job, USER  # noqa: F401

EXAMPLE = SOURCE_DIR / "etc" / "examples" / "ft_train.py"
STEPS, RANKS = 40, 4


def submit(work: Path, nodes: str) -> str:
    for d in ("out", "ledger"):
        (work / d).mkdir(parents=True, exist_ok=True)
    script = work / "job.sh"
    script.write_text(f"""#!/bin/bash
#SBATCH -N2 -w {nodes} --ntasks-per-node=2 -o {work}/out.txt -e {work}/out.txt
#SBATCH --fault-tolerance=step --requeue-on-failure=1 --heartbeat-timeout=120
export PYTHONPATH={SOURCE_DIR}/python FT_LEDGER={work}/ledger
srun --mpi=pmix {LAUNCH} --no-prewarm -- {PYTHON} {EXAMPLE} --steps {STEPS} --global-batch 32 --step-sleep 0.1 --out {work}/out
""")
    p = run(["sbatch", "--parsable", f"--chdir={work}", str(script)], check=True)
    return p.stdout.strip().split(";")[0]


def results(work: Path):
    return {r: json.loads((work / "out" / f"rank-{r}.json").read_text()) for r in range(RANKS)}


def committed(work: Path) -> int:
    steps = [json.loads(l)["step"] for f in (work / "ledger").glob("*.jsonl")
             for l in f.read_text().splitlines() if l.strip()]
    return max(steps, default=-1) + 1


def node_pid(host_pid: int) -> int:
    for line in Path(f"/proc/{host_pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return host_pid


def program_pid(job: str, rank: int) -> int:
    for pid in map(int, subprocess.run(["pgrep", "-f", str(EXAMPLE)], capture_output=True,
                                       text=True).stdout.split()):
        try:
            env = dict(kv.split("=", 1) for kv in
                       Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in kv)
        except OSError:
            continue
        if env.get("SLURM_JOB_ID") == job and env.get("RANK") == str(rank) and \
                Path(f"/proc/{pid}/comm").read_text().strip() == "python3":
            return pid
    raise AssertionError(f"no program of rank {rank} of job {job}")


def listening(job: str):
    """The (address, port) of the store each program of `job` serves: of a program's listening
    sockets, the one with the lowest descriptor (the Manager makes its store before any process
    group, and a given-up group's descriptors are kept, never reused). A wildcard one at
    127.0.0.1."""
    pids = set()
    for pid in map(int, subprocess.run(["pgrep", "-f", str(EXAMPLE)], capture_output=True,
                                       text=True).stdout.split()):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if f"SLURM_JOB_ID={job}" in env:
            pids.add(pid)
    first = {}
    for line in subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout.splitlines():
        m = re.search(r"\s(\S+):(\d+)\s+\S+\s+users:(.*)$", line)
        if not m:
            continue
        ip = m.group(1).strip("[]")
        where = ("127.0.0.1" if ip in ("*", "0.0.0.0", "::") else ip, int(m.group(2)))
        for pid, fd in re.findall(r"pid=(\d+),fd=(\d+)", m.group(3)):
            if int(pid) in pids and (int(pid) not in first or int(fd) < first[int(pid)][0]):
                first[int(pid)] = (int(fd), where)
    return {where for _, where in first.values()}


def channels(job: str):
    """The (address, port) of every launcher's restart channel of `job`: the listening socket
    only that autopar-launch process holds (not srun, whose command line names it too)."""
    pids = set()
    for pid in map(int, subprocess.run(["pgrep", "-x", "autopar-launch"], capture_output=True,
                                       text=True).stdout.split()):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if f"SLURM_JOB_ID={job}" in env:
            pids.add(pid)
    out = set()
    for line in subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout.splitlines():
        holders = [int(p) for p in re.findall(r"pid=(\d+)", line)]
        if len(holders) == 1 and holders[0] in pids:
            ip, port = line.split()[3].rsplit(":", 1)
            out.add((ip, int(port)))
    return out


def keep_ports_current(job: str, path: Path, stop: threading.Event, find=None) -> None:
    while not stop.is_set():
        tmp = path.with_suffix(".new")
        tmp.write_text("".join(f"{ip} {port}\n" for ip, port in sorted((find or listening)(job))))
        tmp.chmod(0o644)
        tmp.rename(path)
        stop.wait(0.3)


def attacked_run(tmp_path: Path, targets) -> tuple:
    """A fault-tolerant job under attack from its start on the ports `targets(job)` names (as
    the second account), rank 1's program killed after 10 committed steps, beside the same job
    fault-free on two other nodes. Asserts the attacked job ends bit for bit as the fault-free
    one, rank 1's replacement healed and the other ranks never stopped; returns (the intruder's
    report line, the attacked job's output)."""
    need_binaries()
    clean_dir, attacked_dir = tmp_path / "clean", tmp_path / "attacked"
    clean = submit(clean_dir, "node[3-4]")
    shared = Path(tempfile.mkdtemp(prefix="autopar-sec-ft-"))  # where the attacker sees the stop
    shared.chmod(0o755)
    stop, ports = shared / "stop", shared / "ports"
    attacked = submit(attacked_dir, "node[1-2]")
    done = threading.Event()
    scanner = threading.Thread(target=keep_ports_current, args=(attacked, ports, done, targets),
                               daemon=True)
    scanner.start()
    intruder = subprocess.Popen(["runuser", "-u", USER, "--", PYTHON, str(PROGRAMS / "ft_intruder.py"),
                                 str(ports), str(stop)], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while committed(attacked_dir) < 10:
            assert time.time() < deadline, \
                "the attacked group did not train:\n" + (attacked_dir / "out.txt").read_text()[-3000:]
            time.sleep(0.2)
        pids = {r: program_pid(attacked, r) for r in range(RANKS)}
        nspids = {r: node_pid(p) for r, p in pids.items()}
        os.kill(pids[1], signal.SIGKILL)
        state = wait_job(attacked, timeout=240)
    finally:
        stop.touch()
        done.set()
        report = intruder.communicate(timeout=30)[0]
        shutil.rmtree(shared, ignore_errors=True)
        cancel(attacked)
    out = (attacked_dir / "out.txt").read_text()
    assert state == "COMPLETED", out[-4000:]
    assert wait_job(clean, timeout=240) == "COMPLETED", (clean_dir / "out.txt").read_text()[-3000:]
    reference, got = results(clean_dir), results(attacked_dir)
    assert {r["sha256"] for r in got.values()} == {reference[0]["sha256"]}, (got, reference)
    assert got[1]["stats"]["healed_bytes"] > 0, got[1]
    for r in (0, 2, 3):  # never stopped: the PIDs they saw (their node's namespace)
        assert got[r]["pid"] == nspids[r], (r, got[r], nspids[r])
    return report, out


def test_a_stranger_cannot_stall_join_or_pose_in_the_group(tmp_path):
    report, out = attacked_run(tmp_path, listening)
    # Each program's store, and the replacement's.
    assert "ATTACKS" in report and int(report.split()[1]) > 0 and int(report.split()[3]) >= 5, report
    assert "the state received" not in out and "no member of this job" not in out, out[-3000:]


def test_a_flood_of_the_launchers_channels_drops_no_join_or_quorum(tmp_path):
    """The launchers of a fault-tolerant run agree on each quorum over their restart channels
    (joins to the leader, the quorum back), which anyone can connect to. The second account floods
    every launcher's channel of the job from its start, again and again (hundreds of connections
    held, a request begun and never ended on each); rank 1's program is killed after 10 committed
    steps. What must hold: the group re-forms and heals the replacement, the healthy ranks never
    stop, and the job ends bit for bit as the fault-free run. (A line that arrived behind a burst
    of new connections could be pushed out of a channel's table unread; restart_channel_test
    proves that fixed. This flood did not make the old channel drop one in our runs either.)"""
    report, _ = attacked_run(tmp_path, channels)
    assert "ATTACKS" in report and int(report.split()[1]) > 100 and int(report.split()[3]) >= 4, report
