"""The training state a member hands a newcomer (docs/ft.md): every object the program
registered with the Manager (a module, an optimizer, anything with state_dict/load_state_dict),
whole, so the newcomer's state is the sender's bit for bit, and moved over the group's process
group (a header, then the bytes).

Nothing is pickled. The state is written as a JSON skeleton (numbers, strings, booleans, None,
lists, tuples and dicts with their keys' types) in which each tensor is a reference, followed by
every tensor's raw bytes: one buffer, allocated once at each end (the receiver's tensors are
views of the buffer it received into). A dtype outside plain numbers, or a value JSON cannot say,
is refused at dump; bytes that are not what dump writes are refused at load.

Only the job's own ranks take part (docs/security.md): the bytes are encrypted and
authenticated with keys derived from the job's key (store.job_key()), bound to the epoch and the
sender; the receiver checks the HMAC-SHA256 before it decrypts or reads a byte of it. gloo's
connections are plain TCP: a user who took one over would read ciphertext and could inject
nothing. The cipher is SHAKE-256 of the key, a fresh nonce and the chunk's index, as a keystream
XORed in place (hashlib; no third-party module)."""
from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import secrets
import struct
from typing import Any, Dict, List, Mapping, Optional, Protocol, Tuple, Union

import numpy as np
import torch

from .channel import LauncherChannel
from .group import Group
from .store import derive


class Stateful(Protocol):
    def state_dict(self) -> Dict[str, Any]: ...
    def load_state_dict(self, state: Dict[str, Any]) -> Any: ...


Bytes = Union[bytes, bytearray, memoryview]

_DTYPES = {str(d).replace("torch.", ""): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
    torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)}


def sharded(model: torch.nn.Module, optimizer: Any) -> Optional[str]:
    """Why this rank does not hold the whole model and optimizer state, or None. A heal sends one
    member's state to another and the group averages gradients over every member: both are right
    only when every member holds the whole state (docs/ft.md, "Limits"). Sharded: a parameter that
    is a DTensor with a Shard placement (FSDP2's fully_shard, tensor parallelism), a model wrapped
    in FSDP1, an optimizer that keeps a part of the state (ZeroRedundancyOptimizer), or a rank that
    autopar's plan put on a tensor, pipeline, context or expert parallel coordinate or an FSDP
    shard group (AUTOPAR_TP, AUTOPAR_PP, AUTOPAR_CP, AUTOPAR_EP > 1, AUTOPAR_FSDP_SHARD)."""
    for name in ("AUTOPAR_TP", "AUTOPAR_PP", "AUTOPAR_CP", "AUTOPAR_EP", "AUTOPAR_FSDP_SHARD"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > (0 if name == "AUTOPAR_FSDP_SHARD" else 1):
            return f"autopar's plan shards it ({name}={value})"
    try:
        from torch.distributed.tensor import DTensor, Shard
    except ImportError:  # a torch without DTensor has no FSDP2 or tensor parallel API either
        DTensor, Shard = None, None
    for pname, p in model.named_parameters():
        if DTensor is not None and isinstance(p, DTensor) and any(isinstance(x, Shard) for x in p.placements):
            return f"its parameter {pname} is a DTensor sharded over its mesh ({p.placements})"
    kinds = {type(m).__name__ for m in model.modules()}
    if "FullyShardedDataParallel" in kinds:
        return "the model is wrapped in FullyShardedDataParallel"
    if type(optimizer).__name__ == "ZeroRedundancyOptimizer":
        return "the optimizer is a ZeroRedundancyOptimizer (each rank keeps a part of its state)"
    return None


def _skeleton(value: Any, tensors: List[torch.Tensor]) -> Any:
    """`value` as JSON, each tensor replaced by {"t": index, ...} (appended to `tensors`)."""
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        if dtype not in _DTYPES or value.is_sparse:
            raise TypeError(f"a tensor of {value.dtype}{' (sparse)' if value.is_sparse else ''}")
        tensors.append(value.detach())
        return {"t": len(tensors) - 1, "dtype": dtype, "shape": list(value.shape)}
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"f": repr(value)}
    if isinstance(value, (list, tuple)):
        items = [_skeleton(v, tensors) for v in value]
        return items if isinstance(value, list) else {"tuple": items}
    if isinstance(value, dict):
        return {"dict": [[_skeleton(k, tensors), _skeleton(v, tensors)] for k, v in value.items()]}
    raise TypeError(f"a {type(value).__name__}")


