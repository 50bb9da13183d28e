"""The user's side of tests/security/test_event_caps.py, in a one-task step of the user's job:
sends its node's autopard events for the job in a tight loop, all over ONE connection (the
protocol carries several requests per connection, core/proto/protocol.h), until one is refused
or LIMIT have been sent, and prints

    JOB <id>
    RESULT {"accepted": N, "sent": M, "error": "<the refusal, or null>", "seconds": S,
            "again": "<the reply's error to one more event over a fresh connection, or null>"}

    flood_events.py KIND DETAIL_BYTES LIMIT [RANK]

KIND: the events' kind; DETAIL_BYTES: each event's detail (at most 65536, the per-event limit);
RANK: the rank the events claim (default 0).
"""
import json
import os
import socket
import sys
import time

kind, detail_bytes, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rank = int(sys.argv[4]) if len(sys.argv) > 4 else 0
job = os.environ["SLURM_JOB_ID"]
print(f"JOB {job}", flush=True)

t0 = time.monotonic()
accepted, sent, error = 0, 0, None
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
    s.settimeout(10)
    s.connect(os.environ["AUTOPAR_SOCKET"])
    rfile = s.makefile("rb")
    while sent < limit:
        # Each detail differs (its number first), so nothing could be folded or deduplicated.
        detail = f"{sent:08d} ".ljust(detail_bytes, "x") if detail_bytes else ""
        req = {"v": 1, "op": "event", "job_id": job, "rank": rank, "kind": kind, "detail": detail}
        s.sendall((json.dumps(req, separators=(",", ":")) + "\n").encode())
        sent += 1
        line = rfile.readline()
        if not line:
            error = "autopard closed the connection"
            break
        reply = json.loads(line)
        if not reply.get("ok"):
            error = reply.get("error", "refused without an error")
            break
        accepted += 1
seconds = round(time.monotonic() - t0, 3)
again = None
if error:
    # The cap is the job's, not the connection's: the same event over a fresh connection is
    # refused as well.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(os.environ["AUTOPAR_SOCKET"])
        req = {"v": 1, "op": "event", "job_id": job, "rank": rank, "kind": kind,
               "detail": "again ".ljust(detail_bytes, "x")}
        s.sendall((json.dumps(req) + "\n").encode())
        reply = json.loads(s.makefile("rb").readline() or b"{}")
        again = None if reply.get("ok") else reply.get("error", "closed")
print("RESULT " + json.dumps({"accepted": accepted, "sent": sent, "error": error,
                              "seconds": seconds, "again": again}), flush=True)
