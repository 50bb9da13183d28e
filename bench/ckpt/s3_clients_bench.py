#!/usr/bin/env python3
"""Checkpoint upload to the local S3 server, side by side in one run: autopar's transfer engine
against boto3's transfer manager and s3torchconnector (AWS's S3 client for PyTorch), at the same
verification, ROUNDS rounds with the order rotating.

Every method uploads the same FILES files (TOTAL MiB, from the page cache) to s3rver on loopback,
and then every object must be there with the file's size and an ETag that matches the file's
bytes. autopar's engine does that check itself while it sends (the MD5 of each body against the
ETag the server returns, then a HEAD of each object: its default), so its time includes it. boto3
and s3torchconnector do not (boto3 sends a CRC32 that s3rver ignores; s3torchconnector a CRC32C);
for them the bench does the same check after the upload (a HEAD per object and the MD5 of the file,
per part where the ETag has the multipart form), and counts it in their time.

    bench/ckpt/s3_clients_bench.py [--mib 2048] [--files 8] [--rounds 3] [--record]

Environment: AUTOPAR_BUILD_DIR (default <repo>/build: autopar-storage-tool),
AUTOPAR_BENCH_S3_PORT (default 18961).
"""
import argparse
import concurrent.futures
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("AUTOPAR_BUILD_DIR", REPO / "build"))
sys.path.insert(0, str(REPO / "bench"))
import results  # noqa: E402

BUCKET = "autopar-bench"
KEY, SECRET = "S3RVER", "S3RVER"  # s3rver's fixed credentials
PART = 16 << 20  # part size and concurrency the same for every method
CONCURRENCY = 8


def file_etag(path: Path, part_size: int, etag: str) -> str:
    """The ETag S3 gives `path`: its MD5, or for a multipart upload (an ETag "<md5>-<parts>") the
    MD5 of its parts' MD5s, with `part_size` parts."""
    if "-" not in etag:
        h = hashlib.md5()
        with open(path, "rb") as f:
            while chunk := f.read(8 << 20):
                h.update(chunk)
        return h.hexdigest()
    digests = b""
    with open(path, "rb") as f:
        while chunk := f.read(part_size):
            digests += hashlib.md5(chunk).digest()
    return f"{hashlib.md5(digests).hexdigest()}-{len(digests) // 16}"


def check(client, files: list, prefix: str, part_size: int) -> None:
    """Each file's object under `prefix` has its size and an ETag matching its bytes."""
    def one(path: Path) -> None:
        head = client.head_object(Bucket=BUCKET, Key=f"{prefix}/{path.name}")
        etag = head["ETag"].strip('"')
        if head["ContentLength"] != path.stat().st_size or etag != file_etag(path, part_size, etag):
            raise SystemExit(f"s3_clients_bench: {prefix}/{path.name}: size or ETag differs from the file")
    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(one, files))


def autopar(ctx, files: list, prefix: str, *extra: str) -> None:
    subprocess.run([str(BUILD / "service/storage/autopar-storage-tool"), "--credentials", ctx["creds"],
                    "--endpoint", ctx["endpoint"], "--part-size-mib", str(PART >> 20),
                    "--concurrency", str(CONCURRENCY), *extra, f"s3://{BUCKET}", "upload", ctx["src"], prefix],
                   check=True, stdout=subprocess.DEVNULL)


def autopar_parts(ctx, files: list, prefix: str) -> None:
    autopar(ctx, files, prefix, "--multipart-threshold-mib", str(PART >> 20))


def boto3_transfer(ctx, files: list, prefix: str) -> None:
    from boto3.s3.transfer import TransferConfig
    from s3transfer.manager import TransferManager
    config = TransferConfig(multipart_threshold=PART, multipart_chunksize=PART, max_concurrency=CONCURRENCY)
    with TransferManager(ctx["client"], config) as manager:
        futures = [manager.upload(str(p), BUCKET, f"{prefix}/{p.name}") for p in files]
        for f in futures:
            f.result()


def s3torchconnector(ctx, files: list, prefix: str) -> None:
    from s3torchconnector import S3Checkpoint, S3ClientConfig
    ck = ctx.setdefault("s3torch", S3Checkpoint(
        region="us-east-1", endpoint=ctx["endpoint"],
        s3client_config=S3ClientConfig(force_path_style=True, part_size=PART)))

    def one(path: Path) -> None:
        with ck.writer(f"s3://{BUCKET}/{prefix}/{path.name}") as w, open(path, "rb") as f:
            shutil.copyfileobj(f, w, PART)
    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(one, files))


