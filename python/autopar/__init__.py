"""autopar's Python helpers for training programs (standard library only).

    from autopar import ckpt
    start = (ckpt.resume_step() or -1) + 1      # restored by autopar-launch before the program ran
    ...
    d = ckpt.step_dir(step)                      # $AUTOPAR_CKPT_DIR/step-<N>/rank-<RANK>/
    torch.save(state, os.path.join(d, "model.pt"))
    ckpt.commit(step)                            # returns in milliseconds; autopard uploads it
"""
from . import ckpt  # noqa: F401

__all__ = ["ckpt"]
