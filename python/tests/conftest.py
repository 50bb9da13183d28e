"""The module under test is the repository's (python/autopar), not an installed one. Also what
the tests' fake autopards share."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def read_request(conn):
    """The request a client sent on CONN (its first line, JSON); None when the client closed the
    connection before a whole line."""
    buf = b""
    while b"\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buf += chunk
    return json.loads(buf.split(b"\n", 1)[0])
