"""The user's side of tests/security/test_upload_swap.py, in a task of the user's job with
--ckpt-dir and --ckpt-upload=file://UP (UP a directory of the user's): writes a checkpoint of
rank 0 (a 200 MiB file and a small one, both mode 0600), commits it (autopar.ckpt.commit), and
right after the commit's reply, before autopard's background upload has written everything,
replaces

    swap-root   UP itself with a symlink to argv[2] (a root-only directory)
    swap-job    UP/job-<J> with a symlink to argv[2]
    none        nothing (the upload runs undisturbed)

then waits until the upload has ended (uploaded or failed) and prints this node's uploads
(UPLOADS <json>).

    commit_swap.py MODE TARGET
"""
import json
import os
import sys
import time

os.environ["AUTOPAR_STACKS"] = "0"  # no stack dump directory left in /tmp/autopar-stacks
from autopar import ckpt  # noqa: E402

mode, target = sys.argv[1], sys.argv[2]
up = os.environ["AUTOPAR_CKPT_UPLOAD"][len("file://"):]
job = os.environ["SLURM_JOB_ID"]
print(f"JOB {job}", flush=True)

d = ckpt.step_dir(1)
chunk = b"\0" * (4 << 20)
fd = os.open(os.path.join(d, "big.bin"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
for _ in range(50):  # 200 MiB: the upload (hashing, copying) takes a while after the reply
    os.write(fd, chunk)
os.close(fd)
fd = os.open(os.path.join(d, "small.txt"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
os.write(fd, b"rank 0 of step 1\n")
os.close(fd)

reply = ckpt.commit(1)
t0 = time.monotonic()
if mode == "swap-root":
    os.rename(up, up + ".orig")
    os.symlink(target, up)
elif mode == "swap-job":
    job_dir = os.path.join(up, f"job-{job}")
    for attempt in range(100):  # autopard may make job_dir between our rename and symlink
        if os.path.lexists(job_dir):
            os.rename(job_dir, f"{job_dir}.orig{attempt}")
        try:
            os.symlink(target, job_dir)
            break
        except FileExistsError:
            continue
    else:
        sys.exit(f"could not replace {job_dir} with a symlink in 100 tries")
print(f"COMMITTED {json.dumps(reply)}; swapped ({mode}) "
      f"{time.monotonic() - t0:.6f}s after the reply", flush=True)

deadline = time.monotonic() + 90
ups = []
while time.monotonic() < deadline:
    ups = ckpt.uploads()
    if ups and all(u["state"] not in ("queued", "uploading", "hashing") for u in ups):
        break
    time.sleep(0.2)
print("UPLOADS " + json.dumps(ups), flush=True)
