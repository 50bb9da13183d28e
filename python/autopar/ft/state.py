"""The training state a member hands a newcomer (docs/ft.md): every object the program
registered with the Manager (a module, an optimizer, anything with state_dict/load_state_dict),
written whole with torch.save, so the newcomer's state is the sender's bit for bit, and moved
over the group's process group (a size, then the bytes). The serialized state is held once at
each end: the sender sends torch.save's own buffer, the receiver loads from the tensor it
received into (torch.load reads it through readinto), with no copy of either."""
from __future__ import annotations

import io
from typing import Any, BinaryIO, Dict, Mapping, Protocol, Union, cast

import torch

from .channel import LauncherChannel
from .group import Group


class Stateful(Protocol):
    def state_dict(self) -> Dict[str, Any]: ...
    def load_state_dict(self, state: Dict[str, Any]) -> Any: ...


Bytes = Union[bytes, bytearray, memoryview]


def dump(objects: Mapping[str, Stateful], step: int) -> memoryview:
    """The registered objects' state at `step`, serialized: a view of torch.save's buffer."""
    buf = io.BytesIO()
    torch.save({"step": step, "state": {name: o.state_dict() for name, o in objects.items()}}, buf)
    return buf.getbuffer()


class _ViewReader(io.RawIOBase):
    """A read-only, seekable file over a buffer, which readinto copies from without a copy of
    the whole (io.BytesIO copies any buffer but bytes)."""

    def __init__(self, data: Bytes) -> None:
        super().__init__()
        self._view = memoryview(data).cast("B")
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        out = memoryview(b).cast("B")
        n = max(0, min(len(out), len(self._view) - self._pos))
        out[:n] = self._view[self._pos:self._pos + n]
        self._pos += n
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._view)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos


def load(objects: Mapping[str, Stateful], data: Bytes) -> int:
    """Loads `data` (dump's) into the registered objects; returns its step. The names must be
    the same on both sides: a program that registers other objects cannot heal from this one."""
    saved = torch.load(cast(BinaryIO, _ViewReader(data)))  # a binary file as torch.load uses one
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


def send(group: Group, data: Bytes, dst: int, tag: int, channel: LauncherChannel) -> None:
    """Sends `data` to group position `dst` of `group` (a Group: its size, then the bytes)."""
    view = memoryview(data).cast("B")
    if view.readonly:  # torch.frombuffer shares only a writable buffer
        view = memoryview(bytearray(view))
    group.send(torch.tensor([len(view)], dtype=torch.int64), dst, tag, channel, _within(8))
    group.send(torch.frombuffer(view, dtype=torch.uint8), dst, tag + 1, channel,
               _within(len(view)))


def recv(group: Group, src: int, tag: int, channel: LauncherChannel) -> memoryview:
    """What send(group, ..., dst=this position, tag) sent from group position `src`: a view of
    the tensor it was received into."""
    size = torch.zeros(1, dtype=torch.int64)
    group.recv(size, src, tag, channel, _within(8))
    data = torch.empty(int(size.item()), dtype=torch.uint8)
    group.recv(data, src, tag + 1, channel, _within(data.numel()))
    return memoryview(data.numpy())
