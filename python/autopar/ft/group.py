"""The process group of one epoch of the fault-tolerant group (docs/ft.md): gloo, met on the store
the quorum names (store.py: open only to the job's own ranks, every value sealed) under the
epoch's own namespace, so a new epoch never meets an old one's keys.
A collective is waited for beside the launcher's channel: when the launchers re-form the group
(a member is gone) the wait is given up at once instead of running into the collective's
timeout. gloo cannot abort a collective (torch 2.15's ProcessGroupGloo.abort() returns at once but
leaves a pending one waiting for its peer): a given-up one is ended by shutting its group's
connections down (Group.sever), which fails it here and at every peer still in it."""
from __future__ import annotations

import ctypes
import datetime
import os
import select
import socket
import threading
import time
from typing import Any, Dict, List, Optional, Set

import torch
from torch.distributed import ProcessGroupGloo

from .channel import Abandoned, LauncherChannel, Quorum
from .store import AuthStore


RENDEZVOUS_TIMEOUT = datetime.timedelta(seconds=15)
STUCK_AFTER_S = 1.0  # a severed group's collective not ended by then: gloo will not end it


class Group:
    """`key`: the job's key (store.job_key()), which admits this member to the group's store."""

    def __init__(self, timeout_s: float, key: bytes) -> None:
        self.key = key
        self.timeout = datetime.timedelta(seconds=timeout_s)
        self.pg: Optional[Any] = None
        self.epoch = -1
        self._fds: Dict[int, str] = {}  # the sockets of this epoch's process group
        self._work: Optional[Any] = None  # its latest collective

    def reform(self, quorum: Quorum, rank: int, channel: LauncherChannel) -> None:
        """The process group of `quorum` for this member (rank `rank`); the last one's is
        severed and freed first. Raises Abandoned when the launchers give the epoch up while it
        is being made (a member died meanwhile), RuntimeError when it cannot be made."""
        self._free()
        # A member that dies before it publishes its address: the others give up after
        # RENDEZVOUS_TIMEOUT (not the collectives' timeout) and join again.
        store = AuthStore(self.key, quorum.store, f"epoch-{quorum.epoch}", RENDEZVOUS_TIMEOUT)
        before = _sockets()
        making = _Making(lambda: ProcessGroupGloo(store, quorum.position(rank), len(quorum.members),
                                                  self.timeout), store)
        try:
            wait(making, channel, quorum.epoch)
        except Abandoned:
            # Given up while the group is met on the store (a member died before it published
            # its address: the others wait for it there): the wait ends now, while this
            # interpreter lives. Left to itself it ends when the store's server does, and that
            # member may end with the run, while this interpreter is being torn down: a thread
            # that comes back into Python then ends the process with SIGABRT.
            store.abort()
            raise
        self.pg = making.result()
        self._fds = _new_since(before)
        self._work = None
        self.epoch = quorum.epoch

    def _free(self) -> None:
        """Severs the last epoch's group and frees it once its latest collective has ended. gloo
        does not always end one whose peer died (a send waits for gloo's timeout, the group's),
        and the group's destructor waits for it holding the GIL: every thread of the member would
        stop. Such a group is kept, its sockets detached (the descriptors point at /dev/null, so
        its event loop forgets them instead of spinning on them, and gloo closes nothing of
        anyone else's); its threads idle until the collective times out."""
        fds, self._fds = self._fds, {}
        _shut_down(fds)
        if self.pg is None:
            return
        deadline = time.monotonic() + STUCK_AFTER_S
        while self._work is not None and not self._work.is_completed() and time.monotonic() < deadline:
            time.sleep(0.005)
        if self._work is not None and not self._work.is_completed():
            _detach(fds)
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(self.pg))  # never destroyed
        self.pg = None
        self._work = None

    def sever(self) -> None:
        """Ends this epoch's connections: gloo cannot abort a collective (module doc), but one
        whose sockets are shut down fails at once, here and at every peer still waiting in it, and
        a process group with a dead peer would otherwise keep its event loop spinning. The
        sockets are the ones that appeared while the group was made."""
        _shut_down(self._fds)

    def allreduce(self, tensor: torch.Tensor, channel: LauncherChannel) -> None:
        """Sums `tensor` over the group in place. Raises Abandoned when the launcher gives this
        epoch up, RuntimeError when the collective broke (a member died)."""
        assert self.pg is not None
        self._work = self.pg.allreduce([tensor])
        wait(self._work, channel, self.epoch)

    def broadcast(self, tensor: torch.Tensor, root: int, channel: LauncherChannel) -> None:
        assert self.pg is not None
        self._work = self.pg.broadcast(tensor, root)
        wait(self._work, channel, self.epoch)

    def send(self, tensor: torch.Tensor, dst: int, tag: int, channel: LauncherChannel,
             within_s: float) -> None:
        """Sends `tensor` to group position `dst`. Like a collective, it is given up when the
        launcher gives the epoch up (a member lost during a handover: its peer must not wait for
        the deadline, since a lost node resets no connection), and fails after `within_s`."""
        assert self.pg is not None
        self._work = self.pg.send([tensor], dst, tag)
        self._wait_transfer(self._work, channel, within_s)

    def recv(self, tensor: torch.Tensor, src: int, tag: int, channel: LauncherChannel,
             within_s: float) -> None:
        """Receives into `tensor` what group position `src` sends with `tag` (as send)."""
        assert self.pg is not None
        self._work = self.pg.recv([tensor], src, tag)
        self._wait_transfer(self._work, channel, within_s)

    def _wait_transfer(self, work: Any, channel: LauncherChannel, within_s: float) -> None:
        """A point-to-point transfer, which gloo completes only inside its wait(): waited for in
        this thread (the GIL released) while a watcher reads the channel. Given up as `wait`
        gives a collective up (Abandoned), or past `within_s` (RuntimeError), by shutting the
        group's sockets down, which fails the transfer here at once. The watcher never blocks in
        C++ and is joined before this returns."""
        done, said_waiting = threading.Event(), threading.Event()
        why: List[BaseException] = []

        def watch() -> None:
            start = time.monotonic()
            while not done.is_set():
                ready, _, _ = select.select([channel], [], [], 0.01)
                if ready:
                    channel.poll()
                    if channel.abandoned_epoch >= self.epoch:
                        why.append(Abandoned(f"epoch {self.epoch} given up"))
                elif time.monotonic() - start > within_s:
                    why.append(RuntimeError(f"autopar.ft: epoch {self.epoch}: a handover not done "
                                            f"in {within_s:.0f} s"))
                if why:
                    _shut_down(self._fds)
                    return
                if not said_waiting.is_set() and time.monotonic() - start > WAITING_AFTER_S:
                    channel.send("waiting", epoch=self.epoch)  # as wait() says it
                    said_waiting.set()

        watcher = threading.Thread(target=watch, name="autopar-ft-transfer", daemon=True)
        watcher.start()
        try:
            work.wait()
        except RuntimeError:
            if not why:
                raise
        finally:
            done.set()
            watcher.join()
            if said_waiting.is_set():
                channel.send("running", epoch=self.epoch)
        if why:
            raise why[0]