# name: (upload, whether the bench must check afterwards)
METHODS = {
    "autopar (autopar-storage-tool upload: the transfer engine, checking as it sends; its default "
    "multipart threshold: here one streamed PUT per file)": (autopar, False),
    "autopar, in parts as the others (`--multipart-threshold-mib 16`)": (autopar_parts, False),
    "boto3 transfer manager (s3transfer)": (boto3_transfer, True),
    "s3torchconnector (S3Checkpoint.writer per file, 8 threads)": (s3torchconnector, True),
}


def clear(client, prefix: str) -> None:
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/").get("Contents", [])
    for obj in listed:
        client.delete_object(Bucket=BUCKET, Key=obj["Key"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=2048)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    import boto3
    from botocore.config import Config
    os.environ.update(AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET, AWS_CONFIG_FILE="/dev/null",
                      AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    port = os.environ.get("AUTOPAR_BENCH_S3_PORT", "18961")
    work = Path(tempfile.mkdtemp(prefix="autopar-s3-clients."))
    s3rver = REPO / "tests/s3"
    env = dict(os.environ, AUTOPAR_S3_PORT=port, AUTOPAR_S3_BUCKET=BUCKET)
    subprocess.run(["bash", str(s3rver / "start-s3rver.sh"), str(work / "s3")], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    try:
        (work / "creds").write_text(f"{KEY}\n{SECRET}\n")
        os.chmod(work / "creds", 0o600)
        src = work / "src"
        src.mkdir()
        files = []
        for i in range(args.files):
            files.append(src / f"rank-{i}.pt")
            files[-1].write_bytes(os.urandom((args.mib << 20) // args.files))
        endpoint = f"http://127.0.0.1:{port}"
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              config=Config(s3={"addressing_style": "path"},
                                            max_pool_connections=2 * CONCURRENCY))
        ctx = {"client": client, "endpoint": endpoint, "creds": str(work / "creds"), "src": str(src)}
        times = {name: [] for name in METHODS}  # (upload, check) seconds per round
        names = list(METHODS)
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                prefix = f"m{names.index(name)}-r{r}"
                upload, needs_check = METHODS[name]
                t = time.perf_counter()
                upload(ctx, files, prefix)
                t_check = time.perf_counter()
                if needs_check:
                    check(client, files, prefix, PART)
                times[name].append((t_check - t, time.perf_counter() - t_check))
                clear(client, prefix)
                print(f"s3_clients_bench: round {r} {name.split(' (')[0]}: upload {times[name][-1][0]:.2f} s, "
                      f"check {times[name][-1][1]:.2f} s", flush=True)
    finally:
        subprocess.run(["bash", str(s3rver / "stop-s3rver.sh"), str(work / "s3")], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)
    base = statistics.median(sum(t) for t in times[names[0]])
    rows = []
    for name in names:
        med = statistics.median(sum(t) for t in times[name])
        up = statistics.median(t[0] for t in times[name])
        checked = statistics.median(t[1] for t in times[name])
        rows.append([name, f"{up:.2f} s", f"{checked:.2f} s" if METHODS[name][1] else "(in the upload)",
                     f"{med:.2f} s", f"{args.mib / med:.0f} MiB/s", f"{med / base:.2f}",
                     ", ".join(f"{sum(x):.2f}" for x in times[name])])
        print(f"s3_clients_bench: {name}: median {med:.2f} s (upload {up:.2f}), {med / base:.2f}x autopar's time",
              flush=True)
    if args.record:
        results.record(
            "Upload to S3: autopar against boto3 and s3torchconnector", "bench/ckpt/s3_clients_bench.py",
            f"One checkpoint of {args.files} files x {args.mib // args.files} MiB from the page cache to "
            f"s3rver 3.7.1 on loopback, {PART >> 20} MiB parts (autopar's default row: whole files) and "
            f"{CONCURRENCY} requests in flight for every method, {args.rounds} rounds with the order rotating; each ends with every object "
            "checked (size and ETag against the file's bytes: autopar's engine does it as it sends, the "
            "others get it from the bench afterwards). boto3 1.44.18 (s3transfer 0.19.3), "
            f"s3torchconnector 1.5.0; {os.cpu_count()} cores, load average "
            f"{os.getloadavg()[0]:.1f} at the end.",
            ["method", "upload (median)", "check (median)", "verified (median)", "throughput", "verified vs autopar",
             "rounds, verified (s)"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
