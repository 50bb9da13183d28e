"""The program's line to its autopar-launch in a fault-tolerant run (docs/ft.md): a Unix socket
the launcher names in $AUTOPAR_FT_SOCKET. The program asks to join the next quorum (after its
start, or when a collective of its group broke); the launchers agree on the quorum and its
launcher answers with it; a launcher also tells its program to give up a collective that cannot
complete (the group is being re-formed because a member is gone). One line per message,
"KIND v=1 key=value ...", values without spaces: core/ft/messages.h's schema, version
MESSAGE_VERSION, pinned with the launcher's end by shared test vectors
(core/ft/messages_vectors.json; python/tests/test_ft_messages.py). Standard library only."""
from __future__ import annotations

import os
import select
import socket
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

MESSAGE_VERSION = 1


@dataclass
class Member:
    rank: int
    launcher: int
    store: str
    step: int


@dataclass
class Quorum:
    """One epoch of the group: its members in rank order, the step they run next, the store
    their group meets on, and (to rank, from rank) for each member that receives the state."""
    epoch: int
    step: int
    store: str
    members: List[Member]
    heals: List[Tuple[int, int]] = field(default_factory=list)

    @property
    def ranks(self) -> List[int]:
        return [m.rank for m in self.members]

    def position(self, rank: int) -> int:
        return self.ranks.index(rank)


def parse_line(line: str) -> Tuple[str, Dict[str, str]]:
    """"KIND key=value ..." (a launcher quotes an empty value: key="")."""
    kind, _, rest = line.strip().partition(" ")
    fields = {}
    for kv in rest.split():
        if "=" in kv:
            k, v = kv.split("=", 1)
            fields[k] = v[1:-1] if len(v) >= 2 and v[0] == v[-1] == '"' else v
    return kind, fields


def format_line(kind: str, **fields: object) -> str:
    for k, v in fields.items():
        if not str(v) or any(c.isspace() for c in str(v)):
            raise ValueError(f"{kind}: {k}: '{v}' is empty or holds white space")
    return kind + "".join(f" {k}={v}" for k, v in fields.items()) + "\n"


def check_version(kind: str, fields: Dict[str, str]) -> None:
    """A message of another version than this module's is refused, naming it."""
    if fields.get("v") != str(MESSAGE_VERSION):
        got = f"'{fields['v']}'" if "v" in fields else "missing"
        raise ValueError(f"autopar.ft: {kind}: version {got}, not {MESSAGE_VERSION}")


def join_line(epoch: int, step: int, store: str) -> str:
    """The program's join (core/ft/messages.h's FtProgramJoin)."""
    return format_line("join", v=MESSAGE_VERSION, epoch=epoch, step=step, store=store)


def quorum_of(fields: Dict[str, str]) -> Quorum:
    """The quorum a launcher sent (core/ft/messages.h's FtQuorumFields)."""
    check_version("quorum", fields)
    members = []
    for text in fields["members"].split(","):
        rank, launcher, store, step = text.split("@")
        members.append(Member(int(rank), int(launcher), store, int(step)))
    heals = []
    for text in filter(None, fields.get("heals", "").split(",")):
        to, frm = text.split("<")
        heals.append((int(to), int(frm)))
    return Quorum(int(fields["epoch"]), int(fields["step"]), fields["store"], members, heals)


class Abandoned(Exception):
    """The group this member was working in is being re-formed: its collective cannot complete."""


class LauncherChannel:
    """A connection to this rank's launcher."""

    def __init__(self, path: Optional[str] = None, timeout_s: float = 600.0) -> None:
        path = path or os.environ.get("AUTOPAR_FT_SOCKET")
        if not path:
            raise RuntimeError("autopar.ft: $AUTOPAR_FT_SOCKET is not set: run the program under "
                               "autopar-launch in a job submitted with --fault-tolerance=step")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.timeout_s = timeout_s
        self._buf = b""
        self.abandoned_epoch = -1  # the latest epoch the launcher said to give up

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, kind: str, **fields: object) -> None:
        self.sock.sendall(format_line(kind, **fields).encode())

    def _lines(self, wait_s: Optional[float]) -> List[str]:
        """The whole lines that arrived, waiting up to wait_s for the first (None: for ever)."""
        if b"\n" not in self._buf:
            ready, _, _ = select.select([self.sock], [], [], wait_s)
            if ready:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("autopar.ft: the launcher closed the channel")
                self._buf += chunk
        *whole, self._buf = self._buf.split(b"\n")
        return [w.decode() for w in whole]

    def poll(self) -> None:
        """Takes the notices that arrived (abandon); raises Abandoned when one names `epoch` or
        later (see check)."""
        for line in self._lines(0):
            self._take(line)

    def _take(self, line: str) -> Optional[Quorum]:
        kind, fields = parse_line(line)
        if kind == "abandon":
            check_version(kind, fields)
            self.abandoned_epoch = max(self.abandoned_epoch, int(fields["epoch"]))
        elif kind == "quorum":
            return quorum_of(fields)
        return None

    def join(self, epoch: int, step: int, store: str) -> Quorum:
        """Asks to train in the quorum after `epoch` (-1: the first) from `step` (-1: no state);
        the quorum the launchers agreed on."""
        self.sock.sendall(join_line(epoch, step, store).encode())
        while True:
            lines = self._lines(self.timeout_s)
            if not lines and b"\n" not in self._buf:
                raise TimeoutError(f"autopar.ft: no quorum from the launcher in {self.timeout_s:.0f} s")
            for line in lines:
                q = self._take(line)
                if q is not None and q.epoch > epoch:
                    return q
