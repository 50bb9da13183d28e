"""Checkpoints through the node's autopard (see core/proto/protocol.h for the wire format).

The contract: rank R writes its files of step N under ``step_dir(N)`` =
``$AUTOPAR_CKPT_DIR/step-<N>/rank-<R>/`` and then calls ``commit(N)``. The commit returns as soon
as autopard has recorded the step durably; the upload (to ``--ckpt-upload``) runs in the
background. A step becomes COMPLETE when every rank has committed and its files are uploaded and
verified; only complete steps are restored. After a restart, ``resume_step()`` is the step that
autopar-launch restored before the program started (``None`` for a fresh start) and
``resume_dir()`` holds this rank's files of it.

Time limits (jobs submitted with ``--requeue-on-failure``): near the job's end time autopard asks
the program to checkpoint: ``heartbeat(step)`` returns True. The ranks agree on one step with
``time_limit_reached(requested, step)`` (any rank's request counts; through torch.distributed when
it is initialized), checkpoint and commit that step as usual, and then call
``wait_for_requeue()``, which holds until autopard has requeued the job once the step is COMPLETE
(Slurm then ends the task; the next run resumes from that step). See docs/checkpoints.md.

Only the standard library is used. Errors raise ``AutoparError`` with autopard's message.
"""
import atexit
import json
import math
import os
import socket
import sys
import time

__all__ = ["AutoparError", "enabled", "rank", "step_dir", "commit", "heartbeat", "event", "uploads", "wait_uploads",
           "resume_step", "resume_dir", "resume_step_dir", "resume_world_size", "agree", "time_limit_reached", "wait_for_requeue"]

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


def heartbeat(step, samples=None, tokens=None, loss=None, timeout=5.0):
    """Tells autopard this rank made progress (reached `step`). Returns True when autopard asks
    the program to checkpoint now because the job's time limit is near (the reply's
    ``checkpoint_requested``; only for jobs with --requeue-on-failure), else False. Pass the value
    to time_limit_reached() on every rank.

    Optional (docs/health.md): `samples` and `tokens`, the step's over the whole job (the global
    batch), and `loss` (a float or a 0-d tensor; NaN and infinities are sent as such). Rank 0's
    become the job's measured step time, throughput and MFU against its plan."""
    f = _job_fields()
    req = {"op": "heartbeat", "job_id": f["job_id"], "rank": f["rank"], "step": int(step)}
    if "node" in f:
        req["node"] = f["node"]
    if samples is not None:
        req["samples"] = int(samples)
    if tokens is not None:
        req["tokens"] = int(tokens)
    if loss is not None:
        value = float(loss)
        # JSON has no NaN or infinity: those travel as strings.
        req["loss"] = value if math.isfinite(value) else \
            ("nan" if math.isnan(value) else "inf" if value > 0 else "-inf")
    report = _ranks_report
    if report is not None:
        # Every rank's compute time (autopar.health.watch_ddp, rank 0 only): stragglers.
        compute, nodes = report()
        if compute:
            req["rank_compute_s"] = compute
        if nodes:
            req["rank_nodes"] = nodes
    return bool(_call(req, timeout).get("checkpoint_requested", False))


_ranks_report = None  # autopar.health's watch on rank 0: () -> (compute seconds, nodes or None)


def agree(flag):
    """True on every rank when `flag` is true on any rank: an all_reduce(MAX) through
    torch.distributed when the program has imported it and initialized the default process
    group (a collective: every rank must call it at the same point), else `flag` itself. This
    module never imports torch."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return bool(flag)
    torch = sys.modules["torch"]
    t = torch.tensor([1 if flag else 0], dtype=torch.int32)
    if dist.get_backend() == "nccl":
        t = t.cuda(torch.cuda.current_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def time_limit_reached(requested, step):
    """Call on every rank after heartbeat(step) with its result. Returns True on every rank when
    any rank was asked to checkpoint for the time limit (agree()); the program then writes and
    commits `step` and calls wait_for_requeue(). When True, the step is also recorded on the
    job's timeline ("time_limit_checkpoint"), which tells autopard which step ends this run."""
    global _time_limit_step
    if not agree(requested):
        return False
    if enabled():
        event("time_limit_checkpoint", detail="checkpointing for the time limit", step=step)
        if _time_limit_step is None:
            atexit.register(_hold_at_exit)
        _time_limit_step = int(step)
    return True


_time_limit_step = None  # the step announced by time_limit_reached()
_holding = False


def _hold_at_exit():
    # A program that returns (or raises) after its time-limit checkpoint instead of calling
    # wait_for_requeue() would end the job COMPLETED (or FAILED) with training unfinished: hold
    # here, so the requeue ends it.
    if not _holding:
        print(f"autopar: rank {rank()}: exiting after the time-limit checkpoint of step "
              f"{_time_limit_step}: holding until the requeue instead", file=sys.stderr, flush=True)
        wait_for_requeue()


def wait_for_requeue(timeout=None, poll=0.5):
    """After the time-limit checkpoint is committed: waits until this node's uploads are done,
    then holds until Slurm ends the task (autopard requeues the job as soon as the step is
    COMPLETE on every node). It does not return normally: returning would let the job end as
    COMPLETED with training unfinished. If the requeue cannot happen (no restart of
    --requeue-on-failure left: "time_limit_not_requeued" in `autopar events`), the job runs into
    its time limit and ends TIMEOUT. `timeout` (seconds, None: until the task is ended) raises
    AutoparError instead, for programs that want to handle that themselves. A Python program
    that exits after time_limit_reached() returned True holds here anyway (atexit)."""
    global _holding
    _holding = True
    deadline = None if timeout is None else time.monotonic() + timeout
    wait_uploads(timeout=timeout if timeout is not None else 10 ** 9)
    print(f"autopar: rank {rank()}: checkpoint committed for the time limit; waiting for the "
          "requeue", file=sys.stderr, flush=True)
    while deadline is None or time.monotonic() < deadline:
        time.sleep(poll)
    raise AutoparError(f"the job was not requeued within {timeout:g} s of the time-limit checkpoint")


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


def resume_step_dir():
    """The restored step's directory (its rank-*/ below it), or None for a fresh start. After a
    restart on another number of ranks (an elastic run, --min-nodes) it holds every saved rank's
    files: see resume_world_size() and autopar.reshard."""
    return _env("AUTOPAR_RESUME_STEP_DIR")


def resume_world_size():
    """The world size that wrote the restored step (int), or None for a fresh start."""
    v = _env("AUTOPAR_RESUME_WORLD_SIZE")
    return int(v) if v is not None else None


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
