"""The fault-tolerant group's rendezvous store, open only to the job's own ranks (docs/ft.md,
docs/security.md).

Every member serves one; the quorum names whose the group meets on. Anyone on a node can connect
to a TCP port, and see which ports a user listens on (/proc/net/tcp), so the store trusts no
connection until it proves the job's key ($AUTOPAR_FT_KEY, which the job's launchers derive from
their step's secret and give only to their programs):

- a connection gets a random challenge and must answer HMAC-SHA256(key, challenge) within
  HANDSHAKE_S, or it is closed; at most MAX_PENDING connections wait to answer (the oldest is
  closed to make room), each in its own thread, so a silent or half-sent request stalls nobody
  (torch 1.13's TCPStore server blocks on one: a single byte stops it for every rank);
- every value a member sets carries an HMAC over its key and bytes, checked on every get, so a
  value that did not come from the job (a store that is not the job's) is refused, never used;
- keys live under a namespace derived from the key, not a guessable prefix.

The client is a torch.distributed.Store, which ProcessGroupGloo meets its peers through.
"""
from __future__ import annotations

import datetime
import hashlib
import hmac
import os
import secrets
import socket
import struct
import threading
import time
from typing import Any, Dict, List, Optional

import torch.distributed as dist

HANDSHAKE_S = 2.0
MAX_PENDING = 64
MAX_VALUE = 16 << 20
_MAC = 32

_SET, _GET, _ADD, _CHECK, _DELETE, _NUM_KEYS, _CAS = range(1, 8)
_OK, _TIMEOUT, _MISSING = 0, 1, 2


class StoreError(RuntimeError):
    """The store refused a request, or a value in it is not the job's."""


def job_key() -> bytes:
    """The job's key for its group, from $AUTOPAR_FT_KEY (64 hex digits, set by autopar-launch)."""
    text = os.environ.get("AUTOPAR_FT_KEY", "")
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < 16:
        raise RuntimeError("autopar.ft: $AUTOPAR_FT_KEY is missing or malformed: run the program "
                           "under autopar-launch in a job submitted with --fault-tolerance=step")
    return key


def derive(key: bytes, purpose: str) -> bytes:
    return hmac.new(key, purpose.encode(), hashlib.sha256).digest()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise ConnectionError("the store's peer closed the connection")
        out += chunk
    return bytes(out)


def _send_frame(sock: socket.socket, *fields: bytes) -> None:
    sock.sendall(b"".join(struct.pack("!I", len(f)) + f for f in fields))


def _recv_field(sock: socket.socket, limit: int = MAX_VALUE + 4096) -> bytes:
    (n,) = struct.unpack("!I", _recv_exact(sock, 4))
    if n > limit:
        raise ConnectionError(f"a field of {n} bytes (at most {limit})")
    return _recv_exact(sock, n)


class StoreServer:
    """Serves the store on `host` (an ephemeral port: `port`) for clients that hold `key`.
    Threads are daemons; the server lives as long as the process."""

    def __init__(self, key: bytes, host: str) -> None:
        self._auth = derive(key, "autopar-ft-store-auth")
        self._data: Dict[str, bytes] = {}
        self._cond = threading.Condition()
        self._pending: List[socket.socket] = []
        self._pending_lock = threading.Lock()
        self.refused = 0  # connections that did not prove the key
        self._listener = socket.create_server((host, 0), backlog=128)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, name="autopar-ft-store", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._pending_lock:
                if len(self._pending) >= MAX_PENDING:
                    _close(self._pending.pop(0))
                self._pending.append(conn)
            threading.Thread(target=self._serve, args=(conn,), name="autopar-ft-store-conn",
                             daemon=True).start()

    def _handshake(self, conn: socket.socket) -> bool:
        challenge = secrets.token_bytes(16)
        try:
            conn.settimeout(HANDSHAKE_S)
            conn.sendall(challenge)
            answer = _recv_exact(conn, _MAC)
        except OSError:
            return False
        finally:
            with self._pending_lock:
                if conn in self._pending:
                    self._pending.remove(conn)
        return hmac.compare_digest(answer, hmac.new(self._auth, challenge, hashlib.sha256).digest())

    def _serve(self, conn: socket.socket) -> None:
        try:
            if not self._handshake(conn):
                self.refused += 1
                return
            conn.settimeout(None)
            conn.sendall(b"\x00")  # admitted
            while True:
                op = _recv_field(conn, 1)
                self._answer(conn, op[0] if op else 0)
        except (OSError, ConnectionError, struct.error):
            pass
        finally:
            _close(conn)

    def _answer(self, conn: socket.socket, op: int) -> None:
        if op == _SET:
            key, value = _recv_field(conn).decode(), _recv_field(conn)
            with self._cond:
                self._data[key] = value
                self._cond.notify_all()
            _send_frame(conn, bytes([_OK]))
        elif op in (_GET, _CHECK):
            keys = _recv_field(conn).decode().split("\0")
            (timeout_ms,) = struct.unpack("!q", _recv_field(conn, 8))
            deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms >= 0 else None
            with self._cond:
                ready = self._cond.wait_for(
                    lambda: all(k in self._data for k in keys),
                    None if deadline is None else max(0.0, deadline - time.monotonic()))
                value = self._data.get(keys[0], b"") if ready and op == _GET else b""
            _send_frame(conn, bytes([_OK if ready else _TIMEOUT]), value)
        elif op == _ADD:
            key = _recv_field(conn).decode()
            (amount,) = struct.unpack("!q", _recv_field(conn, 8))
            with self._cond:
                total = int(self._data.get(key, b"0")) + amount
                self._data[key] = str(total).encode()
                self._cond.notify_all()
            _send_frame(conn, bytes([_OK]), struct.pack("!q", total))
        elif op == _CAS:
            name, expected, desired = (_recv_field(conn) for _ in range(3))
            with self._cond:
                current = self._data.get(name.decode())
                if (current is None and not expected) or current == expected:
                    self._data[name.decode()] = current = desired
                    self._cond.notify_all()
            _send_frame(conn, bytes([_OK]), current if current is not None else expected)
        elif op == _DELETE:
            key = _recv_field(conn).decode()
            with self._cond:
                found = self._data.pop(key, None) is not None
            _send_frame(conn, bytes([_OK if found else _MISSING]))
        elif op == _NUM_KEYS:
            with self._cond:
                n = len(self._data)
            _send_frame(conn, bytes([_OK]), struct.pack("!q", n))
        else:
            raise ConnectionError(f"unknown request {op}")


