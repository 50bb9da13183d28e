"""Checkpoints through the node's autopard (see include/autopar/protocol.h for the wire format).

The contract: rank R writes its files of step N under ``step_dir(N)`` =
``$AUTOPAR_CKPT_DIR/step-<N>/rank-<R>/`` and then calls ``commit(N)``. The commit returns as soon
as autopard has recorded the step durably; the upload (to ``--ckpt-upload``) runs in the
background. A step becomes COMPLETE when every rank has committed and its files are uploaded and
verified; only complete steps are restored. After a restart, ``resume_step()`` is the step that
autopar-launch restored before the program started (``None`` for a fresh start) and
``resume_dir()`` holds this rank's files of it.

Only the standard library is used. Errors raise ``AutoparError`` with autopard's message.
"""
import json
import os
import socket
import time

__all__ = ["AutoparError", "enabled", "rank", "step_dir", "commit", "heartbeat", "event", "uploads", "wait_uploads",
           "resume_step", "resume_dir"]

PROTOCOL_VERSION = 1


class AutoparError(RuntimeError):
    """autopard refused a request or could not be reached."""


def _env(name, default=None):
    v = os.environ.get(name)
    return v if v not in (None, "") else default


def enabled():
    """True when the job was submitted with --ckpt-dir or --ckpt-upload (and autopar set it up)."""
    return _env("AUTOPAR_CKPT_DIR") is not None and _env("AUTOPAR_SOCKET") is not None


def rank():
    return int(_env("RANK", _env("SLURM_PROCID", "0")))


def _world_size():
    return int(_env("WORLD_SIZE", _env("SLURM_NTASKS", "1")))


def _require(name):
    v = _env(name)
    if v is None:
        raise AutoparError(f"{name} is not set: submit the job with --ckpt-dir or --ckpt-upload "
                           "(and run it under autopar)")
    return v


def step_dir(step, create=True, rank_=None):
    """The directory where this rank writes (and finds, after a restore) its files of `step`."""
    if int(step) < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    r = rank() if rank_ is None else int(rank_)
    d = os.path.join(_require("AUTOPAR_CKPT_DIR"), f"step-{int(step)}", f"rank-{r}")
    if create:
        os.makedirs(d, exist_ok=True)
    return d


def _call(request, timeout):
    path = _require("AUTOPAR_SOCKET")
    request = {"v": PROTOCOL_VERSION, **request}
    line = (json.dumps(request, separators=(",", ":")) + "\n").encode()
    deadline = time.monotonic() + timeout
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.sendall(line)
            buf = b""
            while b"\n" not in buf:
                s.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = s.recv(65536)
                if not chunk:
                    raise AutoparError(f"autopard ({path}): connection closed before the reply")
                buf += chunk
    except socket.timeout:
        raise AutoparError(f"autopard ({path}): no reply within {timeout:g} s") from None
    except OSError as e:
        raise AutoparError(f"autopard ({path}): {e.strerror or e} (is autopard running?)") from None
    reply = json.loads(buf.split(b"\n", 1)[0])
    if not reply.get("ok"):
        raise AutoparError(reply.get("error", "autopard refused the request"))
    return reply


def _job_fields():
    fields = {"job_id": _require("SLURM_JOB_ID"), "rank": rank(), "world_size": _world_size()}
    node = _env("SLURMD_NODENAME")
    if node:
        fields["node"] = node
    return fields


def commit(step, timeout=30.0):
    """Commits this rank's files of `step` (written under step_dir(step)); returns autopard's reply
    ({"commit_id", "files", "bytes", "duplicate"}) once the commit is durable."""
    req = {"op": "commit", "step": int(step), "ckpt_dir": _require("AUTOPAR_CKPT_DIR"),
           **_job_fields()}
    local = _env("LOCAL_WORLD_SIZE")
    if local:
        req["local_world_size"] = int(local)
    upload = _env("AUTOPAR_CKPT_UPLOAD")
    if upload:
        req["upload"] = upload
    keep = _env("AUTOPAR_CKPT_KEEP")
    if keep:
        req["keep"] = int(keep)
    return _call(req, timeout)


def heartbeat(step, timeout=5.0):
    """Tells autopard this rank made progress (reached `step`)."""
    f = _job_fields()
    req = {"op": "heartbeat", "job_id": f["job_id"], "rank": f["rank"], "step": int(step)}
    if "node" in f:
        req["node"] = f["node"]
    _call(req, timeout)


def event(kind, detail="", step=None, timeout=5.0):
    """Adds an event to the job's timeline (`autopar events JOBID`)."""
    f = _job_fields()
    req = {"op": "event", "job_id": f["job_id"], "rank": f["rank"], "kind": str(kind)}
    if detail:
        req["detail"] = str(detail)
    if step is not None:
        req["step"] = int(step)
    if "node" in f:
        req["node"] = f["node"]
    _call(req, timeout)


def resume_step():
    """The step restored before the program started, or None for a fresh start."""
    v = _env("AUTOPAR_RESUME_STEP")
    return int(v) if v is not None else None


def resume_dir():
    """This rank's restored directory (<ckpt dir>/step-<N>/rank-<R>), or None."""
    return _env("AUTOPAR_RESUME_DIR")


def uploads(job_only=True, timeout=10.0):
    """This node's uploads (of this job by default): a list of dicts with job_id, step, rank,
    state, bytes_done, bytes_total, throughput_bps, eta_s, error."""
    req = {"op": "status"}
    if job_only:
        req["job_id"] = _require("SLURM_JOB_ID")
    return _call(req, timeout)["uploads"]


def wait_uploads(timeout=600.0, poll=0.2):
    """Waits until none of this job's uploads on this node is queued or running; raises
    AutoparError when one failed or the time is up. Call it before the job ends when the next
    job must find the last checkpoint complete."""
    deadline = time.monotonic() + timeout
    while True:
        ups = uploads()
        failed = [u for u in ups if u["state"] == "failed"]
        if failed:
            u = failed[0]
            raise AutoparError(f"upload of step {u['step']} rank {u['rank']} failed: {u.get('error', '')}")
        if not any(u["state"] in ("queued", "uploading", "hashing") for u in ups):
            return
        if time.monotonic() > deadline:
            raise AutoparError(f"uploads still running after {timeout:g} s")
        time.sleep(poll)
