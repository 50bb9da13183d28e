"""The fault-tolerant data-parallel step (docs/ft.md): a Manager holds the program's place in the
group, averages its gradients over the members, and decides per step whether the step commits.

    manager = ft.Manager(model, optimizer, global_batch=64)
    while manager.step < steps:
        ids = manager.begin_step()            # this member's sample ids of manager.step
        loss = loss_fn(model(x[ids]), y[ids])  # a mean over its samples
        loss.backward()
        manager.commit(loss)                  # True: the step is applied; False: it is redone

A step commits when every member's gradients reached the sum (the group's collective completed)
and every member's loss was finite; the optimizer then steps on the same averaged gradients
everywhere. A step that does not commit leaves the state as it was: the program runs it again,
in the group the launchers re-form when a member is gone. A member that joins without state (a
replacement, a spare) receives it from a live member, never from storage.
"""
from __future__ import annotations

import ctypes
import math
import os
import socket
import time
from typing import Any, Dict, List, Mapping, Optional

import torch

from .. import ckpt
from . import shards, state
from .channel import Abandoned, LauncherChannel, Quorum
from .group import Group
from .store import StoreServer, job_key


class Manager:
    """model and optimizer (and any other object with state_dict/load_state_dict in `extra`)
    are the state a newcomer receives. `step`: the steps already committed (a run restored from a
    checkpoint starts there). `ledger_dir`: each committed step's samples, one file per rank
    (shards.check_ledger reads them)."""

    # A step whose loss is not finite is discarded and redone this many times before the run
    # gives up on it (the same data fails the same way: that is not a transient fault).
    MAX_BAD_REDOS = 3

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, *, global_batch: int,
                 extra: Optional[Mapping[str, state.Stateful]] = None, step: int = 0,
                 channel: Optional[LauncherChannel] = None, ledger_dir: Optional[str] = None,
                 timeout_s: float = 300.0) -> None:
        if global_batch < 1:
            raise ValueError(f"global_batch: must be >= 1, got {global_batch}")
        why = state.sharded(model, optimizer)
        if why is not None:
            raise ValueError(f"autopar.ft: this rank's state is sharded: {why}; per-step fault "
                             "tolerance heals and averages only a state every rank holds whole "
                             "(docs/ft.md, \"Limits\"): leave --fault-tolerance=step off for a "
                             "sharded model")
        self.model = model
        self.optimizer = optimizer
        self.objects: Dict[str, state.Stateful] = {"model": model, "optimizer": optimizer, **(extra or {})}
        self.global_batch = global_batch
        self.rank = int(os.environ.get("RANK", "0"))
        self.step = step
        self.has_state = os.environ.get("AUTOPAR_FT_NEWCOMER") != "1"
        self.channel = channel or LauncherChannel()
        self.key = job_key()  # only the job's own ranks hold it: the store, the heals
        self.group = Group(timeout_s, self.key)
        self.quorum: Optional[Quorum] = None
        self.ledger_dir = ledger_dir or os.environ.get("AUTOPAR_FT_LEDGER") or None
        self.stats = {"committed": 0, "discarded": 0, "healed_bytes": 0, "epochs": 0}
        self._broken = True  # no group yet
        self._ids: range = range(0)
        self._bad_redos = 0
        self._interrupted: Optional[int] = None  # a step whose group broke, not said yet
        self._heartbeats = bool(os.environ.get("SLURM_JOB_ID") and os.environ.get("AUTOPAR_SOCKET"))
        if self._heartbeats:
            ckpt.lead_when(self.leads)
        addr = os.environ.get("AUTOPAR_FT_ADDR") or socket.gethostbyname(socket.gethostname())
        # Every member serves a store; the quorum picks whose the group meets on, so no single
        # program's loss leaves the group without one.
        self._store = StoreServer(self.key, addr)
        self.store_endpoint = f"{addr}:{self._store.port}"
        # Never freed, not even while the interpreter is torn down: a member's thread still making
        # a given-up epoch's group may wait on this store, and one woken by its end then would come
        # back into Python during the teardown, which ends the process with SIGABRT (the crash
        # bench's rank 0, which served the group's store, after its last step). The process's
        # exit closes it.
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(self._store))

    def leads(self) -> bool:
        """Whether this member is the group's lowest rank: the one whose heartbeats carry the job's
        progress to autopard when rank 0 is not in the group (a node lost without a spare)."""
        q = self.quorum
        return q is not None and bool(q.members) and q.members[0].rank == self.rank

    @property
    def world(self) -> int:
        return len(self.quorum.members) if self.quorum else 0

    def begin_step(self) -> range:
        """Starts manager.step (joining a new quorum first when the group changed); this member's
        sample ids for it."""
        self.optimizer.zero_grad(set_to_none=False)
        while self._broken:
            self._join()
        assert self.quorum is not None
        self._ids = shards.sample_ids(self.step, self.global_batch, self.world,
                                      self.quorum.position(self.rank))
        return self._ids

    def commit(self, loss: Any) -> bool:
        """Averages the gradients over the group (weighted by each member's samples) and applies
        the step when it is whole everywhere; False when it was discarded (run it again)."""
        assert self.quorum is not None, "commit() before begin_step()"
        params = [p for p in self.model.parameters() if p.requires_grad]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        count = float(len(self._ids))
        finite = 1.0 if math.isfinite(float(loss.detach() if isinstance(loss, torch.Tensor) else loss)) else 0.0
        flat = torch.cat([g.reshape(-1) * count for g in grads] +
                         [torch.tensor([count, finite], dtype=grads[0].dtype if grads else torch.float32)])
        try:
            self.group.allreduce(flat, self.channel)
        except (Abandoned, RuntimeError):
            self.group.sever()  # peers still waiting in this collective fail at once
            self._broken = True
            self.stats["discarded"] += 1
            self._interrupted = self.step
            return False
        total, finite_members = float(flat[-2]), float(flat[-1])
        if finite_members != self.world or total != self.global_batch:
            return self._bad_step(total, finite_members)
        offset = 0
        for p, g in zip(params, grads):
            n = g.numel()
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            p.grad.copy_(flat[offset:offset + n].view_as(p) / self.global_batch)
            offset += n
        self.optimizer.step()
        self._committed(float(loss))
        return True

    def _committed(self, loss: float) -> None:
        if self.ledger_dir:
            with open(os.path.join(self.ledger_dir, f"rank-{self.rank}.jsonl"), "a") as f:
                f.write(shards.ledger_line(self.step, self.quorum.epoch if self.quorum else -1,
                                           self.global_batch, self.quorum.ranks if self.quorum else []))
        self.step += 1
        self.stats["committed"] += 1
        self._bad_redos = 0
        if self._heartbeats:
            # autopard's hang watch and progress (docs/health.md); sent in the background.
            ckpt.heartbeat(self.step, samples=self.global_batch, loss=loss)

    def _bad_step(self, total: float, finite_members: float) -> bool:
        self.stats["discarded"] += 1
        if total != self.global_batch:
            raise RuntimeError(f"autopar.ft: step {self.step}: the group summed {total:.0f} samples, "
                               f"not the global batch {self.global_batch}")
        self._bad_redos += 1
        self._say_discarded(self.step, "loss-not-finite", members=int(self.world - finite_members),
                            attempt=self._bad_redos)
        if self._bad_redos > self.MAX_BAD_REDOS:
            raise FloatingPointError(f"autopar.ft: step {self.step}: the loss was not finite on "
                                     f"{self.world - finite_members:.0f} member(s) "
                                     f"{self._bad_redos} times in a row")
        return False

    def _join(self) -> None:
        """Asks the launchers for the next quorum and takes this member's place in it: the new
        process group, and the state from a live member when this one is behind."""
        left = self.quorum.epoch if self.quorum else -1
        q = self.channel.join(left, self.step if self.has_state else -1, self.store_endpoint)
        try:
            self.group.reform(q, self.rank, self.channel)
            self._heal(q)
        except (Abandoned, RuntimeError, OSError):  # OSError: a store that cannot be reached
            self.group.sever()  # a handover's peer still waiting in it fails at once
            self.quorum = q  # the next join leaves this epoch
            return
        self.quorum = q
        self.step = q.step
        self.has_state = True
        self.stats["epochs"] += 1
        self._broken = False
        if self._interrupted is not None and self._interrupted >= q.step:
            self._say_discarded(self._interrupted, "group-changed", epoch=q.epoch)
        self._interrupted = None

    def _say_discarded(self, step: int, reason: str, **fields: object) -> None:
        """The timeline's record of a step nobody committed (ft_discarded): said once, by the
        group's first member (every member discarded it)."""
        if self.quorum is not None and self.quorum.position(self.rank) == 0:
            self.channel.send("discarded", step=step, reason=reason, **fields)

    def _heal(self, q: Quorum) -> None:
        me = self.rank
        if q.epoch == 0 or not any(frm == me or to == me for to, frm in q.heals):
            if q.epoch == 0:
                self._broadcast_initial(q)
            return
        assert self.group.pg is not None
        mine: Optional[memoryview] = None  # serialized once for every newcomer it heals
        seal = b""
        for i, (to, frm) in enumerate(q.heals):
            tag = 2 * i + 1
            if frm == me:
                if mine is None:
                    mine = state.dump(self.objects, self.step)
                    seal = state.seal(self.key, mine, q.epoch, me)
                state.send(self.group, mine, seal, q.position(to), tag, self.channel)
            elif to == me:
                start = time.monotonic()
                data, header = state.recv(self.group, q.position(frm), tag, self.channel)
                state.load(self.objects, state.unseal(self.key, data, header, q.epoch, frm))
                self.stats["healed_bytes"] += len(data)
                self.channel.send("healed", step=q.step, epoch=q.epoch, **{"from": frm},
                                  bytes=len(data), seconds=f"{time.monotonic() - start:.3f}")

    def _broadcast_initial(self, q: Quorum) -> None:
        """The group's first epoch starts every member from the lowest member's parameters (as
        DistributedDataParallel does at its start)."""
        for p in self.model.parameters():
            self.group.broadcast(p.data, 0, self.channel)
