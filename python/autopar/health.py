"""Stragglers (docs/health.md): what each rank's step costs it, before it waits for the
others. In synchronous data-parallel training every rank leaves the gradient all-reduce together,
so the step time alone cannot tell which rank held the others up; the time from the start of a
rank's forward pass to the moment its last gradient bucket is ready can.

    from autopar import health
    model = DistributedDataParallel(net)
    health.watch_ddp(model)      # once, before training; every rank

watch_ddp registers a forward pre-hook and a DDP communication hook (PyTorch's own all-reduce,
plus, with the last bucket of each step, one asynchronous all-reduce of a vector of one float per
rank, so rank 0 learns every rank's compute time of the step at no extra synchronisation). Rank 0's
next heartbeat (autopar.ckpt.heartbeat) carries the vector, and, once, the node of each rank; its
node's autopard flags a rank that stays slower than the job's median (docs/health.md).
"""
from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, List, Optional, Tuple

from . import ckpt

__all__ = ["watch_ddp"]


class _DdpWatch:
    def __init__(self, ddp: Any, process_group: Any = None) -> None:
        from ._torch import require

        require("autopar.health")
        import torch
        import torch.distributed as dist
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        self._torch, self._dist, self._allreduce = torch, dist, default_hooks.allreduce_hook
        self.group = process_group
        self.rank = dist.get_rank(process_group)
        self.world = dist.get_world_size(process_group)
        node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
        nodes: List[Any] = [None] * self.world
        dist.all_gather_object(nodes, node, group=process_group)
        self.nodes = [str(n) for n in nodes]
        self.nodes_sent = False
        self.lock = threading.Lock()
        self.start: Optional[float] = None
        self.pending: Optional[Tuple[Any, Any]] = None  # (work, tensor) of the step in flight
        self.last: Optional[List[float]] = None     # every rank's compute seconds of the last finished step
        ddp.register_forward_pre_hook(self._forward_pre)
        ddp.register_comm_hook(None, self._comm)

    def _collect(self) -> None:
        if self.pending is None:
            return
        work, times = self.pending
        self.pending = None
        work.wait()
        with self.lock:
            self.last = [round(float(t), 6) for t in times.tolist()]

    def _forward_pre(self, module: Any, args: Any) -> None:
        self._collect()  # the previous step's vector (its all-reduce finished with that step)
        self.start = time.monotonic()

    # Not annotated: DDP's register_comm_hook refuses a hook whose `bucket` or return annotation is
    # anything but GradBucket and Future[Tensor] (and this module's annotations are strings).
    def _comm(self, state, bucket):  # type: ignore[no-untyped-def]
        fut = self._allreduce(self.group, bucket)
        if bucket.is_last() and self.start is not None:
            times = self._torch.zeros(self.world, dtype=self._torch.float64)
            times[self.rank] = time.monotonic() - self.start
            work = self._dist.all_reduce(times, group=self.group, async_op=True)
            self.pending = (work, times)
        return fut

    def report(self) -> Tuple[Optional[List[float]], Optional[List[str]]]:
        """(every rank's compute seconds of the last finished step, the nodes once) for rank 0's
        heartbeat; (None, None) before the first step."""
        with self.lock:
            last = self.last
            nodes = None
            if last is not None and not self.nodes_sent:
                nodes, self.nodes_sent = self.nodes, True
        return last, nodes


def watch_ddp(ddp: Any, process_group: Any = None) -> _DdpWatch:
    """Measures every rank's compute time per step of `ddp` (a DistributedDataParallel module)
    for straggler detection; call it on every rank, once, before the first step. Returns the
    watch. Registering DDP's communication hook is allowed once per module: a program that needs
    its own hook cannot use this (it may send rank_compute_s itself, docs/health.md)."""
    watch = _DdpWatch(ddp, process_group)
    if watch.rank == 0:
        ckpt.report_ranks_with(watch.report)
    return watch
