#!/usr/bin/env python3
"""Deterministic PyTorch DDP training (gloo, CPU) for the failure/requeue tests: the
checkpointing training of ckpt_train.py (ddp_train.py: same model, data and bit-identical resume),
plus a fixed pause per step (so faults land mid-run) and one line per step on stdout ("train: rank
R step S time T run N port P", T = seconds since the epoch, N = TORCHELASTIC_RESTART_COUNT: requeues
and in-place restarts, else SLURM_RESTART_COUNT, P = MASTER_PORT) from which the tests
and bench/failure measure recovery time and steps lost. It sends a heartbeat after every step (every K-th with --heartbeat-every K).
With --obey-time-limit it follows autopard's time-limit request (docs/checkpoints.md): the ranks
agree on the step, checkpoint it and wait for the requeue.

With --oom-at STEP rank --oom-rank (1) of the first program allocates 4 GiB at that step: past its
memory cgroup's limit (--oom-by kernel, the job puts it in one) or past an address-space limit it
sets (--oom-by rlimit). Rank 0 prints the plan it runs with ("train: plan run N: micro_batch=...").

With --watch every rank's compute time per step goes to rank 0's heartbeat
(autopar.health.watch_ddp); with --slow-rank R the first program's rank R spends --slow-s (0.1)
seconds more in each forward pass (a straggler).

With --nan-at STEP the first program of the job (in-place generation 0 of its first run) turns
every weight into NaN before that step, so that its loss is NaN from that step on (the bad-loss
tests, docs/health.md); a restarted program trains normally.

Usage: requeue_train.py --steps N [--every K] [--out FILE] [--seed S] [--step-sleep SECONDS] [--wait]
                        [--obey-time-limit] [--nan-at STEP] [--heartbeat-every K]
                        [--oom-at STEP [--oom-rank R] [--oom-by kernel|rlimit]]
"""
import argparse
import os
import sys
import time

from autopar import ckpt, health, stacks

import ddp_train


def run_out_of_memory(how):
    """Allocates past a limit: the memory cgroup's (the kernel's OOM killer ends the process), or
    an address-space limit set here (the allocation fails: PyTorch raises an out-of-memory error)."""
    import torch
    if how == "rlimit":
        import resource
        with open("/proc/self/statm") as f:
            vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.RLIM_INFINITY))
    hog = torch.ones(1 << 30, dtype=torch.float32)  # 4 GiB, written
    print(f"train: allocated {hog.numel()} floats", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ddp_train.add_arguments(ap)
    ap.add_argument("--step-sleep", type=float, default=0.0)
    ap.add_argument("--obey-time-limit", action="store_true")
    ap.add_argument("--nan-at", type=int, default=-1)
    ap.add_argument("--heartbeat-every", type=int, default=1)
    ap.add_argument("--oom-at", type=int, default=-1)
    ap.add_argument("--oom-rank", type=int, default=1)
    ap.add_argument("--oom-by", choices=["kernel", "rlimit"], default="kernel")
    ap.add_argument("--watch", action="store_true")
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-s", type=float, default=0.1)
    ap.add_argument("--pad-mb", type=int, default=0, help="MiB more per rank in each checkpoint")
    args = ap.parse_args()
    pad = b"\x5a" * (args.pad_mb << 20)

    stacks.install()  # SIGUSR2 -> Python stacks into the hang report
    trainer = ddp_train.Trainer(args)
    rank = trainer.rank
    restart = ddp_train.restart_count()
    first_program = (os.environ.get("AUTOPAR_RESTART_GENERATION", "0") == "0"
                     and os.environ.get("SLURM_RESTART_COUNT", "0") == "0")
    if args.watch:
        health.watch_ddp(trainer.ddp)
    if args.slow_rank == rank and first_program:
        # A slow rank: its forward pass takes slow_s longer (an overloaded node, a slow GPU).
        trainer.model.register_forward_pre_hook(lambda module, inputs: time.sleep(args.slow_s))
    if rank == 0:
        plan = " ".join(f"{k[8:].lower()}={os.environ[k]}" for k in
                        ("AUTOPAR_TP", "AUTOPAR_PP", "AUTOPAR_DP", "AUTOPAR_MICRO_BATCH",
                         "AUTOPAR_GRAD_ACCUM", "AUTOPAR_RECOMPUTE", "AUTOPAR_RECOMPUTE_LAYERS",
                         "AUTOPAR_OPTIMIZER_SHARDING", "AUTOPAR_VPP")
                        if k in os.environ)
        print(f"train: plan run {restart}: {plan}", flush=True)
    for step in range(trainer.start, args.steps):
        if step == args.nan_at and first_program:
            trainer.poison()
        if step == args.oom_at and first_program and rank == args.oom_rank:
            run_out_of_memory(args.oom_by)
        loss = trainer.step(step)
        print(f"train: rank {rank} step {step} time {time.time():.3f} run {restart} "
              f"port {os.environ.get('MASTER_PORT', '')}", flush=True)
        # The step's samples over the job and (this rank's) loss: the job's progress (health).
        requested = False
        if ckpt.enabled() and step % args.heartbeat_every == 0:
            # A program that obeys the time limit wants the reply of this step's heartbeat (the
            # flag of the background one comes a heartbeat late): wait=True.
            requested = ckpt.heartbeat(step, samples=args.batch, loss=loss,
                                       wait=args.obey_time_limit)
        if args.step_sleep:
            time.sleep(args.step_sleep)
        time_limit = args.obey_time_limit and ckpt.time_limit_reached(requested, step)
        if time_limit and rank == 0:
            print(f"train: time limit: checkpointing step {step}", flush=True)
        if ckpt.enabled() and ((step + 1) % args.every == 0 or time_limit):
            trainer.save(step, pad)
        if time_limit:
            ckpt.wait_for_requeue()  # ended by the requeue; the next run resumes from `step`
    trainer.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
