"""autopar.reshard: state saved by D data-parallel ranks restores on D' ranks, exactly."""
import itertools
import json
import os

import pytest
import torch

from autopar import reshard


def full_tensors():
    g = torch.Generator().manual_seed(7)
    # Uneven sizes on purpose: 37 and 1001 split unevenly over most D; 3 has fewer elements than
    # some D (empty slices); an int64 tensor for a step counter.
    return {"exp_avg": torch.randn(1001, generator=g), "exp_avg_sq": torch.rand(37, generator=g),
            "tiny": torch.randn(3, generator=g, dtype=torch.float64),
            "count": torch.arange(11, dtype=torch.int64)}


def save_step(step_dir, full, dp_size, tp_rank=0, pp_rank=0):
    for r in range(dp_size):
        d = os.path.join(step_dir, f"rank-{r}")
        os.makedirs(d, exist_ok=True)
        shards = {k: v[slice(*reshard.shard_range(v.numel(), dp_size, r))] for k, v in full.items()}
        reshard.save_sharded(d, shards, {k: v.numel() for k, v in full.items()}, r, dp_size,
                             tp_rank=tp_rank, pp_rank=pp_rank, extra={"rank": r, "step": 40})


def test_shard_ranges_cover_every_element_once():
    for numel, d in itertools.product([0, 1, 3, 37, 1001], range(1, 9)):
        ranges = [reshard.shard_range(numel, d, r) for r in range(d)]
        assert ranges[0][0] == 0 and ranges[-1][1] == numel
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        sizes = [e - s for s, e in ranges]
        assert max(sizes) - min(sizes) <= 1
    with pytest.raises(ValueError):
        reshard.shard_range(10, 4, 4)


@pytest.mark.parametrize("saved,restored", [(d, d2) for d in (1, 2, 3, 4, 8) for d2 in (1, 2, 3, 5, 6, 8)])
def test_any_dp_size_restores_on_any_other_exactly(tmp_path, saved, restored):
    full = full_tensors()
    save_step(str(tmp_path), full, saved)
    pieces = {k: [] for k in full}
    for r in range(restored):
        slices, extra = reshard.load_sharded(r, restored, step_dir=str(tmp_path))
        assert extra == {"rank": min(r, saved - 1), "step": 40}
        for k, v in full.items():
            start, end = reshard.shard_range(v.numel(), restored, r)
            assert torch.equal(slices[k], v[start:end]), (k, r)
            if end > start:
                assert slices[k].dtype == v.dtype
            pieces[k].append(slices[k])
    for k, v in full.items():
        assert torch.equal(torch.cat([p.to(v.dtype) for p in pieces[k]]), v)


def test_the_layout_is_written_beside_the_shards(tmp_path):
    save_step(str(tmp_path), full_tensors(), 3)
    with open(tmp_path / "rank-2" / reshard.LAYOUT_FILE) as f:
        layout = json.load(f)
    assert layout["dp_size"] == 3 and layout["dp_rank"] == 2
    assert layout["ranges"]["exp_avg"] == [668, 1001] and layout["numel"]["tiny"] == 3


def test_missing_shards_and_other_tp_ranks_are_named(tmp_path, monkeypatch):
    full = full_tensors()
    save_step(str(tmp_path), full, 4)
    os.remove(tmp_path / "rank-2" / reshard.LAYOUT_FILE)
    with pytest.raises(FileNotFoundError, match=r"dp ranks \[2\] of 4 are missing"):
        reshard.load_sharded(0, 2, step_dir=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no autopar-shard.json of tp rank 1"):
        reshard.load_sharded(0, 2, step_dir=str(tmp_path), tp_rank=1)
    monkeypatch.delenv("AUTOPAR_RESUME_STEP_DIR", raising=False)
    with pytest.raises(FileNotFoundError, match="AUTOPAR_RESUME_STEP_DIR"):
        reshard.load_sharded(0, 2)
    # The default directory is the launcher's.
    other = tmp_path / "other"
    save_step(str(other), full, 2)
    monkeypatch.setenv("AUTOPAR_RESUME_STEP_DIR", str(other))
    slices, _ = reshard.load_sharded(2, 3)
    assert torch.equal(slices["exp_avg"], full["exp_avg"][668:1001])


def test_a_slice_of_the_wrong_size_is_refused(tmp_path):
    with pytest.raises(ValueError, match="is not the 1-D slice"):
        reshard.save_sharded(str(tmp_path), {"a": torch.zeros(5)}, {"a": 10}, 0, 3)
