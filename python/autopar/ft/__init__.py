"""Per-step fault tolerance for data-parallel training (docs/ft.md): healthy ranks never stop.

A program submitted with --fault-tolerance=step and started under autopar-launch trains through
a Manager; when a rank is lost, the others give up the step, the launchers re-form the group
(a replacement in the lost rank's place, or fewer members), the newcomer receives the state from
a live member, and the step is run again. See manager.py for the loop.
"""
from .._torch import require

require("autopar.ft")

from .channel import Abandoned, LauncherChannel, Quorum  # noqa: E402  (after the check)
from .manager import Manager  # noqa: E402
from .shards import check_ledger, read_ledgers, sample_ids  # noqa: E402

__all__ = ["Manager", "Quorum", "LauncherChannel", "Abandoned", "sample_ids", "check_ledger",
           "read_ledgers"]
