#!/usr/bin/env python3
"""Tiny PyTorch DDP training (gloo, CPU) for tests/integration/test_launcher.py.

Run under autopar-launch (RANK, WORLD_SIZE, MASTER_ADDR/PORT from the launcher) it trains with
DistributedDataParallel, each rank on its shard of a fixed data set; run alone (no WORLD_SIZE) it
trains the same model on the whole data set in one process. Equal shards and a mean loss make
DDP's averaged gradient equal to the full-batch gradient, so both runs must end at the same loss
(up to float rounding). Rank 0 writes {"loss": final full-data loss, "world": N} to argv[1].
"""
import gc
import json
import os
import sys

import torch
import torch.distributed as dist

STEPS = 25
SAMPLES = 64  # divisible by 1, 2, 4, 8 ranks


def data():
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(SAMPLES, 8, generator=g)
    w = torch.randn(8, 1, generator=g)
    y = torch.tanh(x @ w) + 0.05 * torch.randn(SAMPLES, 1, generator=g)
    return x, y


def model():
    torch.manual_seed(42)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def main():
    out_path = sys.argv[1]
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.set_num_threads(1)
    x, y = data()
    net = model()
    train = net
    if world > 1:
        dist.init_process_group("gloo")  # env:// from the launcher's variables
        train = torch.nn.parallel.DistributedDataParallel(net)
    assert SAMPLES % world == 0
    xs, ys = x[rank::world], y[rank::world]
    opt = torch.optim.SGD(train.parameters(), lr=0.2)
    for _ in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(train(xs), ys)
        loss.backward()
        opt.step()
    with torch.no_grad():
        final = torch.nn.functional.mse_loss(net(x), y).item()
    if world > 1:
        # torch 2.x over gloo: a DistributedDataParallel still alive at exit keeps the group until the
        # interpreter's final collection, where a gloo worker freeing its last work aborts the process
        # (exit 134, "terminate called without an active exception"). Free it while Python still runs.
        del train
        dist.barrier()
        dist.destroy_process_group()
        gc.collect()
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"loss": final, "world": world}, f)


if __name__ == "__main__":
    main()
