"""The deterministic PyTorch DDP training (gloo, CPU) that ckpt_train.py and requeue_train.py run,
checkpointing through autopard with the stdlib-only module `autopar.ckpt` (python/autopar).

Every rank holds the full model (DDP); a checkpoint of step N is the model and the optimizer state
(SGD momentum) in ckpt.step_dir(N)/state.pt plus a rank-specific file, then a commit. On start, if
autopar-launch restored a step (AUTOPAR_RESUME_STEP), training continues after it: the result is
bit-identical to an uninterrupted run because the data of step s depends only on s.
"""
import gc
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn

from autopar import ckpt


def add_arguments(ap):
    """The options both scripts take."""
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--every", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--out", default="")
    ap.add_argument("--wait", action="store_true")


def make_data(seed, n, dim):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g)
    w = torch.randn(dim, 1, generator=g)
    y = torch.tanh(x @ w / 4) + 0.05 * torch.randn(n, 1, generator=g)
    return x, y


def restart_count() -> int:
    """The program's run: TORCHELASTIC_RESTART_COUNT (autopar-launch counts requeues and in-place
    restarts in it), else SLURM_RESTART_COUNT."""
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT",
                              os.environ.get("SLURM_RESTART_COUNT", "0")))


class Trainer:
    """Joins the process group, builds the model and resumes from the restored step, if any:
    train from `start`, calling step(s) and, to checkpoint, save(s); then finish()."""

    def __init__(self, args):
        self.args = args
        self.rank, self.world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group("gloo", rank=self.rank, world_size=self.world)
        torch.manual_seed(args.seed)
        dim = 16
        self.model = nn.Sequential(nn.Linear(dim, 32), nn.Tanh(), nn.Linear(32, 1))
        self.ddp = nn.parallel.DistributedDataParallel(self.model)
        self.opt = torch.optim.SGD(self.ddp.parameters(), lr=0.1, momentum=0.9)
        self.x, self.y = make_data(args.seed, 4096, dim)
        self.per_rank = args.batch // self.world
        self.commit_ms = []

        # DDP lays out its gradient buckets anew after the first backward pass, and gloo's ring
        # allreduce sums an element in an order that depends on its position: one warm-up backward
        # (no optimizer step) makes every trained step use the final layout, so a resumed run adds
        # in the same order as an uninterrupted one and the results are bit-identical.
        self.ddp(self.x[:self.per_rank]).sum().backward()
        self.opt.zero_grad()

        self.start = 0
        resumed = ckpt.resume_step()
        if resumed is not None:
            state = torch.load(os.path.join(ckpt.resume_dir(), "state.pt"))
            self.model.load_state_dict(state["model"])
            self.opt.load_state_dict(state["opt"])
            with open(os.path.join(ckpt.resume_dir(), "rank.txt")) as f:
                assert f.read() == f"rank {self.rank} step {resumed}\n"
            self.start = resumed + 1
            # Every rank says what it loaded itself: the tests prove a resume with it (the final
            # model cannot tell one from a restart at step 0, a step's data depending only on
            # the step).
            print(f"train: rank {self.rank} resumed from step {resumed} run {restart_count()}",
                  flush=True)

    def step(self, step):
        n = self.x.shape[0]
        s0 = (step * self.args.batch + self.rank * self.per_rank) % n
        idx = torch.arange(s0, s0 + self.per_rank) % n
        self.opt.zero_grad()
        loss = nn.functional.mse_loss(self.ddp(self.x[idx]), self.y[idx])
        loss.backward()
        self.opt.step()
        return loss.item()  # this rank's loss of the step

    def poison(self):
        """Every weight NaN: the loss is NaN from the next step on (a diverged run)."""
        with torch.no_grad():
            for p in self.model.parameters():
                p.fill_(float("nan"))

    def save(self, step, pad=b""):
        """Checkpoints `step` (with `pad` as an extra file when given) and commits it."""
        d = ckpt.step_dir(step)
        torch.save({"model": self.model.state_dict(), "opt": self.opt.state_dict()},
                   os.path.join(d, "state.pt"))
        with open(os.path.join(d, "rank.txt"), "w") as f:
            f.write(f"rank {self.rank} step {step}\n")
        if pad:
            with open(os.path.join(d, "pad.bin"), "wb") as f:
                f.write(pad)
        t = time.perf_counter()
        ckpt.commit(step)
        self.commit_ms.append((time.perf_counter() - t) * 1000)

    def finish(self):
        """Reports the commit times, waits for uploads (--wait), writes the model (--out, rank 0)."""
        if self.commit_ms:
            print(f"train: rank {self.rank} committed {len(self.commit_ms)} steps, "
                  f"max commit {max(self.commit_ms):.2f} ms", flush=True)
        if self.args.wait and ckpt.enabled():
            ckpt.wait_uploads(timeout=300)
        dist.barrier()
        if self.rank == 0 and self.args.out:
            torch.save({k: v.clone() for k, v in self.model.state_dict().items()}, self.args.out)
            print(f"train: done {self.args.steps} steps", flush=True)
        # torch 2.x over gloo: a DistributedDataParallel still alive at exit keeps its group until the
        # interpreter's final collection, where a gloo worker freeing its last work aborts the process
        # (exit 134, "terminate called without an active exception"). Free it while Python still runs.
        del self.ddp
        dist.destroy_process_group()
        gc.collect()
