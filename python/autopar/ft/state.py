"""The training state a member hands a newcomer (docs/ft.md): every object the program
registered with the Manager (a module, an optimizer, anything with state_dict/load_state_dict),
written whole with torch.save, so the newcomer's state is the sender's bit for bit, and moved
over the group's process group (a size, then the bytes)."""
from __future__ import annotations

import datetime
import io
from typing import Any, Dict, Mapping, Protocol

import torch


class Stateful(Protocol):
    def state_dict(self) -> Dict[str, Any]: ...
    def load_state_dict(self, state: Dict[str, Any]) -> Any: ...


def dump(objects: Mapping[str, Stateful], step: int) -> bytes:
    """The registered objects' state at `step`, as bytes."""
    buf = io.BytesIO()
    torch.save({"step": step, "state": {name: o.state_dict() for name, o in objects.items()}}, buf)
    return buf.getvalue()


def load(objects: Mapping[str, Stateful], data: bytes) -> int:
    """Loads `data` (dump's) into the registered objects; returns its step. The names must be
    the same on both sides: a program that registers other objects cannot heal from this one."""
    saved = torch.load(io.BytesIO(data))
    if sorted(saved["state"]) != sorted(objects):
        raise ValueError(f"the state received holds {sorted(saved['state'])}, this program "
                         f"registered {sorted(objects)}")
    for name, o in objects.items():
        o.load_state_dict(saved["state"][name])
    return int(saved["step"])


# How long one part of a handover may take: a newcomer that died, or gave the epoch up, while it
# should receive leaves its sender waiting (gloo would wait for the group's timeout, and such a
# wait cannot be given up). Past it the part fails and both join the next quorum.
HANDOVER_BASE_S = 30.0
HANDOVER_MIN_BYTES_PER_S = 10e6


def _within(nbytes: int) -> datetime.timedelta:
    return datetime.timedelta(seconds=HANDOVER_BASE_S + nbytes / HANDOVER_MIN_BYTES_PER_S)


def send(pg: Any, data: bytes, dst: int, tag: int) -> None:
    """Sends `data` to group position `dst` (its size first)."""
    pg.send([torch.tensor([len(data)], dtype=torch.int64)], dst, tag).wait(_within(8))
    pg.send([torch.frombuffer(bytearray(data), dtype=torch.uint8)], dst, tag + 1).wait(_within(len(data)))


def recv(pg: Any, src: int, tag: int) -> bytes:
    """What send(pg, ..., dst=this position, tag) sent from group position `src`."""
    size = torch.zeros(1, dtype=torch.int64)
    pg.recv([size], src, tag).wait(_within(8))
    data = torch.empty(int(size.item()), dtype=torch.uint8)
    pg.recv([data], src, tag + 1).wait(_within(data.numel()))
    return data.numpy().tobytes()
