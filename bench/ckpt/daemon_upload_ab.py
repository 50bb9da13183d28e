#!/usr/bin/env python3
"""autopard's upload path, two builds side by side: seconds from a rank's commit (`autopar ckpt
commit`) to its upload's end (`autopar ckpt status`: uploaded), with autopard of build A and of
build B taking turns, ROUNDS times, each on a fresh state directory, for:

  big     FILES files of BIG_MIB MiB (multipart where autopard's threshold says so)
  small   SMALL files of 64 KiB (per-request cost)

to s3rver on loopback (s3://) and to a directory on /dev/shm (file://). Prints each one's median
seconds and the median of the pairwise ratios B/A (below 1: B is faster).

    bench/ckpt/daemon_upload_ab.py A_BUILD_DIR B_BUILD_DIR [ROUNDS (5)]

Environment: FILES (4), BIG_MIB (128), SMALL (200), AUTOPAR_BENCH_S3_PORT (18962). Needs s3rver
(tests/s3/start-s3rver.sh's) and root or any user (the files are the caller's own).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autopard_proc import start_autopard

REPO = Path(__file__).resolve().parents[2]
PORT = int(os.environ.get("AUTOPAR_BENCH_S3_PORT", "18962"))
FILES, BIG_MIB, SMALL = (int(os.environ.get(k, d)) for k, d in (("FILES", 4), ("BIG_MIB", 128), ("SMALL", 200)))


def s3rver(action, state):
    script = REPO / "tests" / "s3" / f"{action}-s3rver.sh"
    env = dict(os.environ, AUTOPAR_S3_PORT=str(PORT))
    args = [str(script), str(state)] + (["--purge"] if action == "stop" else [])
    return subprocess.run(["bash", *args], env=env, capture_output=True, text=True, check=True).stdout


def one(build: Path, root: Path, uri: str, files: dict, job: str) -> float:
    """Commits `files` (name -> bytes) as step 1 of `job` to a fresh autopard of `build` and returns
    the seconds until its upload has ended."""
    root.mkdir(parents=True)
    sock, conf = root / "d.sock", root / "autopard.conf"
    conf.write_text(f"socket = {sock}\nstate_dir = {root}/state\nnode = bench\n"
                    f"s3_endpoint = http://127.0.0.1:{PORT}\ns3_access_key = S3RVER\n"
                    "s3_secret_key = S3RVER\n")
    conf.chmod(0o600)
    log = open(root / "autopard.log", "w")
    d = start_autopard(build / "service" / "autopard" / "autopard", conf, sock, log)
    try:
        ck = root / "ck"
        rank = ck / "step-1" / "rank-0"
        rank.mkdir(parents=True)
        for name, data in files.items():
            (rank / name).write_bytes(data)
        cli = str(build / "cli" / "autopar")
        env = dict(os.environ, SLURM_JOB_ID=job, AUTOPAR_CKPT_DIR=str(ck), RANK="0", WORLD_SIZE="1",
                   AUTOPAR_CKPT_UPLOAD=uri, AUTOPAR_SOCKET=str(sock))
        t = time.perf_counter()
        subprocess.run([cli, "ckpt", "commit", "--step", "1", "--socket", str(sock)], env=env,
                       check=True, capture_output=True)
        while True:
            st = json.loads(subprocess.run([cli, "ckpt", "status", "--json", "--socket", str(sock)],
                                           capture_output=True, text=True, check=True).stdout)
            if st and all(u["state"] not in ("queued", "uploading", "hashing") for u in st):
                took = time.perf_counter() - t
                assert all(u["state"] == "uploaded" for u in st), st
                return took
            time.sleep(0.02)
    finally:
        d.terminate()
        d.wait()
        log.close()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    a, b = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    shapes = {
        "big": {f"big{i}.bin": os.urandom(BIG_MIB << 20) for i in range(FILES)},
        "small": {f"f{i}.bin": os.urandom(64 << 10) for i in range(SMALL)},
    }
    work = Path(tempfile.mkdtemp(prefix="autopar-daemon-ab."))
    shm = Path(tempfile.mkdtemp(prefix="autopar-daemon-ab.", dir="/dev/shm"))
    s3rver("stop", work / "s3")
    s3rver("start", work / "s3")
    times = {}
    try:
        n = 0
        for r in range(rounds):
            for shape, files in shapes.items():
                for target in ("s3", "file"):
                    for name, build in (("A", a), ("B", b)):
                        n += 1
                        uri = f"s3://autopar-test/ab{n}" if target == "s3" else f"file://{shm}/store{n}"
                        took = one(build, work / f"run{n}", uri, files, str(1000 + n))
                        times.setdefault((shape, target), {"A": [], "B": []})[name].append(took)
                        shutil.rmtree(work / f"run{n}", ignore_errors=True)
                        shutil.rmtree(shm / f"store{n}", ignore_errors=True)
    finally:
        s3rver("stop", work / "s3")
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)
    print(f"A = {a}\nB = {b}\n{rounds} rounds; FILES={FILES} BIG_MIB={BIG_MIB} SMALL={SMALL}")
    print(f"{'shape':<6} {'target':<6} {'A median s':>10} {'B median s':>10} {'B/A':>6}")
    for (shape, target), t in times.items():
        ratio = statistics.median(y / x for x, y in zip(t["A"], t["B"]))
        print(f"{shape:<6} {target:<6} {statistics.median(t['A']):10.3f} {statistics.median(t['B']):10.3f} {ratio:6.3f}")


if __name__ == "__main__":
    main()
