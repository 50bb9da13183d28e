"""Which samples each member of the fault-tolerant group trains on, step by step, and the ledger
that proves none is skipped or applied twice (docs/ft.md). Pure; standard library only.

Step s of a run with global batch B trains on the sample ids s*B .. s*B+B-1 (the program maps an
id to its data: `id % len(dataset)`, a permutation per epoch, ...). The group's W members split
them in rank order, contiguous and as even as integers allow, so the same members always take the
same ids: a replacement that takes a lost rank's place takes its samples too, and a group that
shrank spreads the lost ranks' samples over the others, the global batch kept.
"""
from __future__ import annotations

import json
import os
import time
from typing import Dict, Iterable, List, Sequence, Tuple


def chunk(global_batch: int, world: int, position: int) -> Tuple[int, int]:
    """(first, count) of the batch's ids that member `position` of `world` takes, 0-based
    within the batch."""
    if global_batch < 1 or world < 1 or not 0 <= position < world:
        raise ValueError(f"chunk: batch {global_batch}, world {world}, position {position}")
    first = position * global_batch // world
    return first, (position + 1) * global_batch // world - first


def sample_ids(step: int, global_batch: int, world: int, position: int) -> range:
    """The ids member `position` of `world` trains on at `step`."""
    first, count = chunk(global_batch, world, position)
    start = step * global_batch + first
    return range(start, start + count)


def ledger_line(step: int, epoch: int, global_batch: int, ranks: Sequence[int]) -> str:
    """The ledger's record of a committed step: its epoch, every member's ids (rank, first id,
    count) and when it was committed here (t, seconds since the epoch), one JSON line."""
    parts = [[r, step * global_batch + chunk(global_batch, len(ranks), p)[0],
              chunk(global_batch, len(ranks), p)[1]] for p, r in enumerate(ranks)]
    return json.dumps({"step": step, "epoch": epoch, "batch": global_batch, "ids": parts,
                       "t": round(time.time(), 4)}, separators=(",", ":")) + "\n"


def check_ledger(lines: Iterable[str], steps: int) -> List[str]:
    """What is wrong with the ledgers' records (every member's, merged) of a run of `steps` steps:
    a step never committed, a step committed with two layouts, ids that do not tile the step's
    batch exactly (a sample skipped or taken twice). [] when nothing is."""
    by_step: Dict[int, str] = {}
    problems: List[str] = []
    for line in lines:
        if not line.strip():
            continue
        record = json.loads(line)
        step = int(record["step"])
        layout = json.dumps([record["batch"], record["ids"]])
        if by_step.setdefault(step, layout) != layout:
            problems.append(f"step {step}: committed with two layouts")
    for step in range(steps):
        if step not in by_step:
            problems.append(f"step {step}: never committed")
            continue
        batch, ids = json.loads(by_step[step])
        taken = sorted((first, count) for _, first, count in ids)
        expect = step * batch
        for first, count in taken:
            if first != expect:
                problems.append(f"step {step}: ids {expect}..{first - 1} skipped" if first > expect
                                else f"step {step}: id {first} taken twice")
            expect = max(expect, first + count)
        if expect != (step + 1) * batch:
            problems.append(f"step {step}: ids end at {expect}, not {(step + 1) * batch}")
    problems += [f"step {s}: committed beyond the run's {steps} steps" for s in by_step if s >= steps]
    return problems


def read_ledgers(directory: str) -> List[str]:
    """Every line of the per-rank ledgers in `directory` (rank-R.jsonl)."""
    lines: List[str] = []
    for name in sorted(os.listdir(directory)):
        if name.startswith("rank-") and name.endswith(".jsonl"):
            with open(os.path.join(directory, name)) as f:
                lines += f.readlines()
    return lines
