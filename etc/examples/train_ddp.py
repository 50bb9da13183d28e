#!/usr/bin/env python3
"""A small, deterministic PyTorch DDP training job (gloo on CPU) for autopar's local cluster.

It reads torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...), which autopar sets
in every task, so `srun python3 train_ddp.py` needs nothing else. Every rank trains on its own shard of
one fixed synthetic regression data set; the result depends only on the seed and the world size's
total batch, so runs can be compared exactly.

With autopar's Python module on PYTHONPATH (the repository's python/) and a job submitted with
--ckpt-dir/--ckpt-upload, it checkpoints every --ckpt-every steps (each rank writes its state and
commits it; autopard uploads it), sends a heartbeat after every step, and resumes from the step
autopar-launch restored when the job runs again (after a requeue).

Usage: train_ddp.py [--steps N] [--seed S] [--batch B] [--hidden H] [--lr LR] [--out FILE]
                    [--ckpt-every K] [--step-sleep SECONDS]
"""
import argparse
import gc
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

try:
    from autopar import ckpt  # also installs the stack dump for hang reports
except ImportError:  # autopar's python/ is not on PYTHONPATH: train without checkpoints
    ckpt = None


def make_data(seed: int, n: int, dim: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g)
    w = torch.randn(dim, 1, generator=g)
    y = torch.tanh(x @ w / 4) + 0.05 * torch.randn(n, 1, generator=g)
    return x, y


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--batch", type=int, default=64, help="global batch (samples per step)")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--out", default="", help="rank 0 writes the final state here")
    ap.add_argument("--ckpt-every", type=int, default=10, help="checkpoint every K steps")
    ap.add_argument("--step-sleep", type=float, default=0.0, help="pause per step (demos)")
    args = ap.parse_args()
    use_ckpt = ckpt is not None and ckpt.enabled()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    t0 = time.time()
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if rank == 0:
        print(f"train: {world} ranks on {os.environ.get('SLURM_JOB_NUM_NODES', '?')} nodes, "
              f"master {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}, "
              f"init {time.time() - t0:.2f}s", flush=True)
    if rank == 0 and os.environ.get("AUTOPAR_TP"):
        print(f"train: autopar plan tp={os.environ['AUTOPAR_TP']} pp={os.environ['AUTOPAR_PP']} "
              f"dp={os.environ['AUTOPAR_DP']} micro_batch={os.environ['AUTOPAR_MICRO_BATCH']} "
              f"recompute={os.environ['AUTOPAR_RECOMPUTE']} (for the model named by --model; this "
              f"small model trains with plain DDP)", flush=True)
    if args.batch % world:
        print(f"train: --batch {args.batch} is not divisible by {world} ranks", file=sys.stderr)
        return 2

    torch.manual_seed(args.seed)
    dim = 16
    model = nn.Sequential(nn.Linear(dim, args.hidden), nn.Tanh(), nn.Linear(args.hidden, 1))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    x, y = make_data(args.seed, 4096, dim)
    per_rank = args.batch // world

    start = 0
    resumed = ckpt.resume_step() if use_ckpt else None
    if resumed is not None:
        state = torch.load(os.path.join(ckpt.resume_dir(), "state.pt"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = resumed + 1
        if rank == 0:
            print(f"train: resumed from checkpoint step {resumed} "
                  f"(run {os.environ.get('SLURM_RESTART_COUNT', '0')})", flush=True)

    loss = torch.tensor(0.0)
    for step in range(start, args.steps):
        # Step s uses samples [s*B, (s+1)*B) of the data (wrapping); rank r takes its slice of them.
        start = (step * args.batch + rank * per_rank) % x.shape[0]
        idx = torch.arange(start, start + per_rank) % x.shape[0]
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x[idx]), y[idx])
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == args.steps - 1:
            # The step's loss over the whole global batch (the mean of the ranks' losses).
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            if rank == 0:
                print(f"train: step {step:4d} loss {mean.item() / world:.6f}", flush=True)
        if use_ckpt:
            ckpt.heartbeat(step, samples=args.batch, loss=loss.item())  # progress (docs/health.md)
            if (step + 1) % args.ckpt_every == 0:
                d = ckpt.step_dir(step)
                torch.save({"model": model.state_dict(), "opt": opt.state_dict()},
                           os.path.join(d, "state.pt"))
                ckpt.commit(step)  # returns at once; autopard uploads in the background
                if rank == 0:
                    print(f"train: checkpoint step {step} committed", flush=True)
        if args.step_sleep:
            time.sleep(args.step_sleep)

    # The mean loss over the whole data set, identical on every rank.
    with torch.no_grad():
        full = nn.functional.mse_loss(model(x), y).item()
    if rank == 0:
        print(f"train: done {args.steps} steps, final loss {full:.6f}", flush=True)
        if args.out:
            torch.save({k: v.clone() for k, v in model.state_dict().items()}, args.out)
    # torch 2.x over gloo: a DistributedDataParallel still alive at exit keeps its group until the
    # interpreter's final collection, where a gloo worker freeing its last work aborts the process
    # (exit 134, "terminate called without an active exception"). Free it while Python still runs.
    del ddp
    dist.destroy_process_group()
    gc.collect()
    return 0


if __name__ == "__main__":
    sys.exit(main())
