"""The training the preemption benchmark runs three ways (bench/preemption/preemption_bench.py):
a small PyTorch model, one process, STEP_S seconds a step (the compute of a real step stands in as
a sleep), a checkpoint every EVERY steps. Every step prints "toy: step N run R time T" to the log,
so the bench counts the steps each run trained and the steps trained again.

  autopar   under autopar-launch: checkpoints with autopar.ckpt (step_dir/commit, autopard
            uploads), resumes what autopar-launch restored; --on-notice asks
            ckpt.time_limit_reached() every step, so a preemption notice checkpoints the step
  submitit  a submitit.helpers.Checkpointable: its checkpoint() (called by submitit at the
            preemption signal) saves the last step trained and resubmits; a checkpoint file
            every EVERY steps as well (needs SlurmctldParameters=preempt_send_user_signal, so
            that submitit's --signal reaches it at the notice)
"""
import argparse
import os
import sys
import time

import submitit
import torch
import torch.nn as nn


def build():
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, opt


def one_step(model, opt, step):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(64, 16, generator=g)
    y = torch.tanh(x.sum(dim=1, keepdim=True) / 4)
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def log(step, run, text=None):
    """A line on stdout, and appended to $TOY_LOG when set (a requeued job's output files may be
    truncated at its next start; this one never is)."""
    line = text or f"toy: step {step} run {run} time {time.time():.3f}"
    print(line, flush=True)
    if os.environ.get("TOY_LOG"):
        with open(os.environ["TOY_LOG"], "a") as f:
            f.write(line + "\n")


def run_autopar(args):
    from autopar import ckpt
    model, opt = build()
    run = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
    start = 0
    if ckpt.resume_step() is not None:
        state = torch.load(os.path.join(ckpt.resume_dir(), "state.pt"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = ckpt.resume_step() + 1
    for step in range(start, args.steps):
        one_step(model, opt, step)
        time.sleep(args.step_s)
        log(step, run)
        requested = ckpt.heartbeat(step, wait=args.on_notice)
        notice = args.on_notice and ckpt.time_limit_reached(requested, step)
        if (step + 1) % args.every == 0 or notice:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()},
                       os.path.join(ckpt.step_dir(step), "state.pt"))
            ckpt.commit(step)
        if notice:
            ckpt.wait_for_requeue()
    log(0, 0, "toy: done")


class SubmititTrain(submitit.helpers.Checkpointable):
    """The same loop for submitit: a Checkpointable, as submitit's docs have it."""

    def __init__(self, args, state_path):
        self.args, self.state_path = args, state_path
        self.model = self.opt = None
        self.step = -1  # the last step trained

    def save(self):
        tmp = self.state_path + ".tmp"
        torch.save({"model": self.model.state_dict(), "opt": self.opt.state_dict(),
                    "step": self.step}, tmp)
        os.replace(tmp, self.state_path)

    def __call__(self):
        run = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
        self.model, self.opt = build()
        start = 0
        if os.path.exists(self.state_path):
            state = torch.load(self.state_path)
            self.model.load_state_dict(state["model"])
            self.opt.load_state_dict(state["opt"])
            start = state["step"] + 1
        for step in range(start, self.args.steps):
            one_step(self.model, self.opt, step)
            time.sleep(self.args.step_s)
            self.step = step
            log(step, run)
            if (step + 1) % self.args.every == 0:
                self.save()
        log(0, 0, "toy: done")
        return self.step

    def checkpoint(self, *args, **kwargs):
        if self.model is not None and self.step >= 0:
            self.save()  # the last step trained: the next run trains the one after it
        self.model = self.opt = None  # the resubmitted callable is pickled without them
        return submitit.helpers.DelayedSubmission(self)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--step-s", type=float, default=0.5)
    ap.add_argument("--every", type=int, default=60)
    ap.add_argument("--on-notice", action="store_true")
    args = ap.parse_args()
    run_autopar(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
