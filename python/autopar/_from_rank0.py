"""Files of rank 0 for the other ranks of a job, hard links and private views (autopar.hf,
autopar.lightning, autopar.dcp): the ecosystem's trainers write one copy of a replicated model's
checkpoint, on rank 0, and make every rank load it on resume."""
from __future__ import annotations

import json
import os
import shutil
import stat
from typing import Callable, Optional

from . import private_dir
from .ckpt import AutoparError


def make_view(path: str) -> str:
    """`path` made a directory private to this user (0700, every ancestor's owner and mode checked,
    no symlink: private_dir), for the files a resume reads: AutoparError saying why it cannot be."""
    try:
        private_dir.make_private_dir(path)
    except private_dir.PrivateDirError as e:
        raise AutoparError(str(e)) from None
    return path


def link_or_copy(src: str, dst: str) -> None:
    """`dst` made a hard link of `src` (a copy across filesystems), replacing what was there.
    `src` must be a regular file of this process's user (not a link, not someone else's file
    planted where the trainer writes): anything else is refused, never committed."""
    st = os.lstat(src)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        raise AutoparError(f"autopar: {src}: not a regular file of uid {os.geteuid()}: not committed")
    if os.path.lexists(dst):
        os.unlink(dst)
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copyfile(src, dst, follow_symlinks=False)


_CHUNK = 64 << 20


def send_files(source: Optional[str], dest: str, wanted: Callable[[str], bool]) -> None:
    """Collective: rank 0 (`source`: a directory of its own) sends every file of it that `wanted`
    names to every other rank, which writes it into `dest` (a private directory; a file of the name
    already there is replaced, not written through). Over gloo (a group of its own when the default one is NCCL's), as a JSON
    list of names and sizes, then each file's bytes in chunks: raw bytes, nothing unpickled."""
    import torch
    import torch.distributed as dist

    group = None if dist.get_backend() == "gloo" else dist.new_group(backend="gloo")

    def bcast_bytes(data: Optional[bytes], size: int) -> bytes:
        t = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data is not None else \
            torch.empty(size, dtype=torch.uint8)
        dist.broadcast(t, src=0, group=group)
        return t.numpy().tobytes()

    listing = None
    if source is not None:
        listing = json.dumps([[n, os.path.getsize(os.path.join(source, n))] for n in sorted(os.listdir(source))
                              if os.path.isfile(os.path.join(source, n)) and wanted(n)]).encode()
    length = torch.tensor([len(listing) if listing is not None else 0], dtype=torch.int64)
    dist.broadcast(length, src=0, group=group)
    files = json.loads(bcast_bytes(listing, int(length.item())))
    for name, size in files:
        if "/" in name or name in (".", ".."):
            raise AutoparError(f"autopar: rank 0 sent a file name that is not one: {name!r}")
        out = None
        if source is None:
            path = os.path.join(dest, name)
            if os.path.lexists(path):
                os.unlink(path)  # never written through: it may be a hard link to a committed file
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            src = open(os.path.join(source, name), "rb") if source is not None else None
            try:
                done = 0
                while done < size:
                    n = min(_CHUNK, size - done)
                    chunk = bcast_bytes(src.read(n) if src is not None else None, n)
                    view_ = memoryview(chunk)
                    while out is not None and view_:
                        view_ = view_[os.write(out, view_):]
                    done += n
            finally:
                if src is not None:
                    src.close()
        finally:
            if out is not None:
                os.close(out)
