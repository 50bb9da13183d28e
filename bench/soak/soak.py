#!/usr/bin/env python3
"""Soak: one private autopard serves commits and heartbeats of many jobs for a long
time while its S3 storage fails on and off; at the end nothing is lost (every commit autopard
acknowledged is uploaded or failed with a named error, none still queued once storage is back)
and its memory is flat.

Load: --jobs jobs x 2 ranks (one process per rank, as root: autopard serves root without Slurm),
each rank heartbeating every 100 ms (the background heartbeat of the Python module) and
committing a checkpoint of 4 files x 64 KiB every --every seconds, keeping the last 3 (retention
in storage and on disk). Storage: a private s3rver (tests/s3/start-s3rver.sh), frozen (SIGSTOP)
for 20 s every 2 minutes and, every other time, killed and restarted 20 s later instead.
Every minute: autopard's RSS, threads and descriptors.

    bench/soak/soak.py [--minutes 60] [--jobs 8] [--every 5] [--record] [--port 18970]
                       [--wrap "heaptrack -o /tmp/soak.heaptrack"]

--wrap runs autopard under a tool (a heap profiler); --port is the s3rver's (two soaks at once).

Environment: AUTOPAR_BUILD_DIR (default <repo>/build). Needs s3rver (scripts/install-deps.sh).
"""
import argparse
import datetime
import multiprocessing
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
BUILD = Path(os.environ.get("AUTOPAR_BUILD_DIR", REPO / "build"))
PORT = 18970  # not test_ckpt_faults.py's 18950 nor upload_bench.sh's 18960: a soak may run beside them


def rank_loop(sock, ck, upload, job, rank, every, stop, acked):
    os.environ.update({"AUTOPAR_SOCKET": sock, "SLURM_JOB_ID": job, "AUTOPAR_CKPT_DIR": ck,
                       "AUTOPAR_CKPT_UPLOAD": upload, "AUTOPAR_CKPT_KEEP": "3",
                       "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
                       "LOCAL_WORLD_SIZE": "2"})
    from autopar import ckpt
    step = 0
    next_commit = time.monotonic() + every
    while not stop.is_set():
        ckpt.heartbeat(step)
        if time.monotonic() >= next_commit:
            d = Path(ckpt.step_dir(step))
            for f in range(4):
                (d / f"shard-{f}.bin").write_bytes(os.urandom(64 << 10))
            try:
                ckpt.commit(step)
                with acked.get_lock():
                    acked.value += 1
            except Exception as e:  # noqa: BLE001 - a refused commit is counted as not acked
                print(f"soak: {job} rank {rank} step {step}: commit refused: {e}", flush=True)
            next_commit += every
            step += 1
        time.sleep(0.1)


