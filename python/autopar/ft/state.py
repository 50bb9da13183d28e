"""The training state a member hands a newcomer (docs/ft.md): every object the program
registered with the Manager (a module, an optimizer, anything with state_dict/load_state_dict),
written whole with torch.save, so the newcomer's state is the sender's bit for bit, and moved
over the group's process group (a size, then the bytes)."""
from __future__ import annotations

import io
from typing import Any, Dict, Mapping, Protocol

import torch

from .channel import LauncherChannel
from .group import Group


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


# How long one part of a handover may take. A member lost during it (its node gone, or its
# program killed) makes the launchers give the epoch up, which ends the wait at once; the
# deadline is for a peer alive but stuck. Past it the part fails and both join the next quorum.
HANDOVER_BASE_S = 30.0
HANDOVER_MIN_BYTES_PER_S = 10e6


def _within(nbytes: int) -> float:
    return HANDOVER_BASE_S + nbytes / HANDOVER_MIN_BYTES_PER_S


def send(group: Group, data: bytes, dst: int, tag: int, channel: LauncherChannel) -> None:
    """Sends `data` to group position `dst` of `group` (a Group: its size, then the bytes)."""
    group.send(torch.tensor([len(data)], dtype=torch.int64), dst, tag, channel, _within(8))
    group.send(torch.frombuffer(bytearray(data), dtype=torch.uint8), dst, tag + 1, channel,
               _within(len(data)))


def recv(group: Group, src: int, tag: int, channel: LauncherChannel) -> bytes:
    """What send(group, ..., dst=this position, tag) sent from group position `src`."""
    size = torch.zeros(1, dtype=torch.int64)
    group.recv(size, src, tag, channel, _within(8))
    data = torch.empty(int(size.item()), dtype=torch.uint8)
    group.recv(data, src, tag + 1, channel, _within(data.numel()))
    return data.numpy().tobytes()
