"""A small data-parallel training program on autopar.ft, for tests: `ft_worker.py STEPS OUT_DIR`.
Deterministic data by sample id; writes OUT_DIR/rank-R.json at the end (its pid, step, the
SHA-256 of its model and optimizer state, its Manager's stats)."""
import faulthandler
import hashlib
import json
import os
import sys
import time

import torch

from autopar import ft


def state_hash(model, optimizer):
    h = hashlib.sha256()
    for t in model.state_dict().values():
        h.update(t.numpy().tobytes())
    for s in optimizer.state_dict()["state"].values():
        for t in s.values():
            h.update(t.numpy().tobytes() if torch.is_tensor(t) else repr(t).encode())
    return h.hexdigest()


def main(steps, out_dir):
    faulthandler.enable()
    torch.manual_seed(int(os.environ.get("SEED", "0")))
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1024, 16, generator=g)
    y = x.sum(1, keepdim=True).sin()
    manager = ft.Manager(model, optimizer, global_batch=32, timeout_s=60)
    step_s = float(os.environ.get("STEP_S", "0.02"))
    loss = torch.tensor(0.0)
    while manager.step < steps:
        ids = torch.tensor(manager.begin_step()) % len(x)
        loss = ((model(x[ids]) - y[ids]) ** 2).mean()
        loss.backward()
        time.sleep(step_s)
        manager.commit(loss)
    torch.save(model.state_dict(), os.path.join(out_dir, f"rank-{manager.rank}.pt"))
    with open(os.path.join(out_dir, f"rank-{manager.rank}.json"), "w") as f:
        json.dump({"pid": os.getpid(), "step": manager.step, "sha256": state_hash(model, optimizer),
                   "loss": float(loss), "stats": manager.stats}, f)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
