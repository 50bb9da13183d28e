"""The user's side of tests/security/test_recover_claims.py: a task of the user's own job sends
autopard a `recover` request (core/proto/protocol.h) that claims the nodes in argv[1] are lost
(class=node-loss lost=NODES, as rank 0's launcher sends when other launchers are gone), and prints
autopard's reply (REPLY <json>).

With argv[2] = ADDR:PORT (a slurmd), the claim is made while that slurmd's accept queue is full:
connections it takes into its at most 256 request threads (each waits up to MessageTimeout for a
request that never comes) and then into its listen backlog (somaxconn) until its kernel drops new
SYNs, so that a probe of it times out as a dead node's would. Held until autopard has replied
(or this task is killed by the requeue), then closed: FLOODED <n> names how many were open.
"""
import json
import os
import socket
import sys
import time

lost = sys.argv[1]
held = []
if len(sys.argv) > 2:
    import resource
    import errno
    addr, port = sys.argv[2].rsplit(":", 1)
    backlog = int(open("/proc/sys/net/core/somaxconn").read())
    want = 256 + backlog + 512
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < want + 64:
        sys.exit(f"claim_lost: {want} connections need RLIMIT_NOFILE >= {want + 64} (hard {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want + 64, hard))
    for _ in range(want):
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        c.setblocking(False)
        err = c.connect_ex((addr, int(port)))
        if err not in (0, errno.EINPROGRESS):
            sys.exit(f"claim_lost: connect to {addr}:{port}: {os.strerror(err)}")
        held.append(c)
    time.sleep(2)  # slurmd takes its 256 and stops accepting; the backlog fills
    print(f"FLOODED {len(held)}", flush=True)
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
