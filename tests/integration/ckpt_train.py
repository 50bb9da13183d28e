#!/usr/bin/env python3
"""Deterministic PyTorch DDP training (gloo, CPU, ddp_train.py) that checkpoints through autopard
every K steps, for the checkpoint integration tests.

Usage: ckpt_train.py --steps N [--every K] [--out FILE] [--seed S] [--pad-mib M] [--wait]
  --pad-mib M   add M MiB of incompressible bytes per rank (to make uploads take a while)
  --wait        wait until this node's uploads are done before exiting
"""
import argparse
import os
import sys

from autopar import ckpt

import ddp_train


def main():
    ap = argparse.ArgumentParser()
    ddp_train.add_arguments(ap)
    ap.add_argument("--pad-mib", type=int, default=0)
    args = ap.parse_args()

    trainer = ddp_train.Trainer(args)
    pad = os.urandom(args.pad_mib << 20) if args.pad_mib else b""
    for step in range(trainer.start, args.steps):
        trainer.step(step)
        if ckpt.enabled():
            ckpt.heartbeat(step)
        if ckpt.enabled() and (step + 1) % args.every == 0:
            trainer.save(step, pad)
    trainer.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