def _nbytes(node: Dict[str, Any]) -> int:
    shape = [int(d) for d in node["shape"]]
    if any(d < 0 for d in shape):
        raise ValueError(f"a negative shape {shape}")
    return math.prod(shape) * torch.empty(0, dtype=_DTYPES[node["dtype"]]).element_size()


def dump(objects: Mapping[str, Stateful], step: int) -> memoryview:
    """The registered objects' state at `step`: the skeleton's length (8 bytes), the skeleton,
    then each tensor's bytes, as one writable buffer."""
    tensors: List[torch.Tensor] = []
    try:
        skeleton = _skeleton({"step": step, "state": {n: o.state_dict() for n, o in objects.items()}},
                             tensors)
    except TypeError as e:
        raise TypeError(f"autopar.ft: the state holds {e}, which a heal does not carry (tensors "
                        "of plain numbers; numbers, strings, lists, tuples, dicts)") from None
    head = json.dumps(skeleton, separators=(",", ":")).encode()
    sizes = [t.numel() * t.element_size() for t in tensors]
    buf = torch.empty(8 + len(head) + sum(sizes), dtype=torch.uint8)
    view = memoryview(buf.numpy())
    view[:8] = struct.pack("!q", len(head))
    view[8:8 + len(head)] = head
    offset = 8 + len(head)
    for t, n in zip(tensors, sizes):
        if n:
            buf[offset:offset + n].copy_(t.contiguous().reshape(-1).view(torch.uint8))
        offset += n
    return view


def _sizes(node: Any, out: Dict[int, int]) -> None:
    """Each tensor's index -> its byte size."""
    if isinstance(node, list):
        for v in node:
            _sizes(v, out)
    elif isinstance(node, dict):
        if "t" in node:
            out[int(node["t"])] = _nbytes(node)
            return
        for v in node.values():
            _sizes(v, out)


def _rebuild(node: Any, data: memoryview, offsets: List[int]) -> Any:
    if isinstance(node, list):
        return [_rebuild(v, data, offsets) for v in node]
    if not isinstance(node, dict):
        return node
    if "t" in node:
        dtype, shape, n = _DTYPES[node["dtype"]], [int(d) for d in node["shape"]], _nbytes(node)
        if n == 0:
            return torch.empty(shape, dtype=dtype)
        start = offsets[int(node["t"])]
        return torch.frombuffer(data[start:start + n], dtype=dtype).view(shape)
    if "f" in node:
        return float(node["f"])
    if "tuple" in node:
        return tuple(_rebuild(v, data, offsets) for v in node["tuple"])
    return {_rebuild(k, data, offsets): _rebuild(v, data, offsets) for k, v in node["dict"]}


def load(objects: Mapping[str, Stateful], data: Bytes) -> int:
    """Loads `data` (dump's, unsealed) into the registered objects; returns its step. The names
    must be the same on both sides: a program that registers other objects cannot heal from this
    one. Raises HealRefused when `data` is not what dump writes."""
    view = memoryview(data).cast("B")
    try:
        (n,) = struct.unpack("!q", view[:8])
        skeleton = json.loads(bytes(view[8:8 + n]))
        sizes: Dict[int, int] = {}
        _sizes(skeleton, sizes)
        offsets, at = [], 8 + n
        for i in range(len(sizes)):
            offsets.append(at)
            at += sizes[i]
        if at != len(view):
            raise ValueError(f"{len(view)} bytes where its skeleton says {at}")
        saved = _rebuild(skeleton, view, offsets)
        step, states = int(saved["step"]), saved["state"]
    except (ValueError, KeyError, TypeError, IndexError, struct.error) as e:
        raise HealRefused(f"autopar.ft: the state received is not a heal's: {e}") from None
    if sorted(states) != sorted(objects):
        raise ValueError(f"the state received holds {sorted(states)}, this program "
                         f"registered {sorted(objects)}")
    for name, o in objects.items():
        o.load_state_dict(states[name])
    return step


_CHUNK = 1 << 20
_NONCE = 16
_MAC = 32
HEADER = 8 + _NONCE + _MAC  # the size, the nonce, the MAC


