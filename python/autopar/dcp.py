"""torch.distributed.checkpoint (DCP) under autopar (docs/ecosystem.md): a DCP checkpoint of any
layout (FSDP2's DTensors, tensor or pipeline shards, plain replicated state) written into the
node-local checkpoint directory and committed through autopard as one step, restored after a
restart, onto another world size too (DCP reshards).

    import torch.distributed.checkpoint.state_dict as sd
    from autopar import dcp as apdcp

    step = apdcp.load({"model": msd, "optim": osd})       # None: a fresh start
    ...
    pending = apdcp.async_save({"model": msd, "optim": osd}, step)
    ...                                                    # training goes on meanwhile
    apdcp.wait()                                           # before exit (or pending.result())

A DCP checkpoint is one step: every rank writes its own file (`__<rank>_0.distcp`) into its step
directory, rank 0 (DCP's coordinator) also the metadata, after every rank's file is written; each
rank commits when its part is done (the save's future), so the step is COMPLETE only with every
file and the metadata. The save runs in DCP's background thread on a gloo group of its own (made
at the first save, every rank at once), never on the training's.

Loading reads other ranks' files (DCP stores a replicated tensor once, and a resharded load reads
any shard): autopard restores a DCP step (rank 0's .metadata beside the .distcp files) whole on
every node, whatever the world size. That needs --ckpt-upload (or a --ckpt-dir every node
shares): a step only on the nodes' own disks (COMPLETE-LOCAL) cannot be loaded on several nodes,
and load() says so in one line. It reads through a private directory of hard links beside the
rank's restored one (every rank's files and rank 0's metadata).
"""
from __future__ import annotations

import os
import re
import threading
import time
from typing import Any, Dict, List, Optional

from . import ckpt
from ._from_rank0 import link_or_copy, make_view
from ._torch import require

require("autopar.dcp")
import torch.distributed as dist  # noqa: E402  (after the torch check)
import torch.distributed.checkpoint as dcp  # noqa: E402

__all__ = ["async_save", "save", "wait", "load", "PendingSave"]

METADATA = ".metadata"
_RANK_DIR = re.compile(r"rank-(\d+)$")

_group: Optional[Any] = None
_pending: List["PendingSave"] = []
_lock = threading.Lock()


def _save_group() -> Any:
    """The gloo group DCP's background saves use (made once, collectively)."""
    global _group
    if _group is None:
        _group = dist.new_group(backend="gloo")
    return _group


class PendingSave:
    """One step's asynchronous save: result() waits for the write and the commit, and returns
    autopard's commit reply; it raises what failed (the write, or the commit)."""

    def __init__(self, step: int, future: Any, staged_s: Optional[float] = None) -> None:
        self.step = step
        self._staged_s = staged_s  # the training's stall: staging, not the write behind it
        self._done = threading.Event()
        self._reply: Optional[Dict[str, Any]] = None
        self._error: Optional[BaseException] = None
        future.add_done_callback(self._written)

    def _written(self, future: Any) -> None:
        try:
            future.result()
            self._reply = ckpt.commit(self.step, save_s=self._staged_s) if ckpt.enabled() else {}
        except BaseException as e:  # handed to result()
            self._error = e
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        if not self._done.wait(timeout):
            raise TimeoutError(f"autopar.dcp: step {self.step}: not saved within {timeout} s")
        if self._error is not None:
            raise self._error
        return self._reply or {}


def _directory(step: int) -> str:
    """This rank's directory of `step`: its step directory under autopar, else ./dcp/step-N/rank-R."""
    if ckpt.enabled():
        return ckpt.step_dir(step)
    d = os.path.join(os.getcwd(), "dcp", f"step-{int(step)}", f"rank-{dist.get_rank()}")
    os.makedirs(d, exist_ok=True)
    return d


def async_save(state_dict: Dict[str, Any], step: int) -> PendingSave:
    """Starts saving `state_dict` (DCP's, e.g. from get_state_dict) as `step`: returns once the
    state is staged (copied off the training's tensors); the write and the commit go on in the
    background. At most one save is in flight: an earlier one is waited for first. Collective."""
    wait()
    began = time.monotonic()
    future = dcp.async_save(state_dict, checkpoint_id=_directory(step), process_group=_save_group())
    pending = PendingSave(int(step), future, time.monotonic() - began)
    with _lock:
        _pending.append(pending)
    return pending


def save(state_dict: Dict[str, Any], step: int) -> Dict[str, Any]:
    """async_save and wait for it: the commit's reply. Collective."""
    return async_save(state_dict, step).result()


def wait(timeout: Optional[float] = None) -> None:
    """Waits for every save still in flight; raises the first failure."""
    with _lock:
        pending = list(_pending)
        _pending.clear()
    for p in pending:
        p.result(timeout)


def _view(step_dir: str, own: str) -> str:
    """A private directory of hard links to every restored rank's DCP files and rank 0's metadata."""
    ranks = sorted(int(m.group(1)) for n in os.listdir(step_dir) if (m := _RANK_DIR.match(n)))
    saved = ckpt.resume_world_size() or len(ranks)
    missing = sorted(set(range(saved)) - set(ranks))
    if missing:
        raise ckpt.AutoparError(
            f"autopar.dcp: step {ckpt.resume_step()}: the files of rank(s) {missing[:8]} of {saved} are not on "
            f"this node ({step_dir}); a DCP checkpoint needs every rank's files, which autopard restores "
            f"from --ckpt-upload (a step kept only on the nodes' own disks cannot be loaded across nodes)")
    view = os.path.join(step_dir, f"dcp-view-{os.path.basename(own)}")
    make_view(view)
    for r in ranks:
        src = os.path.join(step_dir, f"rank-{r}")
        for name in os.listdir(src):
            if name.endswith(".distcp") or (r == 0 and name == METADATA):
                link_or_copy(os.path.join(src, name), os.path.join(view, name))
    if not os.path.exists(os.path.join(view, METADATA)):
        raise ckpt.AutoparError(f"autopar.dcp: step {ckpt.resume_step()}: rank 0's {METADATA} is not in "
                                f"{step_dir}/rank-0: not a DCP checkpoint")
    return view


def load(state_dict: Dict[str, Any]) -> Optional[int]:
    """Loads the restored step into `state_dict` in place (DCP's load: any world size, DCP
    reshards) and returns the step; None for a fresh start (nothing restored). Collective."""
    step = ckpt.resume_step() if ckpt.enabled() else None
    if step is None:
        return None
    own = ckpt.resume_dir() or ""
    step_dir = ckpt.resume_step_dir() or os.path.dirname(own)
    dcp.load(state_dict, checkpoint_id=_view(step_dir, own))
    return step
