#!/usr/bin/env python3
"""The training step's stall per checkpoint, side by side in one run, for state of 100 MB to 4 GB
(one rank, float32 tensors of 64 MiB, a gloo group of one):

- torch.save: the step waits for the whole file (serialized and written);
- dcp.async_save alone: the step waits for DCP to stage the state (a copy in memory); the write
  goes on in the background;
- autopar (autopar.dcp.async_save): the same, then the commit through a private autopard when the
  write is done (in the background too), the upload to a file:// target after it.

Besides the stall, each row gives the time until the checkpoint is safe: the file written
(torch.save), the write done (DCP), the commit acknowledged (autopar). The modes alternate within
each repetition, so the machine's noise falls on all of them.

    bench/ckpt/dcp_stall_bench.py [--sizes 100M,1G,4G] [--reps 3] [--record]

Environment: AUTOPAR_BUILD_DIR (default <repo>/build); the files go under /var/tmp (disk).
"""
import argparse
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
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO / "bench"))
import results  # noqa: E402
from stall_bench import size_bytes  # noqa: E402

BUILD = Path(os.environ.get("AUTOPAR_BUILD_DIR", REPO / "build"))
TENSOR = 64 << 20


def state_of(size: int):
    import torch
    n = max(1, size // TENSOR)
    return {f"w{i}": torch.full((size // n // 4,), float(i), dtype=torch.float32) for i in range(n)}


def start_autopard(work: Path) -> subprocess.Popen:
    sock = work / "autopard.sock"
    conf = work / "autopard.conf"
    conf.write_text(f"socket = {sock}\nstate_dir = {work}/state\nnode = bench\ncommit_sync = normal\n")
    daemon = subprocess.Popen([str(BUILD / "service/autopard/autopard"), "--config", str(conf)],
                              stdout=open(work / "autopard.log", "w"), stderr=subprocess.STDOUT)
    for _ in range(200):
        if sock.exists():
            break
        time.sleep(0.05)
    os.environ.update({"AUTOPAR_SOCKET": str(sock), "SLURM_JOB_ID": "dcp-stall", "RANK": "0", "WORLD_SIZE": "1",
                       "LOCAL_WORLD_SIZE": "1", "AUTOPAR_CKPT_DIR": str(work / "ck"),
                       "AUTOPAR_CKPT_UPLOAD": f"file://{work}/store"})
    return daemon


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100M,1G,4G")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="autopar-dcp-stall.", dir="/var/tmp"))
    os.chmod(work, 0o700)
    daemon = start_autopard(work)
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from autopar import dcp as apdcp
    dist.init_process_group("gloo", store=dist.FileStore(str(work / "pg"), 1), rank=0, world_size=1)
    group = dist.new_group(backend="gloo")
    rows = []
    step = 0
    try:
        for size_text in args.sizes.split(","):
            state = state_of(size_bytes(size_text))
            times = {m: ([], []) for m in ("torch.save", "dcp.async_save", "autopar")}
            for _ in range(args.reps):
                step += 1
                path = work / f"torch-{step}.pt"
                t = time.perf_counter()
                torch.save(state, path)
                stall = time.perf_counter() - t
                times["torch.save"][0].append(stall)
                times["torch.save"][1].append(stall)
                path.unlink()

                d = work / f"dcp-{step}"
                t = time.perf_counter()
                fut = dcp.async_save(state, checkpoint_id=str(d), process_group=group)
                times["dcp.async_save"][0].append(time.perf_counter() - t)
                fut.result()
                times["dcp.async_save"][1].append(time.perf_counter() - t)
                shutil.rmtree(d)

                t = time.perf_counter()
                pending = apdcp.async_save(state, step)
                times["autopar"][0].append(time.perf_counter() - t)
                pending.result()
                times["autopar"][1].append(time.perf_counter() - t)
            for mode, (stalls, safe) in times.items():
                rows.append((size_text, mode, statistics.median(stalls), max(stalls), statistics.median(safe)))
                print(f"dcp_stall_bench: {size_text:>5} {mode:<15} stall median {rows[-1][2]*1000:9.1f} ms "
                      f"(max {rows[-1][3]*1000:9.1f}), safe after {rows[-1][4]*1000:9.1f} ms", flush=True)
            del state
    finally:
        apdcp.wait()
        dist.destroy_process_group()
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=300)
        shutil.rmtree(work, ignore_errors=True)
    if args.record:
        base = {r[0]: r[2] for r in rows if r[1] == "torch.save"}
        results.record(
            "The training step's stall per checkpoint: autopar against DCP and torch.save",
            "bench/ckpt/dcp_stall_bench.py",
            f"One rank, float32 state in 64 MiB tensors, files on /var/tmp (disk), {args.reps} repetitions, "
            "the modes alternating; median stall (the step waits), the largest, and the time until the "
            "checkpoint is safe (written; for autopar: committed). torch 2.15.0, gloo.",
            ["state", "mode", "stall (median)", "stall (max)", "safe after", "stall vs torch.save"],
            [[size_text, mode, f"{med*1000:.1f} ms", f"{worst*1000:.1f} ms", f"{safe*1000:.1f} ms",
              f"{med / base[size_text]:.3f}"] for size_text, mode, med, worst, safe in rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())