class HealRefused(RuntimeError):
    """What a peer sent is not the job's, or not a state this program can load."""


def _context(epoch: int, sender: int) -> bytes:
    return f"autopar-ft-heal/v1/epoch={epoch}/from={sender}".encode()


def _xor_keystream(key: bytes, nonce: bytes, data: memoryview) -> None:
    enc = derive(key, "autopar-ft-heal-cipher")
    out = np.frombuffer(data, dtype=np.uint8)
    for i, start in enumerate(range(0, len(out), _CHUNK)):
        part = out[start:start + _CHUNK]
        stream = hashlib.shake_256(enc + nonce + struct.pack("!Q", i)).digest(len(part))
        np.bitwise_xor(part, np.frombuffer(stream, dtype=np.uint8), out=part)


def _mac(key: bytes, context: bytes, nonce: bytes, data: memoryview) -> bytes:
    h = hmac.new(derive(key, "autopar-ft-heal-mac"), context + nonce, hashlib.sha256)
    for start in range(0, len(data), _CHUNK):
        h.update(data[start:start + _CHUNK])
    return h.digest()


def seal(key: bytes, data: Bytes, epoch: int, sender: int) -> bytes:
    """Encrypts `data` (dump's, writable) in place for `epoch` from `sender`; the header to send
    before it."""
    view = memoryview(data).cast("B")
    nonce = secrets.token_bytes(_NONCE)
    _xor_keystream(key, nonce, view)
    return struct.pack("!q", len(view)) + nonce + _mac(key, _context(epoch, sender), nonce, view)


def unseal(key: bytes, data: Bytes, header: bytes, epoch: int, sender: int) -> memoryview:
    """Checks and decrypts in place what `sender` sent in `epoch` (recv's); raises HealRefused
    when it is not the job's."""
    view = memoryview(data).cast("B")
    nonce, mac = header[8:8 + _NONCE], header[8 + _NONCE:HEADER]
    if not hmac.compare_digest(mac, _mac(key, _context(epoch, sender), nonce, view)):
        raise HealRefused(f"autopar.ft: the state received from rank {sender} in epoch {epoch} "
                          "was not sent by a member of this job (bad MAC): refused")
    _xor_keystream(key, nonce, view)
    return view


# How long one part of a handover may take. A member lost during it (its node gone, or its
# program killed) makes the launchers give the epoch up, which ends the wait at once; the
# deadline is for a peer alive but stuck. Past it the part fails and both join the next quorum.
HANDOVER_BASE_S = 30.0
HANDOVER_MIN_BYTES_PER_S = 10e6


def _within(nbytes: int) -> float:
    return HANDOVER_BASE_S + nbytes / HANDOVER_MIN_BYTES_PER_S


def send(group: Group, data: Bytes, header: bytes, dst: int, tag: int,
         channel: LauncherChannel) -> None:
    """Sends sealed `data` (a writable buffer) and its `header` (seal's) to group position `dst`
    of `group`."""
    view = memoryview(data).cast("B")
    group.send(torch.frombuffer(bytearray(header), dtype=torch.uint8), dst, tag, channel,
               _within(HEADER))
    group.send(torch.frombuffer(view, dtype=torch.uint8), dst, tag + 1, channel,
               _within(len(view)))


# The most a newcomer allocates for a state on a peer's word (the header's size).
MAX_STATE_BYTES = 1 << 40


def recv(group: Group, src: int, tag: int, channel: LauncherChannel) -> Tuple[memoryview, bytes]:
    """What send(group, ..., dst=this position, tag) sent from group position `src`: a view of
    the tensor it was received into, and its header (for unseal)."""
    header = torch.zeros(HEADER, dtype=torch.uint8)
    group.recv(header, src, tag, channel, _within(HEADER))
    head = bytes(header.numpy())
    (size,) = struct.unpack("!q", head[:8])
    if not 0 <= size <= MAX_STATE_BYTES:
        raise HealRefused(f"autopar.ft: a state of {size} bytes announced by rank position {src}")
    data = torch.empty(size, dtype=torch.uint8)
    group.recv(data, src, tag + 1, channel, _within(data.numel()))
    return memoryview(data.numpy()), head
