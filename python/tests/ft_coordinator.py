"""The launchers' side of a fault-tolerant group, for tests of autopar.ft on one machine without
Slurm: one Unix socket per rank (the launcher's $AUTOPAR_FT_SOCKET), the joins gathered, the
group's current epoch given up when a join arrives, and the quorum decided as core/ft/quorum.cpp
decides it once every expected rank has joined. The real one is autopar-launch's (docs/ft.md);
this one lets the Python side be tested with real processes, real gloo and real kills."""
import os
import select
import socket
import threading


class Coordinator:
    def __init__(self, directory, world, min_world=None):
        self.world = world
        self.min_world = world if min_world is None else min_world
        self.expected = set(range(world))  # ranks a quorum waits for (drop() shrinks it)
        self.epoch = -1                    # the latest quorum's
        self.joins = {}                    # rank -> fields, for the next quorum
        self.conns = {}                    # rank -> its program's connection (the latest)
        self.quorums = []
        self.paths = {}
        self._listeners = {}
        for r in range(world):
            path = os.path.join(directory, f"ft-{r}.sock")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            s.listen(4)
            self.paths[r], self._listeners[s] = path, r
        self._bufs = {}
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def drop(self, rank):
        """The rank is gone for good (a node lost without a spare): quorums go on without it."""
        with self._lock:
            self.expected.discard(rank)
            self._decide_if_whole()

    def close(self):
        self._stop = True
        self._thread.join()

    def _serve(self):
        while not self._stop:
            socks = list(self._listeners) + list(self._bufs)
            ready, _, _ = select.select(socks, [], [], 0.1)
            with self._lock:
                for s in ready:
                    if s in self._listeners:
                        conn, _ = s.accept()
                        self._bufs[conn] = (self._listeners[s], b"")
                        self.conns[self._listeners[s]] = conn
                    else:
                        self._read(s)

    def _read(self, conn):
        rank, buf = self._bufs[conn]
        try:
            data = conn.recv(65536)
        except ConnectionError:  # its program was killed
            data = b""
        if not data:
            del self._bufs[conn]
            conn.close()
            return
        *lines, rest = (buf + data).split(b"\n")
        self._bufs[conn] = (rank, rest)
        for line in lines:
            kind, _, text = line.decode().partition(" ")
            if kind == "join":
                self._join(rank, dict(kv.split("=", 1) for kv in text.split()))

    def _join(self, rank, fields):
        if not self.joins and self.epoch >= 0:
            self._send_all(f"abandon epoch={self.epoch}\n")  # the group is being re-formed
        self.joins[rank] = fields
        self._decide_if_whole()

    def _decide_if_whole(self):
        if not self.joins or not self.expected <= set(self.joins):
            return
        joins = sorted((r, f) for r, f in self.joins.items() if r in self.expected)
        if len(joins) < self.min_world:
            raise RuntimeError("fewer members than min_world")
        step = max(int(f["step"]) for _, f in joins)
        sources = [r for r, f in joins if int(f["step"]) == step]
        store = dict(joins)[sources[0]]["store"]
        behind = [r for r, f in joins if int(f["step"]) != step]
        heals = [f"{to}<{sources[i % len(sources)]}" for i, to in enumerate(behind)]
        self.epoch += 1
        members = ",".join(f"{r}@{r}@{f['store']}@{f['step']}" for r, f in joins)
        line = (f"quorum epoch={self.epoch} step={step} store={store} members={members} "
                f"heals={','.join(heals)}\n")
        self.quorums.append(line)
        for r, _ in joins:
            self.conns[r].sendall(line.encode())
        self.joins = {}

    def _send_all(self, line):
        for conn in list(self.conns.values()):
            try:
                conn.sendall(line.encode())
            except OSError:
                pass