def sample(pid):
    status = {line.split(":")[0]: line.split(":")[1].strip() for line in open(f"/proc/{pid}/status")}
    return int(status["VmRSS"].split()[0]) // 1024, int(status["Threads"]), len(os.listdir(f"/proc/{pid}/fd"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--every", type=float, default=5)
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--port", type=int, default=PORT)
    ap.add_argument("--wrap", default="", help="a command autopard runs under (e.g. heaptrack)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="autopar-soak.", dir="/var/tmp"))
    s3 = work / "s3"
    env = dict(os.environ, AUTOPAR_S3_PORT=str(args.port), AUTOPAR_S3_BUCKET="soak")
    start_s3 = ["bash", str(REPO / "tests/s3/start-s3rver.sh"), str(s3)]
    subprocess.run(start_s3, env=env, check=True, capture_output=True)
    sock = work / "autopard.sock"
    conf = work / "autopard.conf"
    conf.write_text(f"socket = {sock}\nstate_dir = {work}/state\nnode = soak\n"
                    f"s3_endpoint = http://127.0.0.1:{args.port}\ns3_access_key = S3RVER\ns3_secret_key = S3RVER\n"
                    "s3_stall_timeout_s = 5\nretry_max_elapsed_s = 15\n"
                    "upload_retry_initial_s = 5\nupload_retry_max_s = 30\n")
    conf.chmod(0o600)
    log = open(work / "autopard.log", "w")
    daemon = subprocess.Popen(args.wrap.split() + [str(BUILD / "service/autopard/autopard"), "--config", str(conf)],
                              stdout=log, stderr=subprocess.STDOUT)
    # Under a wrapper, the process to sample is autopard itself, the wrapper's child.
    autopard_pid = daemon.pid
    for _ in range(200 if args.wrap else 0):
        kids = subprocess.run(["pgrep", "-f", f"autopard --config {conf}"], capture_output=True, text=True).stdout.split()
        kids = [int(k) for k in kids if int(k) != daemon.pid and Path(f"/proc/{k}/exe").resolve().name == "autopard"]
        if kids:
            autopard_pid = kids[0]
            break
        time.sleep(0.1)
    for _ in range(200):
        if sock.exists():
            break
        time.sleep(0.05)
    stop = multiprocessing.Event()
    acked = multiprocessing.Value("q", 0)
    ranks = []
    for j in range(args.jobs):
        for r in range(2):
            p = multiprocessing.Process(target=rank_loop, args=(str(sock), str(work / "ck" / f"soak{j}"),
                                                                 "s3://soak/ckpt", f"soak{j}", r, args.every,
                                                                 stop, acked))
            p.start()
            ranks.append(p)
    samples, outages = [], 0
    t0 = time.monotonic()
    end = t0 + args.minutes * 60
    next_sample, next_outage = t0, t0 + 120
    try:
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_sample:
                rss, threads, fds = sample(autopard_pid)
                samples.append(((now - t0) / 60, rss, threads, fds, acked.value))
                print(f"soak: {samples[-1][0]:5.1f} min: autopard RSS {rss} MiB, {threads} threads, "
                      f"{fds} descriptors; {acked.value} commits acknowledged, {outages} outages", flush=True)
                next_sample += 60
            if now >= next_outage:
                pid = int((s3 / "s3rver.pid").read_text())
                outages += 1
                if outages % 2:
                    os.kill(pid, signal.SIGSTOP)
                    time.sleep(20)
                    os.kill(pid, signal.SIGCONT)
                else:
                    subprocess.run(["bash", str(REPO / "tests/s3/stop-s3rver.sh"), str(s3)], env=env,
                                   capture_output=True)
                    time.sleep(20)
                    subprocess.run(start_s3, env=env, check=True, capture_output=True)
                next_outage += 120
            assert daemon.poll() is None, "autopard died"
            time.sleep(1)
        stop.set()
        for p in ranks:
            p.join(60)
        # Storage is up: every failed upload is retried within upload_retry_max_s; give it time.
        deadline = time.monotonic() + 300
        db = work / "state" / "autopard.db"
        while time.monotonic() < deadline:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
                pending = c.execute("SELECT COUNT(*) FROM commits WHERE state IN "
                                    "('queued','uploading') OR (state='failed' AND retry=1)").fetchone()[0]
            if pending == 0:
                break
            time.sleep(5)
        rss, threads, fds = sample(autopard_pid)
        samples.append(((time.monotonic() - t0) / 60, rss, threads, fds, acked.value))
    finally:
        stop.set()
        daemon.send_signal(signal.SIGTERM)
        if autopard_pid != daemon.pid:
            os.kill(autopard_pid, signal.SIGTERM)
        daemon.wait(timeout=120)
        subprocess.run(["bash", str(REPO / "tests/s3/stop-s3rver.sh"), str(s3), "--purge"], env=env,
                       capture_output=True)
    with sqlite3.connect(f"file:{work}/state/autopard.db?mode=ro", uri=True) as c:
        states = dict(c.execute("SELECT state, COUNT(*) FROM commits GROUP BY state").fetchall())
        unnamed = c.execute("SELECT COUNT(*) FROM commits WHERE state='failed' AND error=''").fetchone()[0]
        complete = c.execute("SELECT COUNT(*) FROM steps WHERE state='COMPLETE'").fetchone()[0]
        retries = c.execute("SELECT COUNT(*) FROM journal WHERE kind='ckpt_upload_retry'").fetchone()[0]
    total = sum(states.values())
    lost = acked.value - total
    print(f"soak: {acked.value} commits acknowledged, {total} recorded: {states}; {complete} steps "
          f"COMPLETE; {retries} upload retries; {unnamed} failed without a reason; {outages} storage outages")
    first = [s for s in samples if 4 <= s[0] < 15] or samples[:1]
    last = samples[-5:]
    rss_first = sum(s[1] for s in first) / len(first)
    rss_last = sum(s[1] for s in last) / len(last)
    print(f"soak: autopard RSS {rss_first:.0f} MiB (minutes 4-15) -> {rss_last:.0f} MiB (last 5 samples), "
          f"max {max(s[1] for s in samples)} MiB; threads max {max(s[2] for s in samples)}, "
          f"descriptors max {max(s[3] for s in samples)}")
    ok = lost == 0 and unnamed == 0 and states.get("queued", 0) == 0 and states.get("uploading", 0) == 0
    if args.record:
        day = datetime.date.today().isoformat()
        text = [f"\n## Soak: commits and heartbeats under intermittent storage failures (`bench/soak/soak.py`) — {day}\n",
                f"What: one autopard, {args.jobs} jobs x 2 ranks (heartbeat every 100 ms, a 256 KiB "
                f"checkpoint every {args.every:g} s, keep 3) for {args.minutes:g} minutes to a local "
                "s3rver that is frozen for 20 s every 2 minutes or, every other time, killed and "
                "restarted 20 s later. Then storage stays up until nothing is pending.\n",
                f"- commits acknowledged {acked.value}, recorded {total} ({states}); lost: {lost}; "
                f"failed without a reason: {unnamed}; steps COMPLETE: {complete}; upload retries: "
                f"{retries}; storage outages: {outages}",
                f"- autopard RSS {rss_first:.0f} MiB (minutes 4-15) -> {rss_last:.0f} MiB at the end "
                f"(max {max(s[1] for s in samples)} MiB); threads max {max(s[2] for s in samples)}; "
                f"descriptors max {max(s[3] for s in samples)}",
                "- per minute (minute: RSS MiB, threads, descriptors, commits acknowledged): " +
                ", ".join(f"{s[0]:.0f}: {s[1]}/{s[2]}/{s[3]}/{s[4]}" for s in samples),
                f"- verdict: {'nothing lost, memory flat' if ok and rss_last <= rss_first * 1.15 + 5 else 'SEE ABOVE'}"]
        with open(REPO / "bench/RESULTS.md", "a") as f:
            f.write("\n".join(text) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
