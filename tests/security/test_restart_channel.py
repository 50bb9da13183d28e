"""Attack: silence or steer a job's in-place restarts through the launchers' restart channels.

Each autopar-launch of a step with in-place restarts listens on a TCP port of its node's address
(launcher/restart_channel.h; published to the other launchers through PMIx only), and any local
process, or any host that reaches it, may connect. The second account (autopar-test2) runs a
2-node job (one task each) of `srun --mpi=pmix autopar-launch -- python programs/beat.py`
(heartbeats every 0.2 s) with --restarts-in-place=1, finds each launcher's channel (`ss -ltnp`:
the listening socket only the launcher holds) and, as the same user (programs/channel_flood.py):
- opens 200 idle connections to each channel and sends lines with a wrong token (stop notices,
  failure reports, verdicts "exit 0" and "restart elsewhere", a restore value; the token random,
  upper-case, a byte short or long, empty, missing) and a 4 KiB line without a newline;
- waits longer than a channel keeps a silent connection (2 s), sends more forged lines, and
  opens 200 fresh idle connections to each channel, held while rank 1's program is killed
  (SIGKILL).

What must hold:
- the forged lines cause nothing: no failure, recovery, restart, stop or exit in the job's
  timeline before the crash, and both ranks' programs keep stepping in generation 0;
- a launcher holds at most 64 of the connections (RestartChannel::kMaxConnections, the oldest
  closed to make room), and every idle one is closed once it has been silent for 2 s (when the
  launcher next reads its channel);
- the crash is still recovered in place, promptly: the restarted generation's first step
  (`first_step`, generation 1) within 5 s of the kill (without the attack it takes well under
  a second on the local cluster; a channel that served connections one at a time, waiting out
  each silent one, would take minutes), and the job ends COMPLETED.
About 10 s.
"""
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

from conftest import (LAUNCH, PROGRAMS, PYTHON, SOURCE_DIR, USER, cancel, job_state,  # noqa: F401
                      need_binaries, root_events, run, user_dir, user_sbatch, wait_job,
                      wait_running)

BEAT = PROGRAMS / "beat.py"
FLOOD = PROGRAMS / "channel_flood.py"
IDLE = 200             # idle connections to each launcher's channel, twice
MAX_CONNECTIONS = 64   # RestartChannel::kMaxConnections
RESTART_BOUND_S = 5.0  # from the kill to the restarted generation's first step
QUIET = {"rank_exit", "failure", "recovery", "restarted", "stopped", "first_step", "finished",
         "hang_stop", "requeue"}


def beats(out: Path):
    """[(rank, generation, step, time)] of the programs' output."""
    text = out.read_text(errors="replace") if out.exists() else ""
    return [(int(m.group(1)), int(m.group(2)), int(m.group(3)), float(m.group(4)))
            for m in re.finditer(r"^beat rank (\d+) gen (\d+) step (\d+) time ([\d.]+)$", text,
                                 re.M)]


def last_step(out: Path, rank: int) -> int:
    return max((s for r, g, s, _ in beats(out) if r == rank and g == 0), default=-1)


