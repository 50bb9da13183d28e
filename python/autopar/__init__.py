"""autopar's Python helpers for training programs (standard library only).

    from autopar import ckpt
    start = (ckpt.resume_step() or -1) + 1      # restored by autopar-launch before the program ran
    ...
    d = ckpt.step_dir(step)                      # $AUTOPAR_CKPT_DIR/step-<N>/rank-<RANK>/
    torch.save(state, os.path.join(d, "model.pt"))
    ckpt.commit(step)                            # returns in milliseconds; autopard uploads it

Outside the job, autopar.jobs submits and follows jobs (docs/python.md):

    from autopar import jobs
    job = jobs.submit(command="python train.py", nodes=2, gpu_count=8, model="llama-2-7b", ...)
    job.wait(); job.events(); job.checkpoints(); job.plan()

Inside a Slurm job, importing autopar (any of its modules) also installs the Python stack dump for
hang reports (autopar.stacks.install(): faulthandler on SIGUSR2), so a hung job's timeline shows
where each rank's Python threads were. Opt out with AUTOPAR_STACKS=0 in the job's environment
(e.g. when the program uses SIGUSR2 itself). It also writes an uncaught exception to
TORCHELASTIC_ERROR_FILE (autopar.errors), so that autopar-launch can tell an out-of-memory failure.
"""
from __future__ import annotations

from . import ckpt  # noqa: F401
from . import errors
from . import stacks

__all__ = ["ckpt", "errors", "stacks"]

stacks.install_by_default()
errors.install_by_default()
