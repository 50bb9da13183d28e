"""Sharded state that restores on another number of data-parallel ranks (elastic runs, --min-nodes).

State sharded across the data-parallel ranks — a distributed optimizer, ZeRO-1/2, FSDP-style flat
shards — is saved by every rank as its slice of each flat tensor, with the layout beside it:

    reshard.save_sharded(ckpt.step_dir(step), {"exp_avg": m_slice, ...}, numel={"exp_avg": n, ...},
                         dp_rank=r, dp_size=d)

writes ``shard.pt`` (the slices) and ``autopar-shard.json`` (the layout: dp_size, dp_rank, tp/pp
rank, each tensor's numel and [start, end) range) into the rank's step directory; both are committed
and verified with the rest of the rank's files. After a restart on D' ranks, autopar-launch has
restored every saved rank's files below ``ckpt.resume_step_dir()`` (AUTOPAR_RESUME_STEP_DIR), and

    slices, extra = reshard.load_sharded(dp_rank=r2, dp_size=d2)

assembles this rank's new slices from the saved ones that overlap them, exactly (a copy, no
arithmetic). Slices follow ``shard_range``: as even as possible, the first ``numel % dp_size``
ranks one element longer (uneven shards are fine). Tensor and pipeline parallel ranks must be the
same before and after (a change of tp/pp is the model's own checkpoint conversion, e.g.
Megatron-LM's); load_sharded reads only the files of the caller's tp and pp rank.

Plain tensors through torch.save/torch.load (weights_only: nothing else is unpickled).
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._torch import require

require("autopar.reshard")
import torch  # noqa: E402  (after the version check)

__all__ = ["shard_range", "save_sharded", "load_sharded", "LAYOUT_FILE", "SHARD_FILE"]

LAYOUT_FILE = "autopar-shard.json"
SHARD_FILE = "shard.pt"


def shard_range(numel: int, dp_size: int, dp_rank: int) -> Tuple[int, int]:
    """[start, end) of data-parallel rank `dp_rank`'s slice of a flat tensor of `numel` elements."""
    if dp_size < 1 or not 0 <= dp_rank < dp_size or numel < 0:
        raise ValueError(f"shard_range: bad numel={numel} dp_size={dp_size} dp_rank={dp_rank}")
    base, extra = divmod(numel, dp_size)
    start = dp_rank * base + min(dp_rank, extra)
    return start, start + base + (1 if dp_rank < extra else 0)


def save_sharded(directory: str, shards: Mapping[str, torch.Tensor], numel: Mapping[str, int], dp_rank: int,
                 dp_size: int, tp_rank: int = 0, pp_rank: int = 0, extra: Any = None) -> None:
    """Writes this rank's slices (name -> 1-D tensor of shard_range's length) and their layout into
    `directory` (the rank's step directory, before ckpt.commit). `extra`: tensors, numbers, strings and
    containers of them (torch.load with weights_only loads nothing else),
    returned by load_sharded from the caller's own saved rank (or rank 0's)."""
    ranges: Dict[str, List[int]] = {}
    for name, t in shards.items():
        start, end = shard_range(numel[name], dp_size, dp_rank)
        if t.dim() != 1 or t.numel() != end - start:
            raise ValueError(f"save_sharded: {name}: {tuple(t.shape)} is not the 1-D slice "
                             f"[{start}, {end}) of {numel[name]} elements for rank {dp_rank} of {dp_size}")
        ranges[name] = [start, end]
    layout = {"dp_size": dp_size, "dp_rank": dp_rank, "tp_rank": tp_rank, "pp_rank": pp_rank,
              "numel": {k: int(numel[k]) for k in shards}, "ranges": ranges}
    torch.save({"layout": layout, "shards": {k: v.detach().clone() for k, v in shards.items()},
                "extra": extra}, os.path.join(directory, SHARD_FILE))
    with open(os.path.join(directory, LAYOUT_FILE), "w") as f:
        json.dump(layout, f, sort_keys=True)


def _saved_layouts(step_dir: str, tp_rank: int, pp_rank: int) -> List[Tuple[str, Dict[str, Any]]]:
    found: List[Tuple[str, Dict[str, Any]]] = []
    for entry in sorted(os.listdir(step_dir)):
        path = os.path.join(step_dir, entry, LAYOUT_FILE)
        if entry.startswith("rank-") and os.path.isfile(path):
            with open(path) as f:
                layout = json.load(f)
            if layout["tp_rank"] == tp_rank and layout["pp_rank"] == pp_rank:
                found.append((os.path.join(step_dir, entry), layout))
    if not found:
        raise FileNotFoundError(f"load_sharded: no {LAYOUT_FILE} of tp rank {tp_rank}, pp rank "
                                f"{pp_rank} under {step_dir}")
    sizes = {layout["dp_size"] for _, layout in found}
    if len(sizes) != 1:
        raise ValueError(f"load_sharded: {step_dir}: shards of several dp sizes {sorted(sizes)}")
    dp_size = sizes.pop()
    ranks = sorted(layout["dp_rank"] for _, layout in found)
    if ranks != list(range(dp_size)):
        missing = sorted(set(range(dp_size)) - set(ranks))
        raise FileNotFoundError(f"load_sharded: {step_dir}: the shards of dp ranks {missing} of "
                                f"{dp_size} are missing")
    return sorted(found, key=lambda x: x[1]["dp_rank"])


def load_sharded(dp_rank: int, dp_size: int, step_dir: Optional[str] = None, tp_rank: int = 0,
                 pp_rank: int = 0) -> Tuple[Dict[str, torch.Tensor], Any]:
    """This rank's slices for `dp_size` data-parallel ranks, from the step saved by any number of
    them under `step_dir` (default: AUTOPAR_RESUME_STEP_DIR). Returns (name -> 1-D tensor, extra)."""
    step_dir = step_dir or os.environ.get("AUTOPAR_RESUME_STEP_DIR")
    if not step_dir:
        raise FileNotFoundError("load_sharded: no step directory (AUTOPAR_RESUME_STEP_DIR is not set)")
    saved = _saved_layouts(step_dir, tp_rank, pp_rank)
    numel = saved[0][1]["numel"]
    out: Dict[str, Any]  # name -> its tensor (None until a saved slice or the end fills it)
    extra: Any
    out, extra = {}, None
    wanted = {name: shard_range(n, dp_size, dp_rank) for name, n in numel.items()}
    for name, (start, end) in wanted.items():
        out[name] = None
    for path, layout in saved:
        if layout["numel"] != numel:
            raise ValueError(f"load_sharded: {path}: tensor sizes differ from dp rank 0's")
        overlaps = any(layout["ranges"][n][0] < end and start < layout["ranges"][n][1]
                       for n, (start, end) in wanted.items())
        own = layout["dp_rank"] == min(dp_rank, len(saved) - 1)
        if not overlaps and not own:
            continue
        saved_file = torch.load(os.path.join(path, SHARD_FILE), weights_only=True)
        if own:
            extra = saved_file["extra"]
        for name, (start, end) in wanted.items():
            s0, s1 = layout["ranges"][name]
            lo, hi = max(start, s0), min(end, s1)
            if lo >= hi:
                continue
            piece = saved_file["shards"][name]
            if out[name] is None:
                out[name] = torch.empty(end - start, dtype=piece.dtype)
            out[name][lo - start:hi - start] = piece[lo - s0:hi - s0]
    for name, (start, end) in wanted.items():
        if out[name] is None:  # an empty slice (more ranks than elements)
            out[name] = torch.empty(0)
    return out, extra
