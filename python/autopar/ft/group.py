"""The process group of one epoch of the fault-tolerant group (docs/ft.md): gloo, met on the store
the quorum names under the epoch's own prefix, so a new epoch never meets an old one's keys.
A collective is waited for beside the launcher's channel: when the launchers re-form the group
(a member is gone) the wait is given up at once instead of running into the collective's
timeout. torch 1.13's gloo cannot abort a collective: a given-up one is left to its thread and
its process group to time out (see _PAST)."""
from __future__ import annotations

import datetime
import select
from typing import Any, List, Optional

import torch
from torch.distributed import PrefixStore, ProcessGroupGloo, TCPStore

from .channel import Abandoned, LauncherChannel, Quorum


class Group:
    def __init__(self, timeout_s: float) -> None:
        self.timeout = datetime.timedelta(seconds=timeout_s)
        self.pg: Optional[Any] = None
        self.epoch = -1

    def reform(self, quorum: Quorum, rank: int) -> None:
        """The process group of `quorum` for this member (rank `rank`)."""
        if self.pg is not None:
            _keep_for_ever(self.pg)
        host, port = quorum.store.rsplit(":", 1)
        store = TCPStore(host, int(port), None, False, self.timeout)
        self.pg = ProcessGroupGloo(PrefixStore(f"autopar-ft/{quorum.epoch}", store),
                                   quorum.position(rank), len(quorum.members), self.timeout)
        self.epoch = quorum.epoch

    def allreduce(self, tensor: torch.Tensor, channel: LauncherChannel) -> None:
        """Sums `tensor` over the group in place. Raises Abandoned when the launcher gives this
        epoch up, RuntimeError when the collective broke (a member died)."""
        assert self.pg is not None
        wait(self.pg.allreduce([tensor]), channel, self.epoch)

    def broadcast(self, tensor: torch.Tensor, root: int, channel: LauncherChannel) -> None:
        assert self.pg is not None
        wait(self.pg.broadcast(tensor, root), channel, self.epoch)


# The process groups of past epochs. One may still run a collective its members gave up (gloo
# cannot abort it; it ends at the group's timeout), and destroying a gloo process group whose
# collective still runs ends the process (std::terminate), at the latest when the interpreter
# exits. So they are never destroyed: a reference the interpreter's teardown does not drop keeps
# each one (a few threads and sockets per failure survived) until the process exits.
_PAST: List[Any] = []


def _keep_for_ever(pg: Any) -> None:
    import ctypes
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(pg))
    _PAST.append(pg)


def wait(work: Any, channel: LauncherChannel, epoch: int) -> None:
    """Waits for `work`, or until the launcher says to give up `epoch` (Abandoned). Polled from
    the calling thread (a few microseconds, doubling to 2 ms between looks): a helper thread
    blocked in a given-up collective would be torn down inside C++ frames when the interpreter
    exits, which ends the process with std::terminate."""
    delay = 50e-6
    while not work.is_completed():
        ready, _, _ = select.select([channel], [], [], delay)
        if ready:
            channel.poll()
            if channel.abandoned_epoch >= epoch:
                raise Abandoned(f"epoch {epoch} given up")
        delay = min(delay * 2, 2e-3)
    work.wait()  # raises the collective's error
