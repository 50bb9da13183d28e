#!/usr/bin/env bash
# The local cluster at scale (issue 15): starts a cluster of its own with AUTOPAR_SCALE_NODES nodes
# (default 16; 32 by hand), each slurmd with its own autopard, beside the suite's cluster (own
# directory and ports), runs one job of NODES x TASKS ranks under
# `srun --mpi=pmix autopar-launch -- python3 -c ...` where every rank checks RANK/WORLD_SIZE/
# MASTER_ADDR and joins a torch.distributed gloo all_reduce, then checks that `autopar events JOBID`
# through node1's autopard merges the journals of every node. Prints one line per check and the
# times (cluster start, launch+rendezvous, events merge); stops its cluster whatever happens.
#
# Usage: scale_test.sh BUILD_DIR   (ctest: integration.scale16; run as root)
# Environment:
#   AUTOPAR_SCALE_NODES      nodes (default 16; at most 39, tests/cluster/start.sh)
#   AUTOPAR_SCALE_TASKS      ranks per node (default 2)
#   AUTOPAR_SCALE_DIR        the cluster's directory (default /tmp/autopar-cluster-scale)
#   AUTOPAR_SCALE_PORT_BASE  default: the first of 21817, 22817, ..., 25817 whose ports are all free
set -euo pipefail

build=$(cd -- "${1:?usage: scale_test.sh BUILD_DIR}" && pwd)
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
nodes=${AUTOPAR_SCALE_NODES:-16}
tasks=${AUTOPAR_SCALE_TASKS:-2}
world=$((nodes * tasks))
python=/usr/bin/python3 # Debian's interpreter, the one with torch

# Only this cluster's settings reach start.sh: nothing of the suite's (s3rver, extra autopard keys).
unset AUTOPAR_S3_ENDPOINT AUTOPAR_AUTOPARD_CONF_EXTRA AUTOPAR_PLUGSTACK_INCLUDE
export AUTOPAR_CLUSTER_DIR=${AUTOPAR_SCALE_DIR:-/tmp/autopar-cluster-scale}
export AUTOPAR_CLUSTER_NODES=$nodes
export AUTOPAR_PLUGIN=$build/spank/autopar.so
export AUTOPAR_AUTOPARD=$build/service/autopard/autopard
# As scripts/cluster-env.sh sets them for the suite's cluster, with this cluster's sockets.
export AUTOPAR_PLUGSTACK_ARGS="socket=$AUTOPAR_CLUSTER_DIR/run/autopard-%n.sock max_requeue=5 min_heartbeat_timeout=2 nccl_env=NCCL_SOCKET_IFNAME=lo"
# 32 slurmd registering on 2 cores take longer than the default 60 s allows.
export AUTOPAR_CLUSTER_TIMEOUT=${AUTOPAR_CLUSTER_TIMEOUT:-240}
export SLURM_CONF=$AUTOPAR_CLUSTER_DIR/etc/slurm.conf

say() { printf 'scale: %s\n' "$*"; }
failures=0
ok() { printf 'ok   %s\n' "$*"; }
bad() {
  failures=$((failures + 1))
  printf 'FAIL %s\n' "$*"
}
# check DESCRIPTION COMMAND...: ok if the command succeeds.
check() {
  local what=$1
  shift
  if "$@"; then ok "$what"; else bad "$what"; fi
}
stop_here() {
  bad "$*"
  exit 1
}
((EUID == 0)) || { say "error: run as root (the cluster)" >&2; exit 1; }

