"""PyTorch Lightning under autopar (docs/ecosystem.md): its checkpoints become autopar checkpoints,
its restarts resume from autopar's latest complete one.

    from autopar.lightning import AutoparCheckpoint, AutoparCheckpointIO, resume_path
    trainer = Trainer(strategy="ddp", callbacks=[AutoparCheckpoint(every_n_epochs=1)],
                      plugins=[AutoparCheckpointIO()], ...)
    trainer.fit(model, ckpt_path=resume_path(), weights_only=True)

Under `srun autopar-launch`, Lightning takes its ranks from the variables autopar-launch sets
(TORCHELASTIC_RUN_ID makes it choose its TorchElasticEnvironment: RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT), not from SLURM_*: `devices` and `num_nodes` must multiply to WORLD_SIZE,
as for torchrun (`trainer_layout()` gives them).

Each checkpoint AutoparCheckpoint saves (a ModelCheckpoint: every_n_epochs, every_n_train_steps,
...) is committed as autopar step <global step> by every rank: rank 0 the checkpoint file Lightning
wrote (hard-linked as lightning.ckpt), every other rank a record of its part (rank.json), since
Lightning writes one file for all; every training batch's end is a heartbeat. After a restart resume_path() names lightning.ckpt in the
rank's restored directory on rank 0 (None for a fresh start, and without autopar checkpoints);
on every other rank the same file in a private directory beside its restored one, which
AutoparCheckpointIO fills when Lightning loads it (every rank at once, inside fit): rank 0's,
sent over the process group (gloo, raw bytes), which those ranks load with weights_only=True
whatever fit was given (tensors and plain values only, whoever sent the bytes).
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

from . import ckpt
from ._torch import require
from ._from_rank0 import link_or_copy, make_view, send_files

require("autopar.lightning")
from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402  (after the torch check)
from lightning.pytorch.plugins.io import TorchCheckpointIO  # noqa: E402

__all__ = ["AutoparCheckpoint", "AutoparCheckpointIO", "resume_path", "trainer_layout"]

CHECKPOINT = "lightning.ckpt"
RANK_RECORD = "rank.json"


def trainer_layout() -> Dict[str, int]:
    """Trainer(devices=..., num_nodes=...) for the step autopar-launch started: LOCAL_WORLD_SIZE
    ranks on each of WORLD_SIZE / LOCAL_WORLD_SIZE nodes."""
    world, local = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if world % local:
        raise ckpt.AutoparError(f"autopar.lightning: WORLD_SIZE={world} is not a multiple of "
                                f"LOCAL_WORLD_SIZE={local}: the nodes run different numbers of ranks")
    return {"devices": local, "num_nodes": world // local}


class AutoparCheckpoint(ModelCheckpoint):  # type: ignore[misc]
    """A ModelCheckpoint whose every save is also an autopar commit (module doc); its arguments are
    ModelCheckpoint's. When autopard asks for a checkpoint before the time limit, or the ranks'
    tasks get SIGTERM (a preemption's notice: from training's start autopar's handler replaces
    Lightning's, which would end fit), the batch just finished is saved and committed at once
    and the ranks hold until the job is requeued (docs/recovery.md).
    Without autopar checkpoints it is a plain ModelCheckpoint."""

    def on_train_start(self, trainer: Any, *args: Any, **kwargs: Any) -> None:
        super().on_train_start(trainer, *args, **kwargs)
        if ckpt.enabled():
            # Lightning's own handler (installed at fit's start) would end fit at the next batch,
            # with a collective inside the signal handler: the notice is autopar's from here on.
            ckpt.take_sigterm()

    def on_train_batch_end(self, trainer: Any, *args: Any, **kwargs: Any) -> None:
        super().on_train_batch_end(trainer, *args, **kwargs)
        if not ckpt.enabled():
            return
        step = int(trainer.global_step)
        requested = ckpt.heartbeat(step)
        terminated = bool(getattr(trainer, "received_sigterm", False))  # before on_train_start
        if ckpt.time_limit_reached(requested, step, terminated=terminated):  # every rank
            self._save_checkpoint(trainer, os.path.join(self.dirpath or trainer.default_root_dir,
                                                        f"autopar-step-{step}.ckpt"))
            ckpt.wait_for_requeue()  # the next run resumes from this step

    def _save_checkpoint(self, trainer: Any, filepath: str) -> None:
        super()._save_checkpoint(trainer, filepath)  # every rank; rank 0 writes, then a barrier
        if not ckpt.enabled():
            return
        step = int(trainer.global_step)
        target = ckpt.step_dir(step)
        if trainer.is_global_zero:
            link_or_copy(filepath, os.path.join(target, CHECKPOINT))
        record = os.path.join(target, RANK_RECORD)
        with open(record + ".tmp", "w") as f:
            json.dump({"rank": trainer.global_rank, "world_size": trainer.world_size, "step": step,
                       "checkpoint": os.path.basename(filepath)}, f)
        os.replace(record + ".tmp", record)
        ckpt.commit(step)


def _received_dir(rank: int) -> str:
    """Where a rank other than 0 receives rank 0's checkpoint: beside its own restored directory."""
    return os.path.join(os.path.dirname(ckpt.resume_dir() or ""), f"lightning-resume-rank-{rank}")


def resume_path() -> Optional[str]:
    """`ckpt_path` for trainer.fit after a restart (module doc), or None."""
    if not ckpt.enabled() or ckpt.resume_step() is None or not ckpt.resume_dir():
        return None
    rank = ckpt.rank()
    return os.path.join(ckpt.resume_dir() or "" if rank == 0 else _received_dir(rank), CHECKPOINT)


class AutoparCheckpointIO(TorchCheckpointIO):  # type: ignore[misc]
    """Lightning's own checkpoint IO, but loading autopar's resumed checkpoint gives every rank
    rank 0's file first (module doc)."""

    def load_checkpoint(self, path: Any, map_location: Any = None, weights_only: Optional[bool] = None) -> Any:
        import torch.distributed as dist

        resumed = resume_path()
        if resumed is not None and str(path) == resumed and dist.is_initialized() and dist.get_world_size() > 1:
            rank = dist.get_rank()
            dest = os.path.dirname(resumed)
            if rank != 0:
                make_view(dest)
            send_files(dest if rank == 0 else None, dest, lambda name: name == CHECKPOINT)
            if rank != 0:
                weights_only = True  # bytes from another process: tensors and plain values only
        return super().load_checkpoint(path, map_location=map_location, weights_only=weights_only)
