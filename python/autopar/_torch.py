"""The PyTorch that autopar's torch parts (autopar.ft, autopar.dcp, autopar.health, the
ecosystem's callbacks) support: pyproject.toml's `torch` extra, the same range (a unit test holds
them together). They take torch from require(); under a torch outside the range, or none, the
program ends with one line naming what it has and what it needs, not a traceback from deep
inside an import."""
import re
import sys
from types import ModuleType
from typing import Tuple

MINIMUM = (2, 6)  # FSDP2's fully_shard public, DCP's async_save, torch.load's weights_only default
BELOW = (3, 0)
RANGE = f">={MINIMUM[0]}.{MINIMUM[1]},<{BELOW[0]}"


def parse(version: str) -> Tuple[int, int]:
    """(major, minor) of a torch version string such as "2.15.0+cu132" or "1.13.0a0+git..."."""
    m = re.match(r"(\d+)\.(\d+)", version)
    if not m:
        raise ValueError(f"not a torch version: {version!r}")
    return int(m.group(1)), int(m.group(2))


def require(part: str) -> ModuleType:
    """torch, when its version is in RANGE; otherwise exits with one line (SystemExit, so that
    nothing above prints a traceback for it). `part`: the autopar module that needs it."""
    try:
        import torch
    except ImportError as e:
        raise SystemExit(f"autopar: {part} needs PyTorch (torch{RANGE}); this Python "
                         f"({sys.executable}) has none: {e}") from None
    version = getattr(torch, "__version__", "unknown")
    try:
        ok = MINIMUM <= parse(str(version)) < BELOW
    except ValueError:
        ok = False
    if not ok:
        raise SystemExit(f"autopar: {part} supports torch{RANGE}; this Python ({sys.executable}) "
                         f"has torch {version} (pip install 'torch{RANGE}')")
    return torch
