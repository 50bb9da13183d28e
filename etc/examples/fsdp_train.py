#!/usr/bin/env python3
"""FSDP2 (`fully_shard`) over gloo on CPU with torch.distributed.checkpoint, under autopar: a small
next-token model whose parameters and optimizer state are sharded over every rank, saved with
DCP's async_save into the node-local checkpoint directory and committed through autopar
(autopar.dcp), restored after a restart, onto another world size too (DCP reshards). Without
autopar it trains the same (checkpoints under ./dcp, never restored).

    python3 fsdp_train.py OUT_DIR [--steps N] [--every K] [--step-sleep S]

The data of a step is the same whatever the world size (a global batch of 24 sequences, each rank
its slice), so a run that lost ranks trains on what the full one would have. Rank 0 prints the
SHA-256 of the full (gathered) model after each save and after a load, and writes OUT_DIR/final.json
at the end. Submit it with --ckpt-upload (autopard restores a DCP step whole on every node: its
ranks read each other's files). At a time-limit request or a preemption's SIGTERM every rank saves
the current step with DCP, commits it and holds for the requeue (autopar.ckpt.time_limit_reached):
the next run resumes from that step. tests/ecosystem/test_fsdp_dcp.py kills a rank of it, shrinks
it, and preempts it."""
import argparse
import hashlib
import json
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict, get_state_dict,
                                                     set_state_dict)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from autopar import ckpt
from autopar import dcp as apdcp

VOCAB, DIM, SEQ, GLOBAL_BATCH = 256, 128, 32, 24


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(DIM)
        self.up = torch.nn.Linear(DIM, 4 * DIM)
        self.down = torch.nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(3))
        self.head = torch.nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def batch(step: int, rank: int, world: int):
    """This rank's slice of step `step`'s global batch (the same global batch for any world size)."""
    g = torch.Generator().manual_seed(1000 + step)
    data = torch.randint(VOCAB, (GLOBAL_BATCH, SEQ + 1), generator=g)
    data[:, 1:] = (data[:, :-1] * 7 + 3) % VOCAB  # learnable: the next token follows from this one
    per = GLOBAL_BATCH // world
    mine = data[rank * per:(rank + 1) * per]
    return mine[:, :-1], mine[:, 1:]


def full_sha(model) -> str:
    """SHA-256 of the gathered model (collective; rank 0's is the one)."""
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    digest = hashlib.sha256()
    for name, t in sorted(full.items()):
        digest.update(name.encode())
        digest.update(t.detach().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--every", type=int, default=5)
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds of sleep a step (slower runs for tests)")
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if GLOBAL_BATCH % world:
        raise SystemExit(f"fsdp_train: {world} ranks do not divide the global batch of {GLOBAL_BATCH}")
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    model = Model()
    for b in model.blocks:
        fully_shard(b, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)

    msd, osd = get_state_dict(model, opt)
    start = apdcp.load({"model": msd, "optim": osd})
    if start is not None:
        set_state_dict(model, opt, model_state_dict=msd, optim_state_dict=osd)
        sha = full_sha(model)
        if rank == 0:
            print(f"fsdp_train: resumed step {start} on {world} ranks (written by "
                  f"{ckpt.resume_world_size()}), model sha256 {sha}", flush=True)
    step = start or 0
    loss = torch.tensor(float("nan"))
    while step < a.steps:
        x, y = batch(step, rank, world)
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        step += 1
        if a.step_sleep:
            time.sleep(a.step_sleep)
        requested = ckpt.heartbeat(step) if ckpt.enabled() else False
        if ckpt.time_limit_reached(requested, step):
            # The time limit, or a preemption's notice: this step, saved and committed, is where
            # the requeued run resumes; the program holds until Slurm ends it.
            apdcp.wait()  # a periodic save still in flight
            msd, osd = get_state_dict(model, opt)
            apdcp.save({"model": msd, "optim": osd}, step)
            sha = full_sha(model)
            if rank == 0:
                print(f"fsdp_train: saving step {step} on {world} ranks, model sha256 {sha}, "
                      f"loss {loss.item():.5f} (the last of this run)", flush=True)
            ckpt.wait_for_requeue()
        if step % a.every == 0:
            sha = full_sha(model)  # said before the save starts: a step COMPLETE has its line
            if rank == 0:
                print(f"fsdp_train: saving step {step} on {world} ranks, model sha256 {sha}, "
                      f"loss {loss.item():.5f}", flush=True)
            msd, osd = get_state_dict(model, opt)
            apdcp.async_save({"model": msd, "optim": osd}, step)
    apdcp.wait()
    sha = full_sha(model)
    total = loss.detach().clone()
    dist.all_reduce(total)
    if rank == 0:
        with open(os.path.join(a.out, "final.json"), "w") as f:
            json.dump({"params_sha256": sha, "loss": total.item() / world, "steps": step, "world": world,
                       "resumed_from": start}, f)
        print(f"fsdp_train: done, {step} steps on {world} ranks, loss {total.item() / world:.5f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
