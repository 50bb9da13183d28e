"""The user's side of tests/security/test_restore_file_store.py, run as autopar-test2 in a task of
their own job (it needs the job's id, SLURM_JOB_ID, for the store's keys).

    restore_store.py build CONFIG   makes the forged store that CONFIG (JSON) describes
    restore_store.py ask CONFIG     asks this node's autopard for a restore of CONFIG's store
                                    itself and prints the whole reply (REPLY <json>)

The store has the layout autopard writes (core/ckpt/ckpt_layout.h, ckpt_manifest.h):
job-<J>/owner.json, job-<J>/step-<N>/{manifest.json, rank-0.json, rank-0/<file>}, each step
complete (world size 1, rank 0 verified). Three steps claim the same file differently, newest
first, so that one restore meets all three: step 30 a wrong size, step 20 the right size and a
wrong SHA-256, step 10 both right (what an attacker writes once the first two told them the secret's
size and digest). CONFIG's "component" says where a symlink into the root-only directory is:

    file     job-J/step-N/rank-0/secret.bin -> the secret
    rank     job-J/step-N/rank-0 -> the secret's directory
    subdir   job-J/step-N/rank-0/sub -> the secret's directory (the file is sub/secret.bin)
    step     job-J/step-N -> a directory of the user's elsewhere, whose rank-0 is a link as above
    job      job-J -> a directory of the user's elsewhere, whose steps' rank-0 are links as above
    hardlink job-J/step-N/rank-0/secret.bin is a hard link to CONFIG's "hardlink_target"
    fifo     job-J/step-N/rank-0/secret.bin is a FIFO (and step 40's manifest.json one too)
    sparse   job-J/step-10/manifest.json is a sparse file of 1 TiB

"link" is "absolute" or "relative" (the symlink's target as written).
"""
import json
import os
import socket
import sys
import time
from pathlib import Path

FILE = "secret.bin"


def manifest(job, step, path, size, sha):
    rank = {"rank": 0, "verified": True, "files": [{"path": path, "size": size, "sha256": sha}]}
    return json.dumps({"format": "autopar-checkpoint/1", "job_id": job, "step": step,
                       "world_size": 1, "ranks": [rank]}, indent=1) + "\n"


def link(target, at: Path, how):
    target = Path(target)
    text = str(target) if how == "absolute" else os.path.relpath(target, at.parent)
    os.symlink(text, at)


def claims(cfg):
    """(step, size, sha256) of the forged steps, newest first."""
    wrong_size = cfg["size"] + 1 if cfg["size"] != 1 else 2
    return [(30, wrong_size, "0" * 64), (20, cfg["size"], "0" * 64),
            (10, cfg["size"], cfg["sha256"])]


def build_step(step_dir: Path, job, step, size, sha, cfg):
    comp, how = cfg["component"], cfg["link"]
    secret, secret_dir = Path(cfg["secret"]), Path(cfg["secret"]).parent
    path = f"sub/{secret.name}" if comp == "subdir" else FILE if comp in ("hardlink", "fifo") \
        else secret.name
    step_dir.mkdir(parents=True)
    (step_dir / "manifest.json").write_text(manifest(job, step, path, size, sha))
    (step_dir / "rank-0.json").write_text(manifest(job, step, path, size, sha))
    rank = step_dir / "rank-0"
    if comp in ("rank", "step", "job"):
        link(secret_dir, rank, how)
        return
    rank.mkdir()
    if comp == "file":
        link(secret, rank / secret.name, how)
    elif comp == "subdir":
        link(secret_dir, rank / "sub", how)
    elif comp == "hardlink":
        os.link(cfg["hardlink_target"], rank / FILE)
    elif comp == "fifo":
        os.mkfifo(rank / FILE, 0o644)


def build(cfg):
    job = os.environ["SLURM_JOB_ID"]
    store = Path(cfg["store"])
    store.mkdir(parents=True, exist_ok=True)
    comp = cfg["component"]
    job_dir = store / f"job-{job}"
    # "job": the job's directory is a link to a tree elsewhere; "step": each step's is.
    real_job = Path(cfg["elsewhere"]) / f"job-{job}" if comp == "job" else job_dir
    real_job.mkdir(parents=True)
    if comp == "job":
        link(real_job, job_dir, cfg["link"])
    (real_job / "owner.json").write_text(json.dumps({"uid": os.getuid(), "job_id": job}) + "\n")
    if comp == "sparse":
        step_dir = real_job / "step-10"
        step_dir.mkdir()
        with open(step_dir / "manifest.json", "wb") as f:
            f.truncate(1 << 40)  # 1 TiB, no block of it on disk
        (step_dir / "rank-0.json").write_text(manifest(job, 10, FILE, 1, "0" * 64))
        (step_dir / "rank-0").mkdir()
        (step_dir / "rank-0" / FILE).write_bytes(b"x")
    else:
        for step, size, sha in claims(cfg):
            if comp == "step":
                elsewhere = Path(cfg["elsewhere"]) / f"step-{step}"
                build_step(elsewhere, job, step, size, sha, cfg)
                link(elsewhere, real_job / f"step-{step}", cfg["link"])
            else:
                build_step(real_job / f"step-{step}", job, step, size, sha, cfg)
    if comp == "fifo":  # a step whose manifest itself is a FIFO, the newest of all
        (real_job / "step-40").mkdir()
        os.mkfifo(real_job / "step-40" / "manifest.json", 0o644)
    print(f"BUILT store for job {job}", flush=True)


def ask(cfg):
    """The restore request a task may send itself (python/autopar/ckpt.py's wire format)."""
    req = {"v": 1, "op": "restore", "job_id": os.environ["SLURM_JOB_ID"], "rank": 0,
           "world_size": 1, "ckpt_dir": os.environ.get("AUTOPAR_CKPT_DIR", cfg["ckpt_dir"]),
           "upload": cfg["upload"], "node": os.environ.get("SLURMD_NODENAME", "")}
    t0 = time.monotonic()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(cfg.get("ask_timeout", 30))
            s.connect(os.environ["AUTOPAR_SOCKET"])
            s.sendall((json.dumps(req) + "\n").encode())
            buf = b""
            while b"\n" not in buf:
                chunk = s.recv(1 << 20)
                if not chunk:
                    raise ConnectionError("connection closed before the reply")
                buf += chunk
        print("REPLY " + buf.split(b"\n", 1)[0].decode(errors="replace"), flush=True)
    except (OSError, ConnectionError) as e:
        print(f"NO-REPLY {e!r}", flush=True)
    print(f"ASKED in {time.monotonic() - t0:.3f}s", flush=True)


def main():
    mode, cfg = sys.argv[1], json.loads(Path(sys.argv[2]).read_text())
    print(f"JOB {os.environ['SLURM_JOB_ID']}", flush=True)
    if mode == "build":
        build(cfg)
    else:
        for k in ("AUTOPAR_RESUME_STEP", "AUTOPAR_RESUME_DIR"):
            print(f"ENV {k}={os.environ.get(k, '')}", flush=True)
        ask(cfg)


if __name__ == "__main__":
    main()
