"""autopar.ft refuses a sharded state (docs/ft.md, "Limits"): a heal sends one member's whole
state to another and the group averages gradients over every member, which is right only where
every member holds the whole state. Each way a torch 2.x program shards its state is refused in
one line by ft.Manager, before it opens anything; a plain model is not."""
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from autopar.ft import Manager, state

PYTHON_DIR = Path(__file__).resolve().parents[1]


def net():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def test_a_plain_model_holds_its_whole_state():
    model = net()
    assert state.sharded(model, torch.optim.AdamW(model.parameters())) is None


@pytest.mark.parametrize("name,value", [("AUTOPAR_TP", "2"), ("AUTOPAR_PP", "4"),
                                        ("AUTOPAR_CP", "2"), ("AUTOPAR_EP", "8"),
                                        ("AUTOPAR_FSDP_SHARD", "4")])
def test_a_rank_autopars_plan_shards_is_refused(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    model = net()
    with pytest.raises(ValueError) as e:
        Manager(model, torch.optim.SGD(model.parameters(), lr=0.1), global_batch=8)
    msg = str(e.value)
    assert msg.startswith("autopar.ft: this rank's state is sharded: autopar's plan shards it "
                          f"({name}={value})"), msg
    assert "\n" not in msg


def test_a_plan_that_replicates_is_not_sharded(monkeypatch):
    for name in ("AUTOPAR_TP", "AUTOPAR_PP", "AUTOPAR_CP", "AUTOPAR_EP"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("AUTOPAR_FSDP_SHARD", "0")
    model = net()
    assert state.sharded(model, torch.optim.SGD(model.parameters(), lr=0.1)) is None


# FSDP2, tensor parallelism and ZeRO on a real (one-rank gloo) process group, in a process of
# their own (a process group is the interpreter's for good), one model each. (FSDP1 needs an
# accelerator: on CPU it refuses to wrap.)
PROGRAM = textwrap.dedent("""
    import torch, torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
    from autopar.ft import Manager
    dist.init_process_group("gloo", rank=0, world_size=1)
    def net():
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    def sgd(m):
        return torch.optim.SGD(m.parameters(), lr=0.1)
    fsdp2, tp, zero = net(), net(), net()
    fully_shard(fsdp2)
    parallelize_module(tp, init_device_mesh("cpu", (1,)), {"0": ColwiseParallel()})
    for kind, model, opt in [
            ("fsdp2", fsdp2, sgd(fsdp2)), ("tp", tp, sgd(tp)),
            ("zero", zero, ZeroRedundancyOptimizer(zero.parameters(), optimizer_class=torch.optim.SGD, lr=0.1))]:
        try:
            Manager(model, opt, global_batch=8)
            print(kind, "accepted")
        except ValueError as e:
            print(kind, e)
    dist.destroy_process_group()
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_program_that_shards_its_state_is_refused():
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPAR_")}
    env.update(PYTHONPATH=str(PYTHON_DIR), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in p.stdout.splitlines())
    for kind, why in [("fsdp2", "its parameter 0.weight is a DTensor sharded over its mesh"),
                      ("tp", "its parameter 0.weight is a DTensor sharded over its mesh"),
                      ("zero", "the optimizer is a ZeroRedundancyOptimizer")]:
        line = lines[kind]
        assert line.startswith(f"autopar.ft: this rank's state is sharded: {why}"), (kind, line)
        assert line.endswith("leave --fault-tolerance=step off for a sharded model"), line