def _as_bytes(value: Any) -> bytes:
    """A value as the Store API takes one (str or bytes-like) as bytes."""
    return value.encode() if isinstance(value, str) else bytes(value)


def _close(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


class AuthStore(dist.Store):
    """A client of a StoreServer, as a torch.distributed.Store: keys under `namespace` (itself
    under the key's secret namespace), every value sealed with an HMAC and checked when read.
    Thread-safe (one request at a time). `release()` closes it: gloo needs the store only to
    connect, and keeps it for its group's whole life."""

    def __init__(self, key: bytes, endpoint: str, namespace: str,
                 timeout: datetime.timedelta) -> None:
        super().__init__()
        self._seal_key = derive(key, "autopar-ft-store-values")
        self._prefix = derive(key, "autopar-ft-store-names").hex()[:32] + "/" + namespace + "/"
        self._timeout_ms = int(timeout.total_seconds() * 1000)
        self._lock = threading.Lock()
        host, port = endpoint.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=timeout.total_seconds())
        try:
            challenge = _recv_exact(sock, 16)
            sock.sendall(hmac.new(derive(key, "autopar-ft-store-auth"), challenge,
                                  hashlib.sha256).digest())
            if _recv_exact(sock, 1) != b"\x00":
                raise StoreError("autopar.ft: the group's store did not admit this member")
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        self._sock: Optional[socket.socket] = sock

    def abort(self) -> None:
        """Ends a request another thread is blocked in (it fails at once); the lock is not taken."""
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def release(self) -> None:
        with self._lock:
            if self._sock is not None:
                _close(self._sock)
                self._sock = None

    def _request(self, op: int, *fields: bytes) -> List[bytes]:
        with self._lock:
            if self._sock is None:
                raise StoreError("autopar.ft: the rendezvous store was given back")
            _send_frame(self._sock, bytes([op]), *fields)
            status = _recv_field(self._sock, 1)
            extra = [] if op in (_SET, _DELETE) else [_recv_field(self._sock)]
        return [status, *extra]

    def _name(self, key: str) -> bytes:
        return (self._prefix + key).encode()

    def _seal(self, key: str, value: bytes) -> bytes:
        return hmac.new(self._seal_key, self._name(key) + b"\0" + value, hashlib.sha256).digest() + value

    def _open(self, key: str, sealed: bytes) -> bytes:
        mac, value = sealed[:_MAC], sealed[_MAC:]
        if len(sealed) < _MAC or not hmac.compare_digest(
                mac, hmac.new(self._seal_key, self._name(key) + b"\0" + value, hashlib.sha256).digest()):
            raise StoreError(f"autopar.ft: the group's store holds a value for '{key}' that no "
                             "member of this job wrote (refused)")
        return value

    def set(self, key: str, value: Any) -> None:  # noqa: A003 (Store's name)
        self._request(_SET, self._name(key), self._seal(key, _as_bytes(value)))

    def get(self, key: str) -> bytes:
        status, sealed = self._request(_GET, self._name(key), struct.pack("!q", self._timeout_ms))
        if status[0] != _OK:
            raise StoreError(f"autopar.ft: '{key}' not in the group's store after "
                             f"{self._timeout_ms / 1000:.0f} s")
        return self._open(key, sealed)

    def wait(self, keys: List[str], timeout: Optional[datetime.timedelta] = None) -> None:
        ms = self._timeout_ms if timeout is None else int(timeout.total_seconds() * 1000)
        status, _ = self._request(_CHECK, b"\0".join(self._name(k) for k in keys), struct.pack("!q", ms))
        if status[0] != _OK:
            raise StoreError(f"autopar.ft: {keys} not in the group's store after {ms / 1000:.0f} s")

    def check(self, keys: List[str]) -> bool:
        status, _ = self._request(_CHECK, b"\0".join(self._name(k) for k in keys), struct.pack("!q", 0))
        return status[0] == _OK

    def add(self, key: str, amount: int) -> int:
        # Counters are plain (gloo never reads them through get): an integer carries no secret.
        _, total = self._request(_ADD, self._name(key), struct.pack("!q", int(amount)))
        return int(struct.unpack("!q", total)[0])

    def compare_set(self, key: str, expected: Any, desired: Any) -> bytes:
        sealed_expected = self._seal(key, _as_bytes(expected)) if expected else b""
        _, current = self._request(_CAS, self._name(key), sealed_expected, self._seal(key, _as_bytes(desired)))
        return self._open(key, current) if current else b""

    def delete_key(self, key: str) -> bool:
        (status,) = self._request(_DELETE, self._name(key))
        return status[0] == _OK

    def num_keys(self) -> int:
        _, n = self._request(_NUM_KEYS)
        return int(struct.unpack("!q", n)[0])

    def set_timeout(self, timeout: datetime.timedelta) -> None:
        self._timeout_ms = int(timeout.total_seconds() * 1000)
