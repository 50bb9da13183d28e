"""Per-step fault tolerance, a runnable example (docs/ft.md): a small regression model trained
data-parallel on autopar.ft (gloo on CPU). Submitted with --fault-tolerance=step (ft_train.sbatch),
a rank whose program crashes or hangs is replaced alone and healed from a live rank while every
other rank goes on; the result is bit for bit the run's without the fault.

    python3 ft_train.py --steps 200 [--global-batch 64] [--step-sleep 0.05] [--out DIR]

What the program holds to (docs/ft.md): its data is a pure function of the sample id
(manager.begin_step() says which ids this rank trains on), its loss is a mean over its samples,
and its whole state is the model and the optimizer it hands the Manager. --out DIR: each rank
writes DIR/rank-R.json at the end (its PID, the SHA-256 of its model and optimizer state, what
its Manager did, the step it started at), so two runs can be compared. Under --ckpt-dir or
--ckpt-upload it checkpoints every --ckpt-every steps, the fallback when the group cannot go on.
"""
import argparse
import hashlib
import json
import os
import time

import torch

from autopar import ckpt, ft


def state_sha256(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> str:
    h = hashlib.sha256()
    for t in model.state_dict().values():
        h.update(t.numpy().tobytes())
    for s in optimizer.state_dict()["state"].values():
        for v in s.values():
            h.update(v.numpy().tobytes() if torch.is_tensor(v) else repr(v).encode())
    return h.hexdigest()


def restore(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """The first step to run: after the step autopar restored before the program started (a
    restart of every program, or a requeue, under --ckpt-dir/--ckpt-upload), else 0. A newcomer to
    the fault-tolerant group is given no checkpoint: it receives the state from a live member."""
    resumed = ckpt.resume_step() if ckpt.enabled() else None
    if resumed is None:
        return 0
    state = torch.load(os.path.join(ckpt.resume_dir() or "", "state.pt"))
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return resumed + 1


def save(model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int) -> None:
    """Step `step`'s state as this rank's checkpoint; autopard uploads it in the background and
    marks the step complete once every rank has committed it."""
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()},
               os.path.join(ckpt.step_dir(step), "state.pt"))
    ckpt.commit(step)


def plain(args: argparse.Namespace, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
          x: torch.Tensor, y: torch.Tensor) -> None:
    """The same steps as the Manager's (the same samples, gradients averaged in one all-reduce
    weighted by each rank's samples), on one torch.distributed group with no commit decision.
    Submitted with --ckpt-dir/--ckpt-upload it recovers as a DDP program does today: a heartbeat
    each step, a checkpoint every --ckpt-every steps, and a restart (in place or requeued) that
    resumes from the latest complete one."""
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ledger = os.environ.get("FT_LEDGER")
    params = [p for p in model.parameters()]
    use_ckpt = ckpt.enabled()
    start = restore(model, optimizer)
    for step in range(start, args.steps):
        optimizer.zero_grad(set_to_none=False)
        ids = ft.shards.sample_ids(step, args.global_batch, world, rank)
        idx = torch.tensor(ids) % len(x)
        loss = ((model(x[idx]) - y[idx]) ** 2).mean()
        loss.backward()
        time.sleep(args.step_sleep)
        flat = torch.cat([p.grad.reshape(-1) * len(ids) for p in params])
        dist.all_reduce(flat)
        offset = 0
        for p in params:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p) / args.global_batch)
            offset += p.numel()
        optimizer.step()
        if ledger:
            with open(os.path.join(ledger, f"rank-{rank}.jsonl"), "a") as f:
                f.write(ft.shards.ledger_line(step, 0, args.global_batch, list(range(world))))
        if use_ckpt:
            ckpt.heartbeat(step + 1, samples=args.global_batch, loss=loss.item())
            if (step + 1) % args.ckpt_every == 0:
                save(model, optimizer, step)
    if args.out:
        with open(os.path.join(args.out, f"rank-{rank}.json"), "w") as f:
            json.dump({"pid": os.getpid(), "step": args.steps, "started_at": start,
                       "sha256": state_sha256(model, optimizer)}, f)
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--global-batch", type=int, default=64)
    p.add_argument("--step-sleep", type=float, default=0.05, help="stands for a longer computation")
    p.add_argument("--out", default="")
    p.add_argument("--width", type=int, default=64, help="the hidden layer's width (the state's size)")
    p.add_argument("--plain", action="store_true",
                   help="the same training without fault tolerance (torch.distributed, gloo): "
                        "what the Manager's step costs is measured against this")
    p.add_argument("--ckpt-every", type=int, default=20,
                   help="under --ckpt-dir/--ckpt-upload: checkpoint every K committed steps")
    p.add_argument("--no-eval", action="store_true",
                   help="skip the loss over all the data at the end (4096 x width activations: "
                        "minutes on a loaded CPU for a large width)")
    p.add_argument("--bad-loss-at", default="", metavar="STEP:RANK",
                   help="this rank's loss is NaN the first time it runs STEP (a transient fault, "
                        "as a flipped bit: the step is discarded and run again)")
    args = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, args.width), torch.nn.Tanh(),
                                torch.nn.Linear(args.width, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4096, 32, generator=g)
    y = x.sum(dim=1, keepdim=True).sin()

    if args.plain:
        plain(args, model, optimizer, x, y)
        return
    # The checkpoints are the fallback when the group cannot go on (docs/ft.md): the state restored
    # before the program started, and one saved every --ckpt-every committed steps.
    start = restore(model, optimizer)
    manager = ft.Manager(model, optimizer, global_batch=args.global_batch, step=start,
                         ledger_dir=os.environ.get("FT_LEDGER") or None)
    bad_step, bad_rank = (int(v) for v in args.bad_loss_at.split(":")) if args.bad_loss_at else (-1, -1)
    loss = torch.tensor(0.0)
    while manager.step < args.steps:
        ids = torch.tensor(manager.begin_step()) % len(x)
        loss = ((model(x[ids]) - y[ids]) ** 2).mean()
        if manager.step == bad_step and manager.rank == bad_rank:
            loss = loss * float("nan")
            bad_step = -1
        loss.backward()
        time.sleep(args.step_sleep)
        if not manager.commit(loss):
            continue
        if ckpt.enabled() and manager.step % args.ckpt_every == 0:
            save(model, optimizer, manager.step - 1)
        if manager.rank == 0 and manager.step % 10 == 0:
            print(f"ft_train: step {manager.step} loss {loss.item():.5f} members {manager.world}",
                  flush=True)
    eval_loss = float("nan")
    with torch.no_grad():  # over all the data, comparable across runs; in slices of 256 samples:
        # the hidden layer of one slice is 256 x width floats, of the whole data 16x that (11 GB
        # per rank at the bench's width of 660000)
        if not args.no_eval:
            eval_loss = sum(((model(x[i:i + 256]) - y[i:i + 256]) ** 2).sum().item()
                            for i in range(0, len(x), 256)) / len(x)
    if manager.rank == 0:
        print(f"ft_train: done: {manager.step} steps, loss over the data {eval_loss:.6f}", flush=True)
    if args.out:
        with open(os.path.join(args.out, f"rank-{manager.rank}.json"), "w") as f:
            json.dump({"pid": os.getpid(), "step": manager.step, "started_at": start, "eval_loss": eval_loss,
                       "sha256": state_sha256(model, optimizer), "stats": manager.stats}, f)


if __name__ == "__main__":
    main()
