"""autopar._from_rank0.send_files over a real gloo group of 3 processes: every wanted file of rank
0's directory arrives whole at the others (chunked, empty files too), nothing else does, and a file
already in the destination is replaced, never written through (it may be a hard link to a
committed checkpoint file)."""
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PYTHON_DIR = Path(__file__).resolve().parents[1]

PROGRAM = r"""
import datetime, os, sys
import torch.distributed as dist
from autopar import _from_rank0
rank, store_path, source, dest = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
_from_rank0._CHUNK = 7  # many chunks per file
dist.init_process_group("gloo", store=dist.FileStore(store_path, 3), rank=rank, world_size=3,
                        timeout=datetime.timedelta(seconds=60))
_from_rank0.send_files(source if rank == 0 else None, dest, lambda n: not n.startswith("skip"))
dist.destroy_process_group()
"""


def test_rank0s_files_reach_every_rank_whole_and_replace_without_writing_through(tmp_path):
    source = tmp_path / "rank-0"
    source.mkdir()
    files = {"model.bin": os.urandom(1000), "empty": b"", "state.json": b'{"step": 8}'}
    for name, data in files.items():
        (source / name).write_bytes(data)
    (source / "skip-rng.pth").write_bytes(b"rank 0's own")
    dests = []
    for r in (1, 2):
        d = tmp_path / f"view-{r}"
        d.mkdir(mode=0o700)
        dests.append(d)
    committed = tmp_path / "committed-model.bin"
    committed.write_bytes(b"a committed file")
    os.link(committed, dests[0] / "model.bin")  # a previous generation's hard link
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR)}
    procs = [subprocess.Popen([sys.executable, "-c", PROGRAM, str(r), str(tmp_path / "store"), str(source),
                               str(dests[r - 1]) if r else str(source)], env=env) for r in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    for d in dests:
        assert {p.name: p.read_bytes() for p in d.iterdir()} == files
        assert all(p.stat().st_mode & 0o777 == 0o600 for p in d.iterdir())
    assert committed.read_bytes() == b"a committed file"
    assert (source / "skip-rng.pth").read_bytes() == b"rank 0's own"


def test_a_link_or_a_file_of_another_user_is_not_linked_in(tmp_path):
    from autopar._from_rank0 import link_or_copy
    from autopar.ckpt import AutoparError
    import pytest
    (tmp_path / "real").write_bytes(b"x")
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(AutoparError, match="not a regular file"):
        link_or_copy(str(tmp_path / "link"), str(tmp_path / "dst"))
    assert not (tmp_path / "dst").exists()
    if os.geteuid() == 0:  # a file another user planted where the trainer writes
        (tmp_path / "planted").write_bytes(b"y")
        os.chown(tmp_path / "planted", 65534, 65534)
        with pytest.raises(AutoparError, match="not a regular file of uid 0"):
            link_or_copy(str(tmp_path / "planted"), str(tmp_path / "dst"))
    link_or_copy(str(tmp_path / "real"), str(tmp_path / "dst"))
    assert (tmp_path / "dst").read_bytes() == b"x"
