"""The attacker of tests/security/test_restart_channel.py (the user, or any process that can reach
a launcher's restart channel): against each ENDPOINT ("ADDR:PORT", one launcher of the job each)

1. opens IDLE connections that never send anything, and sends forged messages (one line per
   connection, as launchers send them; launcher/restart_logic.h) with a wrong token: stop
   notices, failure reports, verdicts (exit 0; restart elsewhere), a restore value, and the same
   with an empty token, no token, a token of the wrong length; also a 4 KiB line without a
   newline. Prints FORGED {"connected": N, "forged": M} once all is sent.
2. after --idle-wait seconds (longer than the channel's 2 s for a silent connection) the forged
   lines once more (a launcher drops stale connections when it next reads), then prints
   CLOSED {"ENDPOINT": K, ...}: how many of the idle connections of step 1 the launcher has
   closed (all of them, or as many as within 5 s);
3. opens IDLE fresh idle connections again (held through the crash that follows), prints
   HOLDING {"connected": N}, and keeps them until its stdin is closed.

    channel_flood.py [--idle N] [--idle-wait S] ENDPOINT...
"""
import argparse
import errno
import json
import secrets
import socket
import sys
import time


def address(ep):
    host, port = ep.rsplit(":", 1)
    return host, int(port)


def connect(ep):
    s = socket.create_connection(address(ep), timeout=5)
    s.setblocking(False)
    return s


def forged_lines(rank):
    """Plausible messages to the launcher of step rank `rank`, none with the step's token."""
    other = 1 - rank if rank in (0, 1) else 0
    now = f"{time.time():.3f}"
    failure = (f"class=rank-crash exit=137 signal=9 run_s=1.0 node=node{other + 1} "
               f"detected={now}")
    lines = []
    for token in (secrets.token_hex(16), secrets.token_hex(16).upper(), secrets.token_hex(15),
                  secrets.token_hex(17), "", None):
        t = "" if token is None else f"token={token} "
        lines += [
            f"autopar-stop {t}rank={other} generation=0 {failure}",
            f"autopar-report {t}rank={other} generation=0 state=failed {failure}",
            f"autopar-report {t}rank={other} generation=0 state=stopped",
            f"autopar-verdict {t}rank=0 generation=0 action=exit code=0",
            f"autopar-verdict {t}rank=0 generation=0 action=restart master=127.0.0.1:9 "
            "resume=-1 active=0,1",
            f"autopar-value {t}rank=0 generation=0 key=restore value=-1",
        ]
    return [(line + "\n").encode() for line in lines] + [b"autopar-stop " + b"x" * 4096]


def send_forged(ep, rank):
    n = 0
    for line in forged_lines(rank):
        with socket.create_connection(address(ep), timeout=5) as s:
            s.sendall(line)
        n += 1
    return n


def closed_by_peer(s):
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError as e:
        return e.errno in (errno.ECONNRESET, errno.EPIPE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle", type=int, default=200)
    ap.add_argument("--idle-wait", type=float, default=2.5)
    ap.add_argument("endpoints", nargs="+")
    a = ap.parse_args()

    idle = {ep: [connect(ep) for _ in range(a.idle)] for ep in a.endpoints}
    forged = sum(send_forged(ep, rank) for rank, ep in enumerate(a.endpoints))
    print("FORGED " + json.dumps({"connected": sum(map(len, idle.values())), "forged": forged}),
          flush=True)

    time.sleep(a.idle_wait)
    forged += sum(send_forged(ep, rank) for rank, ep in enumerate(a.endpoints))
    closed = {ep: set() for ep in idle}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(len(closed[ep]) < len(idle[ep]) for ep in idle):
        time.sleep(0.1)
        for ep, socks in idle.items():
            closed[ep] |= {i for i, s in enumerate(socks) if i in closed[ep] or closed_by_peer(s)}
    print("CLOSED " + json.dumps({ep: len(c) for ep, c in closed.items()}), flush=True)
    for socks in idle.values():
        for s in socks:
            s.close()

    held = [connect(ep) for ep in a.endpoints for _ in range(a.idle)]
    print("HOLDING " + json.dumps({"connected": len(held)}), flush=True)
    sys.stdin.read()  # until the test is done
    for s in held:
        s.close()


if __name__ == "__main__":
    main()