class _Making:
    """A process group being made in a helper thread (the construction releases the GIL), so
    that the member can give it up: a member that dies after it published its address leaves the
    others connecting to it until the group's timeout (gloo retries), and gloo cannot be told to
    stop. A given-up construction ends by itself (made, or failed at that timeout); its group is
    never used. The thread is a daemon: the interpreter must not wait for it at exit (up to the
    group's timeout). A daemon thread that comes back into Python while the interpreter is torn
    down ends the process with std::terminate: the Manager keeps its store server alive to the
    process's end (Manager.__init__), so a construction waiting on it is not woken then. Looks
    like a collective's work to `wait`."""

    def __init__(self, make: Any, store: AuthStore) -> None:
        self._pg: Optional[Any] = None
        self._error: Optional[BaseException] = None
        self._done = threading.Event()

        def run() -> None:
            try:
                self._pg = make()
            except BaseException as e:  # handed to the waiting thread
                self._error = e
            finally:
                store.release()
                self._done.set()

        threading.Thread(target=run, name="autopar-ft-make-group", daemon=True).start()

    def is_completed(self) -> bool:
        return self._done.is_set()

    def wait(self) -> None:
        self._done.wait()
        if self._error is not None:
            raise RuntimeError(f"autopar.ft: the process group could not be made: {self._error}")

    def result(self) -> Any:
        self.wait()
        return self._pg


def _sockets() -> Dict[int, str]:
    """This process's TCP socket descriptors, each with its inode ("socket:[123]"): what gloo
    and the stores use (a Unix socket, such as the launcher's channel, is never one of them)."""
    tcp: Set[str] = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(table) as f:
                tcp.update(line.split()[9] for line in f.readlines()[1:])
        except (OSError, IndexError):
            continue
    out: Dict[int, str] = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in tcp:
            out[int(name)] = link
    return out


def _new_since(before: Dict[int, str]) -> Dict[int, str]:
    """The TCP sockets that appeared since `before` (a _sockets())."""
    return {fd: link for fd, link in _sockets().items() if before.get(fd) != link}


def _still_open(fds: Dict[int, str]) -> List[int]:
    """The descriptors of `fds` (from _sockets()) still open as they were (not closed and reused)."""
    out = []
    for fd, link in fds.items():
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == link:
                out.append(fd)
        except OSError:
            continue
    return out


def _detach(fds: Dict[int, str]) -> None:
    """Points the descriptors `fds` (from _sockets(), those still open as they were) at /dev/null:
    their sockets are closed (an epoll set forgets them) while the numbers stay taken."""
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        for fd in _still_open(fds):
            os.dup2(null, fd, inheritable=False)
    finally:
        os.close(null)


def _shut_down(fds: Dict[int, str]) -> None:
    """Shuts down the connections `fds` (from _sockets()), those still open as they were: a
    thread blocked on one fails at once. A listening socket is left alone: shut down, its next
    accept fails with EINVAL, which gloo's listener thread does not catch (std::terminate)."""
    for fd in _still_open(fds):
        try:
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if not s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # not connected
        finally:
            s.close()


WAITING_AFTER_S = 0.5


def wait(work: Any, channel: LauncherChannel, epoch: int) -> None:
    """Waits for `work` (a collective, or the group's construction), or until the launcher says
    to give up `epoch` (Abandoned). Polled from the calling thread (a few microseconds, doubling
    to 2 ms between looks): a helper thread blocked in a given-up collective would be torn down
    inside C++ frames when the interpreter exits, which ends the process with std::terminate."""
    delay, waited, said_waiting = 50e-6, 0.0, False
    try:
        while not work.is_completed():
            ready, _, _ = select.select([channel], [], [], delay)
            if ready:
                channel.poll()
                if channel.abandoned_epoch >= epoch:
                    raise Abandoned(f"epoch {epoch} given up")
            waited += delay
            delay = min(delay * 2, 2e-3)
            if waited > WAITING_AFTER_S and not said_waiting:
                # A member stalled this long is waiting for a peer: a hang autopard sees here
                # is the peer's, and the launcher leaves this program alone.
                channel.send("waiting", epoch=epoch)
                said_waiting = True
        work.wait()  # raises the collective's error
    finally:
        if said_waiting:
            channel.send("running", epoch=epoch)
