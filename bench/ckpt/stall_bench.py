#!/usr/bin/env python3
"""Commit stall: how long `autopar.ckpt.commit(step)` blocks the training
program, p50/p99 over N commits, for checkpoints of 100 MB and 4 GB per rank (sparse files: the
commit never reads the data, so the stall must not depend on the size). A private autopard is
started with its state on this machine's disk, once per `commit_sync` mode (normal: the commit is
in SQLite's WAL file before the ack; full: also fdatasync'ed); the uploads go to a file:// target
on tmpfs and run in the background while the commits are timed.

The floor of a commit_sync=full commit is one fdatasync of the state directory's disk; it is
measured too.

    bench/ckpt/stall_bench.py [--commits 1000] [--sizes 100M,4G] [--files 4] [--modes normal,full]
                              [--record]

Environment: AUTOPAR_BUILD_DIR (default <repo>/build), AUTOPAR_BENCH_DIR (default a new directory
under /var/tmp).
"""
import argparse
import datetime
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
from autopar import ckpt  # noqa: E402
from autopard_proc import start_autopard  # noqa: E402  (bench/ckpt, beside this file)

BUILD = Path(os.environ.get("AUTOPAR_BUILD_DIR", REPO / "build"))


def size_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def fdatasync_floor(directory, n=200):
    path = os.path.join(directory, "fsync-probe")
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    ts = []
    for _ in range(n):
        os.write(fd, b"x" * 512)
        t = time.perf_counter()
        os.fdatasync(fd)
        ts.append((time.perf_counter() - t) * 1000)
    os.close(fd)
    os.unlink(path)
    return pct(ts, 50), pct(ts, 99)


def run_mode(work, mode, args, rows):
    """Starts a private autopard with `commit_sync = mode`, times the commits of every size."""
    target = Path(tempfile.mkdtemp(prefix="autopar-stall-target.", dir="/dev/shm"))
    conf = work / f"autopard-{mode}.conf"
    sock = work / f"autopard-{mode}.sock"
    conf.write_text(f"socket = {sock}\nstate_dir = {work}/state-{mode}\nnode = bench\n"
                    f"commit_sync = {mode}\nmax_active_uploads = 1\nconcurrency = 2\n")
    log = open(work / f"autopard-{mode}.log", "w")
    daemon = start_autopard(BUILD / "service/autopard/autopard", conf, sock, log)
    try:
        for size_text in args.sizes.split(","):
            size = size_bytes(size_text)
            job = f"stall-{mode}-{size_text}"
            ck = work / "ck" / job
            for step in range(args.commits):
                d = ck / f"step-{step}" / "rank-0"
                d.mkdir(parents=True)
                for f in range(args.files):
                    with open(d / f"shard-{f}.bin", "wb") as fh:
                        fh.truncate(size // args.files)
            os.environ.update({"AUTOPAR_SOCKET": str(sock), "SLURM_JOB_ID": job,
                               "AUTOPAR_CKPT_DIR": str(ck), "AUTOPAR_CKPT_UPLOAD": f"file://{target}",
                               "RANK": "0", "WORLD_SIZE": "1"})
            ms = []
            for step in range(args.commits):
                t = time.perf_counter()
                ckpt.commit(step)
                ms.append((time.perf_counter() - t) * 1000)
            rows.append((mode, size_text, len(ms), statistics.median(ms), pct(ms, 99), max(ms)))
            print(f"stall_bench: commit_sync={mode} {size_text:>5} per rank, {len(ms)} commits: "
                  f"p50 {rows[-1][3]:.2f} ms, p99 {rows[-1][4]:.2f} ms, max {rows[-1][5]:.2f} ms", flush=True)
            # The same round trip doing no work (the status of a job without uploads, this job's
            # uploads still running): what the machine's scheduling alone costs.
            os.environ["SLURM_JOB_ID"] = "stall-no-uploads"
            ms = []
            for _ in range(args.commits):
                t = time.perf_counter()
                ckpt.uploads()
                ms.append((time.perf_counter() - t) * 1000)
            rows.append((mode, f"{size_text}: status request (no work)", len(ms), statistics.median(ms),
                         pct(ms, 99), max(ms)))
            print(f"stall_bench: status request, same conditions: p50 {rows[-1][3]:.2f} ms, "
                  f"p99 {rows[-1][4]:.2f} ms, max {rows[-1][5]:.2f} ms", flush=True)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=120)
        shutil.rmtree(target, ignore_errors=True)
        shutil.rmtree(work / "ck", ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--sizes", default="100M,4G")
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--modes", default="normal,full", help="commit_sync modes to measure")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()

    work = Path(os.environ.get("AUTOPAR_BENCH_DIR") or tempfile.mkdtemp(prefix="autopar-stall.", dir="/var/tmp"))
    rows = []
    load = []
    floor = fdatasync_floor(str(work))
    try:
        for mode in args.modes.split(","):
            run_mode(work, mode, args, rows)
            load.append(os.getloadavg()[0])
    finally:
        if not os.environ.get("AUTOPAR_BENCH_DIR"):
            shutil.rmtree(work, ignore_errors=True)
    print(f"stall_bench: fdatasync on the state directory's disk: p50 {floor[0]:.2f} ms, p99 {floor[1]:.2f} ms")
    if args.record:
        day = datetime.date.today().isoformat()
        text = [f"\n## Checkpoint commit stall (`bench/ckpt/stall_bench.py`) — {day}\n",
                "What: time for `autopar.ckpt.commit(step)` (Python module -> autopard socket -> "
                "SQLite WAL commit -> ack) to return, one rank, "
                f"{args.files} sparse files per commit, uploads to a tmpfs file:// target running "
                "in the background; autopard's `commit_sync` = normal (in the WAL file) or full "
                "(and fdatasync'ed). Target: p99 < 5 ms, flat in checkpoint size. "
                f"Load average (1 min) after each mode: {', '.join(f'{x:.2f}' for x in load)}.\n",
                "| commit_sync | size per rank | commits | p50 | p99 | max |", "|---|---|---|---|---|---|"]
        for r in rows:
            text.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.2f} ms | {r[4]:.2f} ms | {r[5]:.2f} ms |")
        text.append(f"\nFloor on this machine: one `fdatasync` of the state directory's disk takes "
                    f"p50 {floor[0]:.2f} ms, p99 {floor[1]:.2f} ms (measured in the same run); a "
                    "commit_sync=full commit cannot return faster than that.\n")
        with open(REPO / "bench/RESULTS.md", "a") as f:
            f.write("\n".join(text) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
