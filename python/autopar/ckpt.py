"""Checkpoints through the node's autopard (see core/proto/protocol.h for the wire format).

The contract: rank R writes its files of step N under ``step_dir(N)`` =
``$AUTOPAR_CKPT_DIR/step-<N>/rank-<R>/`` and then calls ``commit(N)``. The commit returns as soon
as autopard has recorded the step durably; the upload (to ``--ckpt-upload``) runs in the
background. A step becomes COMPLETE when every rank has committed and its files are uploaded and
verified; only complete steps are restored. After a restart, ``resume_step()`` is the step that
autopar-launch restored before the program started (``None`` for a fresh start) and
``resume_dir()`` holds this rank's files of it.

Heartbeats (``heartbeat(step)``, hang detection and progress) do not wait for autopard: a daemon
thread of this module sends the latest one in the background (see heartbeat()).

Time limits (jobs submitted with ``--requeue-on-failure``): near the job's end time autopard asks
the program to checkpoint: ``heartbeat(step)`` returns True (at the heartbeat after the one that
autopard answered so). The ranks agree on one step with ``time_limit_reached(requested, step)``
(any rank's request counts; through torch.distributed when it is initialized), checkpoint and
commit that step as usual, and then call ``wait_for_requeue()``, which holds until autopard has
requeued the job once the step is COMPLETE (Slurm then ends the task; the next run resumes from
that step). See docs/checkpoints.md.

Only the standard library is used. Errors raise ``AutoparError`` with autopard's message (except a
background heartbeat's: see heartbeat()).
"""
from __future__ import annotations

import atexit
import json
import math
import os
import socket
import sys
import threading
import time
from typing import Any, Callable, Dict, List, NoReturn, Optional, SupportsFloat, Tuple, overload

from . import private_dir

__all__ = ["AutoparError", "enabled", "rank", "step_dir", "commit", "heartbeat", "flush_heartbeats",
           "heartbeat_error", "event", "uploads", "wait_uploads",
           "resume_step", "resume_dir", "resume_step_dir", "resume_world_size", "agree", "time_limit_reached", "wait_for_requeue"]

PROTOCOL_VERSION = 1

# A heartbeat: (step, samples, tokens, loss, timeout).
_Beat = Tuple[int, Optional[int], Optional[int], Optional[float], float]


class AutoparError(RuntimeError):
    """autopard refused a request or could not be reached."""


@overload
def _env(name: str) -> Optional[str]: ...
@overload
def _env(name: str, default: str) -> str: ...
@overload
def _env(name: str, default: Optional[str]) -> Optional[str]: ...


def _env(name: str, default: Optional[str] = None) -> Optional[str]:
    v = os.environ.get(name)
    return v if v not in (None, "") else default


def enabled() -> bool:
    """True when the job was submitted with --ckpt-dir or --ckpt-upload (and autopar set it up)."""
    return _env("AUTOPAR_CKPT_DIR") is not None and _env("AUTOPAR_SOCKET") is not None


def rank() -> int:
    return int(_env("RANK", _env("SLURM_PROCID", "0")))


def _world_size() -> int:
    return int(_env("WORLD_SIZE", _env("SLURM_NTASKS", "1")))


def _require(name: str) -> str:
    v = _env(name)
    if v is None:
        raise AutoparError(f"{name} is not set: submit the job with --ckpt-dir or --ckpt-upload "
                           "(and run it under autopar)")
    return v


def step_dir(step: int, create: bool = True, rank_: Optional[int] = None) -> str:
    """The directory where this rank writes (and finds, after a restore) its files of `step`."""
    if int(step) < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    r = rank() if rank_ is None else int(rank_)
    d = os.path.join(_require("AUTOPAR_CKPT_DIR"), f"step-{int(step)}", f"rank-{r}")
    if create and rank_ is None:
        _save_started.setdefault(int(step), time.monotonic())
    if create:
        try:
            private_dir.make_private_dir(d)
        except private_dir.PrivateDirError as e:
            raise AutoparError(str(e)) from None
    return d