# free_port_base: the first base of 21817, 22817, ... where nothing listens on base..base+499
# (slurmctld, slurmd, autopard metrics and srun ports), below selftest.sh's (27817, ...) and below
# Linux's ephemeral ports (32768..60999): with a base in there, 32 nodes' worth of connections made
# one slurmd's port busy as some connection's local port ("Address already in use").
free_port_base() {
  local base listening
  listening=$(ss -Hltn | awk '{ n = split($4, a, ":"); print a[n] }')
  for ((base = 21817; base <= 25817; base += 1000)); do
    if ! awk -v lo="$base" -v hi="$((base + 499))" '$1 >= lo && $1 <= hi { found = 1 } END { exit !found }' \
      <<<"$listening"; then
      printf '%s' "$base"
      return 0
    fi
  done
  return 1
}
export AUTOPAR_CLUSTER_PORT_BASE=${AUTOPAR_SCALE_PORT_BASE:-$(free_port_base)}

work=$(mktemp -d /tmp/autopar-scale-test.XXXXXX)
chmod 0755 "$work"
cluster=0
cleanup() {
  local rc=$?
  if ((cluster)); then
    if ((rc || failures)); then
      cp "$work/job.out" "$AUTOPAR_CLUSTER_DIR/log/scale-job.out" 2>/dev/null || true
      "$here/stop.sh" >/dev/null 2>&1 || true
      say "logs kept in $AUTOPAR_CLUSTER_DIR/log" >&2
    else
      "$here/stop.sh" --clean >/dev/null 2>&1 || true
    fi
  fi
  rm -rf "$work"
  if ((rc == 0 && failures)); then rc=1; fi
  if ((rc)); then say "FAILED ($failures failed checks)" >&2; else say "passed"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# --- the cluster -------------------------------------------------------------------------------

t=$SECONDS
cluster=1
"$here/start.sh" --restart >"$work/start.log" 2>&1 ||
  { cat "$work/start.log" >&2; stop_here "start.sh with $nodes nodes ($AUTOPAR_CLUSTER_DIR)"; }
start_s=$((SECONDS - t))
idle=$(sinfo -h -N -t idle -o '%N' | sort -u | wc -l)
((idle == nodes)) || stop_here "$nodes nodes idle after start.sh (sinfo: $idle)"
ok "a cluster of $nodes nodes started in ${start_s}s ($AUTOPAR_CLUSTER_DIR, port $AUTOPAR_CLUSTER_PORT_BASE)"
socks=$(find "$AUTOPAR_CLUSTER_DIR/run" -name 'autopard-node*.sock' | wc -l)
check_autopards() {
  local deadline=$((SECONDS + 30))
  while ((socks < nodes && SECONDS < deadline)); do
    sleep 0.5
    socks=$(find "$AUTOPAR_CLUSTER_DIR/run" -name 'autopard-node*.sock' | wc -l)
  done
  ((socks == nodes))
}
check_autopards || stop_here "every node runs its autopard (sockets: $socks of $nodes)"
ok "every node runs its autopard ($socks sockets)"

# --- one job of NODES x TASKS ranks: launch and rendezvous -----------------------------------

# Each rank: the launcher's variables agree with the step, then one gloo all_reduce over all ranks
# (its sum proves every rank took part). Prints when it was done, for the launch+rendezvous time.
cat >"$work/rank.py" <<'EOF'
import os, socket, sys, time
started = time.time()
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
assert world == int(sys.argv[1]), f"WORLD_SIZE={world}, want {sys.argv[1]}"
assert rank == int(os.environ["SLURM_PROCID"]), f"RANK={rank} SLURM_PROCID={os.environ['SLURM_PROCID']}"
import torch
import torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo")  # env:// from the launcher's MASTER_ADDR/MASTER_PORT
t = torch.tensor([rank + 1.0])
dist.all_reduce(t)
assert t.item() == world * (world + 1) / 2, t
print(f"SCALE rank={rank} world={world} node={socket.gethostname()} master={os.environ['MASTER_ADDR']}"
      f" job={os.environ['SLURM_JOB_ID']} started={started:.3f} done={time.time():.3f}", flush=True)
dist.destroy_process_group()
EOF
t0=$(date +%s.%N)
rc=0
OMP_NUM_THREADS=1 timeout 600 srun -N "$nodes" --ntasks-per-node="$tasks" --mpi=pmix \
  "$build/launcher/autopar-launch" -- "$python" "$work/rank.py" "$world" >"$work/job.out" 2>&1 || rc=$?
t1=$(date +%s.%N)
((rc == 0)) || { tail -n 30 "$work/job.out" >&2; stop_here "srun of $world ranks exited with $rc"; }
# rank world node master job started done, one line a rank.
grep '^SCALE ' "$work/job.out" | sed -E 's/[a-z]+=//g; s/^SCALE //' | sort -n >"$work/ranks"
check "every rank 0..$((world - 1)) reports once, WORLD_SIZE=$world" \
  test "$(cut -d' ' -f1 "$work/ranks" | tr '\n' ' ')" = "$(seq -s ' ' 0 $((world - 1))) "
# The launcher gives MASTER_ADDR as rank 0's node's address (127.0.2.1 for node1).
node0=$(awk '$1 == 0 { print $3 }' "$work/ranks")
masters=$(awk '{ print $4 }' "$work/ranks" | sort -u | tr '\n' ' ')
node1_addr=$(getent ahostsv4 node1 | awk 'NR == 1 { print $1 }')
check "rank 0 runs on node1 and every rank's MASTER_ADDR is node1's (rank 0 on $node0; MASTER_ADDR $masters)" \
  test "$node0 $masters" = "node1 $node1_addr " -o "$node0 $masters" = "node1 node1 "
check "$tasks ranks on each of the $nodes nodes" \
  test "$(awk '{ print $3 }' "$work/ranks" | sort | uniq -c | awk -v t="$tasks" '$1 == t' | wc -l)" = "$nodes"
job=$(awk '{ print $5 }' "$work/ranks" | sort -u)
[[ $job =~ ^[0-9]+$ ]] || stop_here "one job id in the ranks' output (got '$job')"
# launch: srun until the last rank's python runs; launch+rendezvous: until the last rank's all_reduce
# is done (most of the difference is 2 cores importing torch in every rank).
launch_s=$(awk -v t0="$t0" 'BEGIN { m = 0 } $6 > m { m = $6 } END { printf "%.1f", m - t0 }' "$work/ranks")
rdv_s=$(awk -v t0="$t0" 'BEGIN { m = 0 } $7 > m { m = $7 } END { printf "%.1f", m - t0 }' "$work/ranks")
srun_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
ok "job $job: $world ranks launched in ${launch_s}s and joined one gloo all_reduce in ${rdv_s}s (srun ${srun_s}s)"

# --- autopar events: every node's journal, merged through node1's autopard --------------------

# Every node's autopard publishes its journal of the job at most once a second; wait for all.
t=$(date +%s.%N)
deadline=$((SECONDS + 60))
while :; do
  "$build/cli/autopar" events "$job" --json --socket "$AUTOPAR_CLUSTER_DIR/run/autopard-node1.sock" \
    >"$work/events.json" 2>"$work/events.err" || true
  have=$("$python" -c 'import json, sys; print(len({e["node"] for e in json.load(open(sys.argv[1]))["events"]}))' \
    "$work/events.json" 2>/dev/null || echo 0)
  ((have >= nodes || SECONDS >= deadline)) && break
  sleep 0.5
done
events_s=$(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
count=$("$python" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["events"]))' \
  "$work/events.json" 2>/dev/null || echo 0)
check "autopar events $job merges the journals of all $nodes nodes ($have nodes, $count events, ${events_s}s)" \
  test "$have" = "$nodes"
check "autopar events wrote nothing to stderr" test ! -s "$work/events.err"

say "times at $nodes nodes x $tasks ranks: cluster start ${start_s}s, launch ${launch_s}s, launch+rendezvous ${rdv_s}s" \
  "(srun ${srun_s}s), events of all nodes ${events_s}s after the job"
