"""The `train.py` that the docs' sbatch and Python examples run on the local cluster
(tests/docs/examples.py, tests/integration/test_docs_examples.py), unless an example names another.

It is the loop of docs/checkpoints.md, "Time limits", with a sleep for the step's work. There is no
torch, so an example's 32 tasks fit on the 2-core test machine. In a job with checkpoints
(--ckpt-dir or --ckpt-upload) every rank commits its state at the last step. It ends by printing one line that says where it ran and the plan it was given.
"""
import os
import time

from autopar import ckpt

steps = 4
every = 2
resumed = ckpt.resume_step()
start = 0 if resumed is None else resumed + 1

for step in range(start, steps):
    time.sleep(0.2)  # train_one_step()
    requested = ckpt.heartbeat(step)
    stop = ckpt.time_limit_reached(requested, step)
    if ckpt.enabled() and (stop or (step + 1) % every == 0):  # a job with checkpoints
        with open(os.path.join(ckpt.step_dir(step), "state.txt"), "w") as f:
            f.write(f"step {step}\n")
        ckpt.commit(step)
    if stop:
        ckpt.wait_for_requeue()

plan = " ".join(f"{k}={os.environ[f'AUTOPAR_{k.upper()}']}" for k in ("tp", "pp", "dp")
                if f"AUTOPAR_{k.upper()}" in os.environ)
print(f"train.py: rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} on {os.environ['SLURMD_NODENAME']}"
      f" trained steps {start}-{steps - 1} {plan}".rstrip(), flush=True)
