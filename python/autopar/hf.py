"""Hugging Face `transformers.Trainer` under autopar (docs/ecosystem.md): its saves become
autopar checkpoints, its restarts resume from autopar's latest complete one.

    from autopar.hf import AutoparCallback, resume_checkpoint
    trainer = Trainer(model, args, train_dataset=..., callbacks=[AutoparCallback()])
    trainer.train(resume_from_checkpoint=resume_checkpoint(args))

Each of Trainer's saves (`save_steps`, `checkpoint-<step>` under `output_dir`) is committed through
the node's autopard as step <global step>, each rank its own files, as Trainer wrote them: rank 0
the model, optimizer, scheduler, trainer state and its random state, every other rank its random
state (`rng_state_<rank>.pth`). Nothing is copied: the files are hard-linked into the rank's step
directory when they share a filesystem. Every step end is a heartbeat (hang detection, progress).

After a restart (in place, requeued), `resume_checkpoint(args)` is the directory Trainer resumes
from, None for a fresh start (and always None without autopar checkpoints, so the same program runs
without autopar). Rank 0's is its restored directory; every other rank, which Trainer also makes
load the model and optimizer, receives rank 0's restored files through the process group (gloo;
raw bytes, nothing unpickled) into a private directory beside its own restored one, with its own
random state.
"""
from __future__ import annotations

import os
import re
from typing import Any, List, Optional

from . import ckpt
from ._from_rank0 import link_or_copy, make_view, send_files
from ._torch import require

require("autopar.hf")
from transformers import TrainerCallback  # noqa: E402  (after the torch check)

__all__ = ["AutoparCallback", "resume_checkpoint"]

_RNG = re.compile(r"rng_state(_\d+)?\.pth$")


def _rng_name(args: Any) -> str:
    """The random state file Trainer writes for this process (transformers' _save_rng_state)."""
    return f"rng_state_{args.process_index}.pth" if args.world_size > 1 else "rng_state.pth"


def _own_files(args: Any, folder: str) -> List[str]:
    """The files of Trainer's checkpoint `folder` this rank commits: where Trainer saves the model
    (`args.should_save`: rank 0) every file but the other ranks' random states, elsewhere only its
    own random state."""
    mine = _rng_name(args)
    if not args.should_save:
        return [mine] if os.path.isfile(os.path.join(folder, mine)) else []
    return sorted(n for n in os.listdir(folder)
                  if os.path.isfile(os.path.join(folder, n)) and (not _RNG.match(n) or n == mine))


class AutoparCallback(TrainerCallback):  # type: ignore[misc]
    """Commits each of Trainer's saves through autopard and sends a heartbeat every step. When
    autopard asks for a checkpoint before the time limit, or the ranks' tasks get SIGTERM (a
    preemption's notice: docs/recovery.md), the step just finished is saved and committed at
    once and the ranks hold until the job is requeued (autopar.ckpt.time_limit_reached). Does
    nothing where the job has no autopar checkpoints (`autopar.ckpt.enabled()` False)."""

    def __init__(self) -> None:
        self._stopping = False

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not ckpt.enabled():
            return
        step = int(state.global_step)
        if ckpt.time_limit_reached(ckpt.heartbeat(step), step):  # every rank, every step
            self._stopping = True
            control.should_save = True
            control.should_training_stop = True

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not ckpt.enabled():
            return
        step = int(state.global_step)
        folder = os.path.join(args.output_dir, f"checkpoint-{step}")
        target = ckpt.step_dir(step)
        for name in _own_files(args, folder):
            link_or_copy(os.path.join(folder, name), os.path.join(target, name))
        ckpt.commit(step)
        if self._stopping:
            ckpt.wait_for_requeue()  # the next run resumes from this step


def resume_checkpoint(args: Any) -> Optional[str]:
    """The checkpoint directory for `trainer.train(resume_from_checkpoint=...)` (module doc), or
    None for a fresh start. `args`: the TrainingArguments, made first (they start the process
    group). Collective: every rank calls it."""
    if not ckpt.enabled() or ckpt.resume_step() is None:
        return None
    own = ckpt.resume_dir()
    if not own:
        raise ckpt.AutoparError("autopar.hf: AUTOPAR_RESUME_STEP is set but AUTOPAR_RESUME_DIR is not")
    if args.world_size == 1:
        return own
    view = os.path.join(os.path.dirname(own), f"hf-resume-rank-{args.process_index}")
    if args.process_index != 0:
        make_view(view)
    send_files(own if args.process_index == 0 else None, view, lambda name: not _RNG.match(name))
    if args.process_index == 0:
        return own
    mine = os.path.join(own, _rng_name(args))
    if os.path.isfile(mine):
        link_or_copy(mine, os.path.join(view, _rng_name(args)))
    return view
