"""The launchers' side of a fault-tolerant group for tests of autopar.ft on one machine without
Slurm: the real FtGroup and quorum of autopar-launch (launcher/ft_group.cpp, core/ft/quorum.cpp),
run by the build's ft-group-harness (launcher/ft_group_harness.cpp), one Unix socket per rank
(the launcher's $AUTOPAR_FT_SOCKET). AUTOPAR_BUILD_DIR names the build (default <repo>/build)."""
import os
import subprocess
from pathlib import Path

BUILD = Path(os.environ.get("AUTOPAR_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
HARNESS = BUILD / "launcher" / "ft-group-harness"


class Harness:
    def __init__(self, directory, world, min_world=None):
        if not HARNESS.exists():
            raise FileNotFoundError(f"{HARNESS} is not built (scripts/build.sh; or set AUTOPAR_BUILD_DIR)")
        self._proc = subprocess.Popen([str(HARNESS), str(world), str(directory), str(min_world or 0)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.paths = {}
        for line in self._proc.stdout:
            if line.strip() == "ready":
                break
            _, rank, path = line.split()
            self.paths[int(rank)] = path

    def _tell(self, line):
        self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()

    def replaced(self, rank):
        """Rank's program was killed and is replaced: its launcher counts it, the next one joins anew."""
        self._tell(f"replaced {rank}")

    def drop(self, rank):
        """The rank's launcher is gone with its node (no spare): quorums go on without it."""
        self._tell(f"drop {rank}")

    def close(self):
        """Stops the launchers; raises what the group said if it could not go on."""
        self._tell("quit")
        out = self._proc.stdout.read()
        if self._proc.wait(timeout=30) != 0:
            raise RuntimeError(f"ft-group-harness: {out.strip()}")
