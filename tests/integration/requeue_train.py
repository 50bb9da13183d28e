#!/usr/bin/python3
"""Deterministic PyTorch DDP training (gloo, CPU) for the failure/requeue tests (issue 6): the
checkpointing training of ckpt_train.py (same model, data and bit-identical resume), plus a fixed
pause per step (so faults land mid-run) and one line per step on stdout ("train: rank R step S
time T run N", T = seconds since the epoch, N = SLURM_RESTART_COUNT) from which the tests and
bench/failure measure recovery time and steps lost. It sends a heartbeat after every step.
With --obey-time-limit it follows autopard's time-limit request (docs/checkpoints.md): the ranks
agree on the step, checkpoint it and wait for the requeue.

Usage: requeue_train.py --steps N [--every K] [--out FILE] [--seed S] [--step-sleep SECONDS] [--wait]
                        [--obey-time-limit]
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

from autopar import ckpt, stacks


def make_data(seed, n, dim):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g)
    w = torch.randn(dim, 1, generator=g)
    y = torch.tanh(x @ w / 4) + 0.05 * torch.randn(n, 1, generator=g)
    return x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--every", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--out", default="")
    ap.add_argument("--step-sleep", type=float, default=0.0)
    ap.add_argument("--wait", action="store_true")
    ap.add_argument("--obey-time-limit", action="store_true")
    args = ap.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    stacks.install()  # SIGUSR2 -> Python stacks into the hang report
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(args.seed)
    dim = 16
    model = nn.Sequential(nn.Linear(dim, 32), nn.Tanh(), nn.Linear(32, 1))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    x, y = make_data(args.seed, 4096, dim)
    per_rank = args.batch // world

    # DDP lays out its gradient buckets anew after the first backward pass, and gloo's ring
    # allreduce sums an element in an order that depends on its position: one warm-up backward
    # (no optimizer step) makes every trained step use the final layout, so a resumed run adds
    # in the same order as an uninterrupted one and the results are bit-identical.
    ddp(x[:per_rank]).sum().backward()
    opt.zero_grad()

    start = 0
    resumed = ckpt.resume_step()
    if resumed is not None:
        state = torch.load(os.path.join(ckpt.resume_dir(), "state.pt"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        with open(os.path.join(ckpt.resume_dir(), "rank.txt")) as f:
            assert f.read() == f"rank {rank} step {resumed}\n"
        start = resumed + 1
        if rank == 0:
            print(f"train: resumed from step {resumed}", flush=True)

    restart = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
    commit_ms = []
    for step in range(start, args.steps):
        s0 = (step * args.batch + rank * per_rank) % x.shape[0]
        idx = torch.arange(s0, s0 + per_rank) % x.shape[0]
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x[idx]), y[idx])
        loss.backward()
        opt.step()
        print(f"train: rank {rank} step {step} time {time.time():.3f} run {restart}", flush=True)
        requested = ckpt.heartbeat(step) if ckpt.enabled() else False
        if args.step_sleep:
            time.sleep(args.step_sleep)
        time_limit = args.obey_time_limit and ckpt.time_limit_reached(requested, step)
        if time_limit and rank == 0:
            print(f"train: time limit: checkpointing step {step}", flush=True)
        if ckpt.enabled() and ((step + 1) % args.every == 0 or time_limit):
            d = ckpt.step_dir(step)
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()},
                       os.path.join(d, "state.pt"))
            with open(os.path.join(d, "rank.txt"), "w") as f:
                f.write(f"rank {rank} step {step}\n")
            t = time.perf_counter()
            ckpt.commit(step)
            commit_ms.append((time.perf_counter() - t) * 1000)
        if time_limit:
            ckpt.wait_for_requeue()  # ended by the requeue; the next run resumes from `step`
    if commit_ms:
        print(f"train: rank {rank} committed {len(commit_ms)} steps, "
              f"max commit {max(commit_ms):.2f} ms", flush=True)
    if args.wait and ckpt.enabled():
        ckpt.wait_uploads(timeout=300)
    dist.barrier()
    if rank == 0 and args.out:
        torch.save({k: v.clone() for k, v in model.state_dict().items()}, args.out)
        print(f"train: done {args.steps} steps", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
