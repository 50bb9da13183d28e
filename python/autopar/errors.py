"""The program's error for its launcher (docs/health.md): an uncaught exception is written
to TORCHELASTIC_ERROR_FILE, in the format torchrun's @record uses, so that autopar-launch can tell
an out-of-memory failure (CUDA's "out of memory", MemoryError, PyTorch's allocators) from any other
crash and have the job re-planned with more memory headroom instead of failing the same way again.

Importing autopar installs it (a sys.excepthook that calls the previous one) when the launcher set
the variable. A file already there (written by @record) is kept.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from types import TracebackType
from typing import Optional, Type

__all__ = ["install", "install_by_default", "write_error_file"]


def write_error_file(path: str, exc_type: Type[BaseException], exc: BaseException,
                     tb: Optional[TracebackType]) -> None:
    """Writes the exception as torchelastic's error file, unless one is there already."""
    if os.path.exists(path):
        return
    text = "".join(traceback.format_exception_only(exc_type, exc)).strip()
    data = {"message": {"message": text,
                        "extraInfo": {"py_callstack": "".join(traceback.format_exception(exc_type, exc, tb)),
                                      "timestamp": str(int(time.time()))}}}
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def install(path: str) -> None:
    previous = sys.excepthook

    def hook(exc_type: Type[BaseException], exc: BaseException, tb: Optional[TracebackType]) -> None:
        try:
            write_error_file(path, exc_type, exc, tb)
        except OSError:
            pass  # never hide the program's own error behind ours
        previous(exc_type, exc, tb)

    sys.excepthook = hook


def install_by_default() -> None:
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if path and os.environ.get("SLURM_JOB_ID"):
        install(path)
