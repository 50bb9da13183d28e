#!/usr/bin/env python3
"""Deterministic data-parallel training with a sharded optimizer (ZeRO-1) for the elastic tests
: gloo on CPU, a fixed global batch, Adam whose state (and the parameters' master copy)
is split across the data-parallel ranks as DTensors (Shard(0) of flat vectors on a 1-D device
mesh) and saved with DCP through autopar.dcp, so a run that loses a node goes on with fewer ranks
from its latest COMPLETE checkpoint (DCP reshards it onto the new mesh) and the same mathematics.

Every step takes the same GLOBAL samples whatever the data-parallel size D: rank r computes the
gradient of its G/D of them in AUTOPAR_GRAD_ACCUM micro-batches of AUTOPAR_MICRO_BATCH (the plan
of the allocation it runs on: srun's first, the launcher's after a shrink), the ranks sum the
gradients (all_reduce), each updates its own slice of the parameters with Adam, and the slices are
put together again (all_reduce of zero-padded slices: exact). Only the order in which floating-point
sums are added depends on D.

Per step, rank 0 prints "elastic: step S loss L world W dp D micro M accum A", and every rank
"train: rank R step S time T run N port P" (test_requeue_faults' helpers read those).

Usage: elastic_train.py --steps N [--every K] [--out FILE] [--seed S] [--step-sleep SECONDS]
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard

from autopar import ckpt, dcp as apdcp

DIM = 16


def make_data(seed, n):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, DIM, generator=g)
    w = torch.randn(DIM, 1, generator=g)
    y = torch.tanh(x @ w / 4) + 0.05 * torch.randn(n, 1, generator=g)
    return x, y


def shard_range(numel, dp, rank):
    """[lo, hi) of rank's Shard(0) of a flat tensor of numel elements (DTensor's chunking)."""
    chunk = -(-numel // dp)
    lo = min(rank * chunk, numel)
    return lo, min(lo + chunk, numel)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default="")
    ap.add_argument("--step-sleep", type=float, default=0.0)
    args = ap.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dp = int(os.environ.get("AUTOPAR_DP", world))
    micro = int(os.environ["AUTOPAR_MICRO_BATCH"])
    accum = int(os.environ["AUTOPAR_GRAD_ACCUM"])
    global_batch = int(os.environ["AUTOPAR_GLOBAL_BATCH"])
    assert dp == world and micro * accum * dp == global_batch, (dp, world, micro, accum, global_batch)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(DIM, 32), nn.Tanh(), nn.Linear(32, 1))
    params = nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    numel = params.numel()
    mesh = init_device_mesh("cpu", (dp,))
    lo, hi = shard_range(numel, dp, rank)

    def state(params_slice, m, v, t):
        """DCP's state: this rank's slices as shards of the whole vectors, the step count replicated."""
        def sharded(x):
            return DTensor.from_local(x, mesh, [Shard(0)], shape=(numel,), stride=(1,))
        return {"params": sharded(params_slice), "m": sharded(m), "v": sharded(v), "t": torch.tensor(t)}

    m = torch.zeros(hi - lo)
    v = torch.zeros(hi - lo)
    t = 0
    start = 0
    loaded = state(torch.zeros(hi - lo), torch.zeros(hi - lo), torch.zeros(hi - lo), 0)
    loaded["params"] = torch.zeros(numel)  # loaded whole (every saved shard) on every rank
    resumed = apdcp.load(loaded)
    if resumed is not None:
        params = loaded["params"]
        m, v, t = loaded["m"].to_local(), loaded["v"].to_local(), int(loaded["t"])
        assert m.numel() == hi - lo, (m.numel(), lo, hi)
        start = resumed + 1
        if rank == 0:
            print(f"elastic: resumed from step {resumed} written by {ckpt.resume_world_size()} "
                  f"ranks on {world}", flush=True)

    x, y = make_data(args.seed, 4096)
    n = x.shape[0]
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    per_rank = global_batch // dp
    for step in range(start, args.steps):
        nn.utils.vector_to_parameters(params, model.parameters())
        model.zero_grad()
        first = step * global_batch + rank * per_rank
        local_loss = torch.zeros(())
        for a in range(accum):
            idx = torch.arange(first + a * micro, first + (a + 1) * micro) % n
            loss = ((model(x[idx]) - y[idx]) ** 2).sum() / global_batch
            loss.backward()
            local_loss += loss.detach()
        grad = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        dist.all_reduce(grad)
        dist.all_reduce(local_loss)
        t += 1
        g = grad[lo:hi]
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        update = lr * (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps)
        gathered = torch.zeros(numel)
        gathered[lo:hi] = params[lo:hi] - update
        dist.all_reduce(gathered)
        params = gathered
        if rank == 0:
            print(f"elastic: step {step} loss {local_loss.item():.9e} world {world} dp {dp} "
                  f"micro {micro} accum {accum}", flush=True)
        print(f"train: rank {rank} step {step} time {time.time():.3f} run {restart} "
              f"port {os.environ.get('MASTER_PORT', '')}", flush=True)
        if ckpt.enabled():
            ckpt.heartbeat(step)
        if args.step_sleep:
            time.sleep(args.step_sleep)
        if ckpt.enabled() and (step + 1) % args.every == 0:
            apdcp.save(state(params[lo:hi].clone(), m.clone(), v.clone(), t), step)
    apdcp.wait()
    dist.barrier()
    if rank == 0 and args.out:
        torch.save({"params": params}, args.out)
        print(f"elastic: done {args.steps} steps", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