def wait_steps(out: Path, step: int, timeout: float = 60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if all(last_step(out, r) >= step for r in (0, 1)):
            return
        time.sleep(0.2)
    raise AssertionError(f"the ranks did not reach step {step} within {timeout}s:\n"
                         f"{out.read_text(errors='replace')[-3000:] if out.exists() else ''}")


def environ(pid: int):
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(kv.split("=", 1) for kv in raw.decode(errors="replace").split("\0") if "=" in kv)


def processes(job: str, comm: str):
    """{step rank: pid} of the job's processes named `comm` (of the step's program: RANK, of its
    launchers: SLURM_PROCID)."""
    found = {}
    for p in Path("/proc").glob("[0-9]*/comm"):
        try:
            if p.read_text().strip() != comm:
                continue
        except OSError:
            continue
        env = environ(int(p.parent.name))
        if env.get("SLURM_JOB_ID") == job:
            rank = env.get("RANK" if comm != "autopar-launch" else "SLURM_PROCID")
            if rank is not None:
                found[int(rank)] = int(p.parent.name)
    return found


def channel_endpoint(pid: int) -> str:
    """The restart channel of launcher `pid`: the listening TCP socket only it holds (the PMIx
    server's socket, inherited from slurmstepd, is held by the program and slurmstepd too)."""
    out = run(["ss", "-Hltnp"], check=True).stdout
    mine = [line.split()[3] for line in out.splitlines()
            if f"pid={pid}," in line and len(re.findall(r"pid=\d+", line)) == 1]
    assert len(mine) == 1, f"launcher {pid}'s restart channel is not one listening socket:\n{out}"
    return mine[0]


def held(pid: int, endpoint: str) -> int:
    """How many connections to `endpoint` launcher `pid` holds open."""
    port = endpoint.rsplit(":", 1)[1]
    out = run(["ss", "-Htnp", "state", "established", f"( sport = :{port} )"], check=True).stdout
    return sum(f"pid={pid}," in line for line in out.splitlines())


def job_events(job: str):
    """The job's events as node1's and node2's autopard each tell them (each node's own journal
    at once, the other's once published, within a second), merged in time order."""
    seen = {}
    for node in ("node1", "node2"):
        for e in root_events(job, node):
            seen[(e["time"], e["node"], e["kind"], e["rank"], e["step"], e["detail"])] = e
    return [seen[k] for k in sorted(seen, key=lambda k: k[0])]


class Attacker:
    """programs/channel_flood.py as the user; its output read by a thread."""

    def __init__(self, endpoints):
        self.proc = subprocess.Popen(
            ["runuser", "-u", USER, "--", PYTHON, str(FLOOD), "--idle", str(IDLE), *endpoints],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def tagged(self, tag: str, timeout: float = 30):
        """The JSON after `tag` on the attacker's next line (it must be that line)."""
        seen = []  # anything else it printed (a Python error): shown below
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                line = None
            if line is None or line.split(" ", 1)[0] in ("FORGED", "CLOSED", "HOLDING"):
                break
            seen.append(line)
        assert line is not None and line.startswith(tag + " "), \
            f"the attacker printed {line!r}, not {tag} ({''.join(seen)})"
        return json.loads(line[len(tag) + 1:])

    def stop(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def test_idle_connections_and_forged_lines_neither_steer_nor_delay_a_restart(user_dir):
    need_binaries()
    out = user_dir / "out.txt"
    script = user_dir / "job.sh"
    # --no-prewarm: each generation a fresh interpreter; the channel is what is measured. (A warm
    # interpreter of a job with nothing to resume fails its activation today: launcher/prewarm.cpp
    # closes its socket with the interpreter's "R" unread, and its last recv gets ECONNRESET.)
    script.write_text(f"""#!/bin/bash
#SBATCH -N2 --ntasks-per-node=1 -w node[1-2] -t 3 -o {out} --restarts-in-place=1
export PYTHONPATH={SOURCE_DIR}/python
srun --mpi=pmix {LAUNCH} --no-prewarm -- {PYTHON} {BEAT} 600 10
""")
    script.chmod(0o755)
    job = user_sbatch(str(script), cwd=user_dir)
    attacker = None
    try:
        wait_running(job)
        wait_steps(out, 2)
        launchers = processes(job, "autopar-launch")
        assert sorted(launchers) == [0, 1], launchers
        endpoints = [channel_endpoint(launchers[r]) for r in (0, 1)]

        attacker = Attacker(endpoints)
        forged = attacker.tagged("FORGED")
        assert forged["connected"] == 2 * IDLE and forged["forged"] > 0, forged
        steps_at_forgery = [last_step(out, r) for r in (0, 1)]
        closed = attacker.tagged("CLOSED")
        assert closed == {ep: IDLE for ep in endpoints}, \
            (f"the launchers did not close all of {IDLE} idle connections each once they had "
             f"been silent for 2 s (closed: {closed})")
        holding = attacker.tagged("HOLDING")
        assert holding["connected"] == 2 * IDLE, holding
        for r in (0, 1):
            # Each launcher accepts them as they come, never holding more than 64 (it closes the
            # oldest before it takes one more): any moment's count must be within the bound.
            counts, deadline = [], time.time() + 5
            while time.time() < deadline and (not counts or max(counts) == 0 or len(counts) < 5):
                counts.append(held(launchers[r], endpoints[r]))
                time.sleep(0.1)
            assert 0 < max(counts) <= MAX_CONNECTIONS, \
                f"rank {r}'s launcher held {counts} connections to its channel (at most 64)"

        # Nothing the forged lines said was believed.
        steps = [last_step(out, r) for r in (0, 1)]
        assert all(s >= a + 3 for s, a in zip(steps, steps_at_forgery)), \
            (f"the programs stopped stepping after the forged lines ({steps_at_forgery} -> "
             f"{steps}):\n{out.read_text(errors='replace')[-3000:]}")
        assert {g for _, g, _, _ in beats(out)} == {0}, beats(out)[-6:]
        assert job_state(job) == "RUNNING", job_state(job)
        early = [e for e in job_events(job) if e["kind"] in QUIET]
        assert not early, f"events before the crash (the forged lines were believed): {early}"

        program = processes(job, "python3")
        assert 1 in program, program
        crash = time.time()
        os.kill(program[1], signal.SIGKILL)
        deadline = crash + 30
        first = []
        while time.time() < deadline and not first:
            first = [e for e in root_events(job) if e["kind"] == "first_step"]
            time.sleep(0.2)
        assert first, f"no first_step within 30 s of the crash: {root_events(job)}"
        took = first[0]["time"] - crash
        assert first[0]["fields"]["generation"] == "1", first
        assert took < RESTART_BOUND_S, \
            (f"the restarted generation's first step came {took:.1f} s after the crash "
             f"(bound {RESTART_BOUND_S} s) with {IDLE} idle connections to each channel")
        assert wait_job(job, timeout=60) == "COMPLETED", out.read_text(errors="replace")[-3000:]
        evs = job_events(job)
        failures = [e for e in evs if e["kind"] == "failure"]
        assert len(failures) == 1 and failures[0]["rank"] == 1 and \
            failures[0]["fields"].get("signal") == "9", failures
        assert [e["fields"]["action"] for e in evs if e["kind"] == "recovery"] == \
            ["restart-in-place"], [e for e in evs if e["kind"] == "recovery"]
        assert all(e["time"] >= crash for e in evs if e["kind"] in QUIET), evs
        print(f"first step of generation 1 {took:.2f} s after the crash "
              f"(since_failure_s={first[0]['fields'].get('since_failure_s')})")
    finally:
        if attacker is not None:
            attacker.stop()
        cancel(job)
