#!/usr/bin/env python3
"""A flooding neighbour: user A's checkpoint commit latency, p50/p99 over N commits,
while user B (uid 65534, `nobody`) attacks the same autopard, side by side with no flood in the
same run. B's attacks, each for the whole of A's measurement:

  connections  opens as many connections as it can (up to --conns), holds them, and reconnects
               the ones autopard closes, in a loop
  slow         keeps max_connections_per_uid connections each sending one byte a second
  huge         sends 4 MiB lines (no newline) over 4 connections, again and again
  garbage      sends garbage lines as fast as it can over 4 connections

A commits local-only checkpoints (4 sparse files) as root, which autopard may serve without
Slurm. The autopard under test is private (its own socket and state, default limits) and the
figures also give its largest thread count and open descriptors during each attack.

    bench/hostile/flood_bench.py [--commits 300] [--conns 4000] [--attacks connections,slow,huge,garbage]
                                 [--record]

Environment: AUTOPAR_BUILD_DIR (default <repo>/build).
"""
import argparse
import datetime
import multiprocessing
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
from autopar import ckpt  # noqa: E402

BUILD = Path(os.environ.get("AUTOPAR_BUILD_DIR", REPO / "build"))
NOBODY = 65534


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def attack(kind, path, conns, stop):
    """Runs in a child process as `nobody` until `stop` is set, on the last CPU only: B is a job
    on the same node, and Slurm confines a job to its own cores (task/cgroup)."""
    os.sched_setaffinity(0, {os.cpu_count() - 1})
    resource.setrlimit(resource.RLIMIT_NOFILE, (conns + 64, conns + 64))
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    if kind == "connections":
        held = []
        while not stop.is_set():
            try:
                held.append(connect(path))
            except OSError:
                time.sleep(0.001)
            if len(held) >= conns:  # replace the ones autopard closed (refused over the limit)
                alive = []
                for s in held:
                    try:
                        s.setblocking(False)
                        if s.recv(1, socket.MSG_PEEK) == b"":
                            s.close()
                            continue
                    except BlockingIOError:
                        pass
                    except OSError:
                        s.close()
                        continue
                    alive.append(s)
                held = alive
                if len(held) >= conns:
                    time.sleep(0.01)
    elif kind == "slow":
        held = []
        while not stop.is_set():
            while len(held) < 128:
                try:
                    held.append(connect(path))
                except OSError:
                    break
            for s in list(held):
                try:
                    s.send(b"{")
                except OSError:
                    held.remove(s)
                    s.close()
            stop.wait(1.0)
    else:
        line = b"x" * (4 << 20) if kind == "huge" else b"this is not a request\n" * 64

        def loop():
            while not stop.is_set():
                try:
                    s = connect(path)
                    while not stop.is_set():
                        s.sendall(line)
                        if kind == "garbage":
                            s.recv(65536)
                except OSError:
                    time.sleep(0.001)
        threads = [threading.Thread(target=loop, daemon=True) for _ in range(4)]
        for t in threads:
            t.start()
        stop.wait()


def watch(pid, stop, peak):
    while not stop.is_set():
        try:
            threads = int(next(line.split()[1] for line in open(f"/proc/{pid}/status") if line.startswith("Threads:")))
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            peak["threads"] = max(peak["threads"], threads)
            peak["fds"] = max(peak["fds"], fds)
        except (OSError, StopIteration, ValueError):
            pass
        time.sleep(0.05)


