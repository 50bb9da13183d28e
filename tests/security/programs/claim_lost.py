"""The user's side of tests/security/test_recover_claims.py: a task of the user's own job sends
autopard a `recover` request (core/proto/protocol.h) that claims the nodes in argv[1] are lost
(class=node-loss lost=NODES, as rank 0's launcher sends when other launchers are gone), and prints
autopard's reply (REPLY <json>).
"""
import json
import os
import socket
import sys
import time

lost = sys.argv[1]
node = os.environ.get("SLURMD_NODENAME", "")
detail = (f"class=node-loss generation=0 lost={lost} spares=0 node={node} run_s=5.0 "
          f"detected={time.time():.3f}")
request = {"v": 1, "op": "recover", "job_id": os.environ["SLURM_JOB_ID"], "rank": 0,
           "node": node, "detail": detail}
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
    s.settimeout(60)
    s.connect(os.environ["AUTOPAR_SOCKET"])
    s.sendall((json.dumps(request) + "\n").encode())
    buf = b""
    while b"\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
print("REPLY " + buf.split(b"\n", 1)[0].decode(errors="replace"), flush=True)