# Requests that may be sent again when autopard went away after taking them (a commit is recorded
# once per job, step, rank and target; the others change nothing twice). An event or a recover
# request is repeated only when it never reached autopard.
_SAFE_TO_REPEAT = {"commit", "restore", "ls", "status", "heartbeat", "events"}


class _NotListening(Exception):
    """autopard's socket is missing or refuses connections: nothing was sent."""


class _ClosedBeforeReply(Exception):
    """The connection ended after the request was sent, before its reply."""


def _retry_s() -> int:
    """How long a call keeps trying while the node's autopard restarts: AUTOPAR_DAEMON_RETRY_S
    (default 30, 0: one attempt), as the C++ clients."""
    v = _env("AUTOPAR_DAEMON_RETRY_S")
    try:
        return min(max(int(v), 0), 3600) if v else 30
    except ValueError:
        return 30


def _call_once(path: str, line: bytes, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            try:
                s.connect(path)
            except (FileNotFoundError, ConnectionRefusedError) as e:
                raise _NotListening(e.strerror) from None
            try:
                s.sendall(line)
            except (BrokenPipeError, ConnectionResetError) as e:
                raise _ClosedBeforeReply(e.strerror) from None
            buf = b""
            while b"\n" not in buf:
                s.settimeout(max(0.001, deadline - time.monotonic()))
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    raise _ClosedBeforeReply("connection closed before the reply")
                buf += chunk
    except socket.timeout:
        raise AutoparError(f"autopard ({path}): no reply within {timeout:g} s") from None
    except (_NotListening, _ClosedBeforeReply):
        raise
    except OSError as e:
        raise AutoparError(f"autopard ({path}): {e.strerror or e} (is autopard running?)") from None
    return buf


def _request_line(request: Dict[str, Any]) -> bytes:
    """A request as it goes on autopard's socket: one JSON line with the protocol's version."""
    return (json.dumps({"v": PROTOCOL_VERSION, **request}, separators=(",", ":")) + "\n").encode()


def _call(request: Dict[str, Any], timeout: float, path: Optional[str] = None) -> Any:
    """One request to the node's autopard. While autopard is not there (restarting), tried again
    after 0.1 s doubling up to 1 s, for up to AUTOPAR_DAEMON_RETRY_S; so is a request safe to
    repeat whose connection closed before the reply. `timeout` bounds each attempt."""
    path = path or _require("AUTOPAR_SOCKET")
    line = _request_line(request)
    give_up = time.monotonic() + _retry_s()
    pause, attempt = 0.1, 0
    while True:
        attempt += 1
        try:
            buf = _call_once(path, line, timeout)
            break
        except _NotListening as e:
            why, again = f"{e} (is autopard running?)", True
        except _ClosedBeforeReply as e:
            why, again = str(e), request.get("op") in _SAFE_TO_REPEAT
        if not again or time.monotonic() + pause > give_up:
            tried = f" (tried {attempt} times over {_retry_s()} s)" if attempt > 1 else ""
            raise AutoparError(f"autopard ({path}): {why}{tried}")
        time.sleep(pause)
        pause = min(pause * 2, 1.0)
    reply = json.loads(buf.split(b"\n", 1)[0])
    if not reply.get("ok"):
        raise AutoparError(reply.get("error", "autopard refused the request"))
    return reply


def _job_fields() -> Dict[str, Any]:
    fields: Dict[str, Any] = {"job_id": _require("SLURM_JOB_ID"), "rank": rank(), "world_size": _world_size()}
    node = _env("SLURMD_NODENAME")
    if node:
        fields["node"] = node
    return fields


# When this process first asked for each step's directory: its save began (commit's save_s).
_save_started: Dict[int, float] = {}


def commit(step: int, timeout: float = 30.0, save_s: Optional[float] = None) -> Dict[str, Any]:
    """Commits this rank's files of `step` (written under step_dir(step)); returns autopard's reply
    ({"commit_id", "files", "bytes", "duplicate"}) once the commit is durable.

    `save_s`: the seconds the training stalled to write the step (the job's checkpoint stall in
    `autopar goodput`); by default the time since this process first called step_dir(step)."""
    started = _save_started.pop(int(step), None)
    if save_s is None and started is not None:
        save_s = time.monotonic() - started
    req: Dict[str, Any] = {"op": "commit", "step": int(step), "ckpt_dir": _require("AUTOPAR_CKPT_DIR"),
           **_job_fields()}
    if save_s is not None:
        req["save_s"] = round(max(0.0, float(save_s)), 4)
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


def heartbeat(step: int, samples: Optional[int] = None, tokens: Optional[int] = None,
              loss: Optional[SupportsFloat] = None, timeout: float = 5.0, wait: bool = False) -> bool:
    """Tells autopard this rank made progress (reached `step`). Returns True when autopard asks
    the program to checkpoint now because the job's time limit is near (the reply's
    ``checkpoint_requested``; only for jobs with --requeue-on-failure), else False. Pass the value
    to time_limit_reached() on every rank.

    It does not wait for autopard: the heartbeat is handed to a daemon thread of this module
    (started on the first call, and again in a forked child) that sends it, so the call costs the
    program microseconds, not a round trip (while heartbeats keep coming, the thread looks for a
    new one every 20 ms instead of being woken by each). The returned flag therefore comes from the
    replies received so far: it may lag one heartbeat (True at the heartbeat after the one whose
    reply asked, so the time-limit checkpoint comes one step later than with wait=True). When the
    program calls faster than the thread sends, the heartbeats in between are skipped (the latest
    wins; a NaN or infinite loss of a skipped one is carried to the next): hang detection and
    progress measure the steps between the heartbeats that arrive. A failed background send never
    raises: the first error is printed to stderr ("autopar: rank R: heartbeat ...") and returned
    by heartbeat_error(); the next heartbeats are sent as usual.

    ``wait=True``: the synchronous heartbeat, for a caller that needs the fresh reply: waits for
    the background send in flight, if any, sends this one and returns its reply's flag; errors
    raise AutoparError, as every other call of this module.

    Optional (docs/health.md): `samples` and `tokens`, the step's over the whole job (the global
    batch), and `loss` (a float or a 0-d tensor; NaN and infinities are sent as such). Rank 0's
    become the job's measured step time, throughput and MFU against its plan.

    The job's variables (SLURM_JOB_ID, RANK, AUTOPAR_SOCKET, ...) are read when the heartbeat is
    sent. Outside a job (no SLURM_JOB_ID or AUTOPAR_SOCKET) a process's first heartbeat raises
    AutoparError, as does every synchronous one."""
    beat: _Beat = (int(step), None if samples is None else int(samples),
            None if tokens is None else int(tokens), None if loss is None else float(loss), timeout)
    s = _sender  # None in a forked child: os.register_at_fork (no getpid() system call here)
    if s is None or wait or s.thread is None:
        if s is None:
            s = _heartbeat_sender()
        return s.send(beat) if wait else s.post(beat)
    # post(), inlined: the call a program makes every step, after a step that let the caches go
    # cold (on the 2-core VM one Python call less and no getpid() took the p99 at a 20 ms step
    # from ~110-140 to ~60-80 us).
    with s.lock:
        s.last_step = beat[0]
        s.pending = beat if s.pending is None else s._replace(s.pending, beat)
        requested, s.requested = s.requested, False
        wake = s.idle and s._signal()
    if wake:
        s.wake.release()
    return requested


def _heartbeat_fields(step: int) -> Dict[str, Any]:
    """What every heartbeat says: the job, this rank (and its node) and the step."""
    f = _job_fields()
    req: Dict[str, Any] = {"op": "heartbeat", "job_id": f["job_id"], "rank": f["rank"], "step": step}
    if "node" in f:
        req["node"] = f["node"]
    return req


def _heartbeat_request(beat: _Beat) -> Dict[str, Any]:
    """The request of a heartbeat (step, samples, tokens, loss, timeout), with the job's fields."""
    step, samples, tokens, loss, _ = beat
    req = _heartbeat_fields(step)
    if samples is not None:
        req["samples"] = samples
    if tokens is not None:
        req["tokens"] = tokens
    if loss is not None:
        # JSON has no NaN or infinity: those travel as strings.
        req["loss"] = loss if math.isfinite(loss) else \
            ("nan" if math.isnan(loss) else "inf" if loss > 0 else "-inf")
    report = _ranks_report
    if report is not None:
        # Every rank's compute time (autopar.health.watch_ddp, rank 0 only): stragglers.
        compute, nodes = report()
        if compute:
            req["rank_compute_s"] = compute
        if nodes:
            req["rank_nodes"] = nodes
    leads = _leads
    if leads is not None and req["rank"] != 0 and leads():
        req["leads"] = True  # reports the job's progress in rank 0's place (docs/ft.md)
    return req


RanksReport = Callable[[], Tuple[Optional[List[float]], Optional[List[str]]]]
_ranks_report: Optional[RanksReport] = None
_leads: Optional[Callable[[], bool]] = None


def report_ranks_with(report: Optional[RanksReport]) -> None:
    """Heartbeats from now on carry every rank's compute time: `report()` -> (compute seconds per
    rank, their nodes or None), asked per heartbeat sent (autopar.health's DDP watch, rank 0)."""
    global _ranks_report
    _ranks_report = report


def lead_when(leads: Optional[Callable[[], bool]]) -> None:
    """Heartbeats from now on say when this rank reports the job's progress in rank 0's place:
    `leads()` (autopar.ft's Manager: the lowest member of a group that lost rank 0), asked in the
    background thread per heartbeat sent."""
    global _leads
    _leads = leads


def flush_heartbeats(timeout: float = 5.0) -> bool:
    """Waits until the heartbeats handed to the background thread so far are sent (or failed);
    returns False when `timeout` seconds passed first. Called at exit (at most 1 s); call it
    yourself before os._exit() or exec."""
    s = _sender
    return True if s is None or s.pid != os.getpid() else s.flush(timeout)


def heartbeat_error() -> Optional[str]:
    """The first error of a background heartbeat of this process (a str), or None."""
    s = _sender
    return None if s is None or s.pid != os.getpid() else s.error


# While heartbeats keep coming, the thread looks for a new one every _LOOK_EVERY_S instead of
# being woken by each (a wake-up is a futex call and, when the thread's core is idle, an
# inter-processor interrupt: tens of us for the caller on a VM); after _QUIET_LOOKS looks without
# one it waits to be woken. core/proto/heartbeat_sender.h does the same for the C API.
_LOOK_EVERY_S = 0.02
_QUIET_LOOKS = 500


class _HeartbeatSender:
    """The latest heartbeat, sent by one daemon thread (per process). `lock` guards the fields;
    `send_lock` is held for each send, background or synchronous, so that autopard receives a
    rank's steps in order. The thread waits on `wake`, a lock used as a semaphore: released by
    whoever sets `signalled`, which the thread clears when it took it (a Condition would cost the
    caller more Python code)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.send_lock = threading.Lock()
        self.wake = threading.Lock()
        self.wake.acquire()
        self.signalled = False
        self.idle = False  # the thread no longer looks by itself: post() wakes it
        self.pending: Optional[_Beat] = None  # (step, samples, tokens, loss, timeout) not sent yet
        self.sending = False
        self.sync_waiting = 0  # send() calls waiting for send_lock: the pending one is theirs
        self.requested = False  # a reply since the last call asked for a checkpoint
        self.error: Optional[str] = None
        self.thread: Optional[threading.Thread] = None
        self.last_step: Optional[int] = None  # the step of the last heartbeat handed over

    def _signal(self) -> bool:
        # self.lock held; True: the caller releases `wake` once it unlocked.
        if self.signalled:
            return False
        self.signalled = True
        return True

    @staticmethod
    def _replace(old: Optional[_Beat], new: _Beat) -> _Beat:
        # The latest wins, but a bad loss must reach the loss guard: a NaN or infinity of a
        # heartbeat that is replaced before it was sent goes with the one that replaces it.
        if old is None or old[3] is None or math.isfinite(old[3]) or \
                (new[3] is not None and not math.isfinite(new[3])):
            return new
        return new[:3] + (old[3],) + new[4:]

    def post(self, item: _Beat) -> bool:
        with self.lock:
            self.last_step = item[0]
            self.pending = item if self.pending is None else self._replace(self.pending, item)
            requested, self.requested = self.requested, False
            wake = self.idle and self._signal()
            if self.thread is None:
                self._start()
        if wake:
            self.wake.release()
        return requested

    def _start(self) -> None:
        # self.lock held. Without a thread (e.g. at interpreter shutdown) the heartbeat is sent
        # here and now, its errors reported as the thread's would be.
        try:
            self.thread = threading.Thread(target=self._run, name="autopar-heartbeat", daemon=True)
            self.thread.start()
        except RuntimeError:
            self.thread = None
            item, self.pending = self.pending, None
            self.lock.release()
            assert item is not None  # post() set it just before
            try:
                with self.send_lock:
                    self._send_one(item)
            finally:
                self.lock.acquire()

    def send(self, item: _Beat) -> bool:
        with self.lock:
            self.sync_waiting += 1
        waiting = True
        try:
            with self.send_lock:
                with self.lock:
                    self.sync_waiting -= 1
                    waiting = False
                    old, self.pending = self.pending, None  # older than this one: superseded
                    item = self._replace(old, item)
                    self.last_step = item[0]
                    requested, self.requested = self.requested, False
                reply = _call(_heartbeat_request(item), item[4])
        finally:
            with self.lock:
                if waiting:  # interrupted while waiting
                    self.sync_waiting -= 1
                wake = self.pending is not None and self.idle and self._signal()  # posted meanwhile
            if wake:
                self.wake.release()
        return bool(reply.get("checkpoint_requested", False)) or requested

    def flush(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                if self.pending is None and not self.sending:
                    return True
                if self.thread is None:
                    return False
                wake = self.pending is not None and self._signal()  # now, not at the next look
            if wake:
                self.wake.release()
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.0005)

    def _run(self) -> None:
        # SCHED_BATCH (this thread only): no wake-up preemption, so that post()'s wake-up does not
        # hand the program's core to this thread mid-call (core/proto/heartbeat_sender.cpp).
        try:
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        except (AttributeError, OSError):
            pass
        quiet = 0  # looks in a row that found nothing to send
        while True:
            with self.lock:
                ready = self.pending is not None and not self.sync_waiting
                self.idle = not ready and quiet >= _QUIET_LOOKS
            if not ready:
                if self.idle:
                    got = self.wake.acquire()
                else:
                    quiet += 1
                    got = self.wake.acquire(timeout=_LOOK_EVERY_S)
                if got:
                    with self.lock:
                        self.signalled = False
                continue
            quiet = 0
            with self.send_lock:
                with self.lock:
                    item, self.pending = self.pending, None
                    if item is None:  # a synchronous heartbeat took it
                        continue
                    self.sending = True
                try:
                    self._send_one(item)
                finally:
                    with self.lock:
                        self.sending = False

    def _send_one(self, item: _Beat) -> None:
        try:
            flag = bool(_call(_heartbeat_request(item), item[4]).get("checkpoint_requested", False))
        except Exception as e:  # never raised in the program: the first one is reported
            with self.lock:
                first = self.error is None
                if first:
                    self.error = f"heartbeat of step {item[0]}: {e}"
            if first:
                who = _env("RANK", _env("SLURM_PROCID", "0"))
                print(f"autopar: rank {who}: {self.error} (training goes on; later heartbeat "
                      "errors are not printed: ckpt.heartbeat_error())", file=sys.stderr,
                      flush=True)
            return
        if flag:
            with self.lock:
                self.requested = True


_sender: Optional[_HeartbeatSender] = None  # this process's _HeartbeatSender (another process's after a fork: replaced)
_sender_lock = threading.Lock()
_flush_registered = False


def _heartbeat_sender() -> _HeartbeatSender:
    global _sender, _flush_registered
    s = _sender
    if s is not None and s.pid == os.getpid():
        return s
    with _sender_lock:
        if _sender is None or _sender.pid != os.getpid():
            _job_fields()  # outside a job: AutoparError now, not in the background
            _require("AUTOPAR_SOCKET")
            if not _flush_registered:  # inherited by a forked child, as the handler is
                atexit.register(_flush_at_exit)
                _flush_registered = True
            _sender = _HeartbeatSender()
        return _sender


def _forget_sender_in_child() -> None:
    # The parent's thread does not exist here and its locks may be held: start afresh. Every fork
    # that runs Python code in the child runs this (os.fork, multiprocessing; a C extension's
    # fork() must call PyOS_AfterFork_Child, which does).
    global _sender, _sender_lock
    _sender_lock = threading.Lock()
    _sender = None


os.register_at_fork(after_in_child=_forget_sender_in_child)


def _flush_at_exit() -> None:
    # The last step's heartbeat (and its loss) still reaches autopard when the program ends right
    # after it, then the notice that this rank is finishing: what is left of the exit (the
    # interpreter's teardown, other exit handlers) may take longer than a step on a loaded node,
    # and autopard's hang watch gives it the first-step allowance instead of --heartbeat-timeout
    # (protocol.h, "finishing"). Bounded: an unreachable autopard never holds the exit.
    flush_heartbeats(1.0)
    s = _sender
    if s is None or s.pid != os.getpid() or s.last_step is None:
        return
    try:
        req = {**_heartbeat_fields(s.last_step), "finishing": True}
        _call_once(_require("AUTOPAR_SOCKET"), _request_line(req), 1.0)  # once: no retries at exit
    except Exception:  # the exit goes on; a missing notice only shortens the allowance
        pass


def agree(flag: object) -> bool:
    """True on every rank when `flag` is true on any rank: an all_reduce(MAX) through
    torch.distributed when the program has imported it and initialized the default process
    group (a collective: every rank must call it at the same point), else `flag` itself. This
    module never imports torch."""
    return _agree_max(1 if flag else 0) > 0


def _agree_max(value: int) -> int:
    """The largest `value` of every rank (agree())."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return int(value)
    torch = sys.modules["torch"]
    t = torch.tensor([int(value)], dtype=torch.int32)
    if dist.get_backend() == "nccl":
        t = t.cuda(torch.cuda.current_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


_terminated = False  # this process got SIGTERM (the handler time_limit_reached() installs)
_term_handler_installed = False


def _on_sigterm(signum: int, frame: Any) -> None:
    global _terminated
    if _holding:
        # The checkpoint is committed and the program holds for the requeue: a SIGTERM now is
        # Slurm ending the task (the requeue itself, a scancel, the grace's or the time limit's
        # end). Ending at once gives the node back KillWait seconds sooner than Slurm's SIGKILL,
        # and the next run starts that much earlier.
        os._exit(128 + signum)
    _terminated = True


def take_sigterm() -> None:
    """From now on SIGTERM asks for the checkpoint of time_limit_reached() instead of ending the
    program, replacing the handler a framework installed (Lightning's ends fit() at the next
    batch; autopar.lightning calls this once training starts). From the main thread only."""
    import signal
    global _term_handler_installed
    _term_handler_installed = True
    signal.signal(signal.SIGTERM, _on_sigterm)


def _watch_sigterm() -> None:
    """From the first time_limit_reached() on, a SIGTERM no longer ends the program: it asks for
    the same checkpoint as a time-limit request, at the next step. A preemption, a scancel and
    Slurm's own time limit all send it; autopard tells them apart from Slurm's record of the job
    (a preemption is requeued once the step is COMPLETE; the others end as Slurm said, with
    SIGKILL KillWait seconds later). Only where SIGTERM still has its default action, and only
    from the main thread (Python's rule): a program with its own handler keeps it."""
    global _term_handler_installed
    if _term_handler_installed:
        return
    _term_handler_installed = True
    import signal
    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread
        pass


def time_limit_reached(requested: object, step: int, terminated: bool = False) -> bool:
    """Call on every rank after heartbeat(step) with its result. Returns True on every rank when
    any rank was asked to checkpoint for the time limit (agree()), or got SIGTERM (a preemption:
    from the first call on, SIGTERM asks for this checkpoint instead of ending the program); the
    program then writes and commits `step` and calls wait_for_requeue(). When True, the step is
    also recorded on the job's timeline ("time_limit_checkpoint", or "termination_checkpoint"
    after a SIGTERM), which tells autopard which step ends this run. `terminated`: a SIGTERM the
    program's own handler saw (this module then leaves SIGTERM to it)."""
    global _time_limit_step, _stop_reason
    if enabled():
        _watch_sigterm()
    why = _agree_max(2 if _terminated or terminated else 1 if requested else 0)
    if why == 0:
        return False
    _stop_reason = "SIGTERM" if why == 2 else "the time limit"
    if enabled():
        if why == 2:
            event("termination_checkpoint", detail="the task got SIGTERM: checkpointing", step=step)
        else:
            event("time_limit_checkpoint", detail="checkpointing for the time limit", step=step)
        if _time_limit_step is None:
            atexit.register(_hold_at_exit)
        _time_limit_step = int(step)
    return True


_time_limit_step: Optional[int] = None  # the step announced by time_limit_reached()
_stop_reason = "the time limit"  # or "SIGTERM": why time_limit_reached() returned True
_holding = False


def _hold_at_exit() -> None:
    # A program that returns (or raises) after its time-limit checkpoint instead of calling
    # wait_for_requeue() would end the job COMPLETED (or FAILED) with training unfinished: hold
    # here, so the requeue ends it.
    if not _holding:
        print(f"autopar: rank {rank()}: exiting after the checkpoint of step "
              f"{_time_limit_step} for {_stop_reason}: holding until the requeue "
              "instead", file=sys.stderr, flush=True)
        wait_for_requeue()


def wait_for_requeue(timeout: Optional[float] = None, poll: float = 0.5) -> NoReturn:
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
    print(f"autopar: rank {rank()}: checkpoint committed for {_stop_reason}; waiting for the requeue",
          file=sys.stderr, flush=True)
    while deadline is None or time.monotonic() < deadline:
        time.sleep(poll)
    raise AutoparError(f"the job was not requeued within {timeout:g} s of the time-limit checkpoint")


def event(kind: str, detail: str = "", step: Optional[int] = None, timeout: float = 5.0) -> None:
    """Adds an event to the job's timeline (`autopar events JOBID`)."""
    f = _job_fields()
    req: Dict[str, Any] = {"op": "event", "job_id": f["job_id"], "rank": f["rank"], "kind": str(kind)}
    if detail:
        req["detail"] = str(detail)
    if step is not None:
        req["step"] = int(step)
    if "node" in f:
        req["node"] = f["node"]
    _call(req, timeout)


def resume_step() -> Optional[int]:
    """The step restored before the program started, or None for a fresh start."""
    v = _env("AUTOPAR_RESUME_STEP")
    return int(v) if v is not None else None


def resume_dir() -> Optional[str]:
    """This rank's restored directory (<ckpt dir>/step-<N>/rank-<R>), or None."""
    return _env("AUTOPAR_RESUME_DIR")


def resume_step_dir() -> Optional[str]:
    """The restored step's directory (its rank-*/ below it), or None for a fresh start. After a
    restart on another number of ranks (an elastic run, --min-nodes) it holds every saved rank's
    files: see resume_world_size() and autopar.dcp (DCP reshards)."""
    return _env("AUTOPAR_RESUME_STEP_DIR")


def resume_world_size() -> Optional[int]:
    """The world size that wrote the restored step (int), or None for a fresh start."""
    v = _env("AUTOPAR_RESUME_WORLD_SIZE")
    return int(v) if v is not None else None


def uploads(job_only: bool = True, timeout: float = 10.0) -> List[Dict[str, Any]]:
    """This node's uploads (of this job by default): a list of dicts with job_id, step, rank,
    state, bytes_done, bytes_total, throughput_bps, eta_s, error."""
    req: Dict[str, Any] = {"op": "status"}
    if job_only:
        req["job_id"] = _require("SLURM_JOB_ID")
    return _call(req, timeout)["uploads"]


def wait_uploads(timeout: float = 600.0, poll: float = 0.2) -> None:
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