def commits(work, sock, job, n):
    ck = work / "ck" / job
    for step in range(n):
        d = ck / f"step-{step}" / "rank-0"
        d.mkdir(parents=True)
        for f in range(4):
            with open(d / f"shard-{f}.bin", "wb") as fh:
                fh.truncate(1 << 20)
    os.environ.update({"AUTOPAR_SOCKET": str(sock), "SLURM_JOB_ID": job, "AUTOPAR_CKPT_DIR": str(ck),
                       "RANK": "0", "WORLD_SIZE": "1"})
    os.environ.pop("AUTOPAR_CKPT_UPLOAD", None)
    ms = []
    for step in range(n):
        t = time.perf_counter()
        ckpt.commit(step)
        ms.append((time.perf_counter() - t) * 1000)
    return ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=300)
    ap.add_argument("--conns", type=int, default=4000)
    ap.add_argument("--attacks", default="connections,slow,huge,garbage")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    # A (this process) is another job: its own core. autopard, the daemon, may run anywhere.
    os.sched_setaffinity(0, {0})
    work = Path(tempfile.mkdtemp(prefix="autopar-flood.", dir="/var/tmp"))
    os.chmod(work, 0o755)  # nobody reaches the socket
    sock = work / "autopard.sock"
    conf = work / "autopard.conf"
    conf.write_text(f"socket = {sock}\nstate_dir = {work}/state\nnode = bench\n")
    log = open(work / "autopard.log", "w")
    every_cpu = set(range(os.cpu_count()))
    daemon = subprocess.Popen([str(BUILD / "service/autopard/autopard"), "--config", str(conf)],
                              stdout=log, stderr=subprocess.STDOUT,
                              preexec_fn=lambda: os.sched_setaffinity(0, every_cpu))
    rows = []
    try:
        for _ in range(200):
            if sock.exists():
                break
            time.sleep(0.05)
        plan = []
        for a in args.attacks.split(","):
            plan += ["none", a]
        for i, kind in enumerate(plan):
            stop = multiprocessing.Event()
            peak = {"threads": 0, "fds": 0}
            watcher_stop = threading.Event()
            watcher = threading.Thread(target=watch, args=(daemon.pid, watcher_stop, peak), daemon=True)
            watcher.start()
            child = None
            if kind != "none":
                child = multiprocessing.Process(target=attack, args=(kind, str(sock), args.conns, stop))
                child.start()
                time.sleep(2)  # the attack is under way
            ms = commits(work, sock, f"flood-{i}-{kind}", args.commits)
            stop.set()
            if child:
                child.join(10)
                if child.is_alive():
                    child.kill()
            watcher_stop.set()
            watcher.join()
            rows.append((kind, len(ms), statistics.median(ms), pct(ms, 99), max(ms), peak["threads"], peak["fds"]))
            print(f"flood_bench: attack {kind:>11}: {len(ms)} commits p50 {rows[-1][2]:.2f} ms, p99 "
                  f"{rows[-1][3]:.2f} ms, max {rows[-1][4]:.2f} ms; autopard peak {peak['threads']} threads, "
                  f"{peak['fds']} descriptors", flush=True)
            assert daemon.poll() is None, "autopard died"
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    if args.record:
        day = datetime.date.today().isoformat()
        base = [r for r in rows if r[0] == "none"]
        text = [f"\n## A flooding neighbour (`bench/hostile/flood_bench.py`) — {day}\n",
                f"What: user A's (root) `autopar.ckpt.commit` latency over {args.commits} local-only "
                "commits while user B (nobody) attacks the same private autopard with its default "
                "limits (max_connections 1024, max_connections_per_uid 128, request_timeout_s 10), "
                "each attack measured right after a run without one (`none`). A and B are pinned to "
                "one core each, as Slurm confines two jobs of a node to their own cores; autopard "
                "runs on any. Peak threads and "
                "descriptors of autopard during each run. Target: A's p99 under attack "
                "within its usual p99.\n",
                "| attack by B | commits | p50 | p99 | max | p99 / p99 without | autopard threads | descriptors |",
                "|---|---|---|---|---|---|---|---|"]
        for i, r in enumerate(rows):
            ratio = "" if r[0] == "none" else f"{r[3] / rows[i - 1][3]:.2f}"
            text.append(f"| {r[0]} | {r[1]} | {r[2]:.2f} ms | {r[3]:.2f} ms | {r[4]:.2f} ms | {ratio} | {r[5]} | {r[6]} |")
        del base
        with open(REPO / "bench/RESULTS.md", "a") as f:
            f.write("\n".join(text) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
