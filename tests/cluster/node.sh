#!/usr/bin/env bash
# One "node" of the local test cluster: runs as PID 1 of its own PID namespace (with its own /proc
# and hostname), started by start.sh/revive-node.sh through `unshare --pid --fork --mount-proc --uts`.
# Starts the node's autopard (when AUTOPAR_AUTOPARD names an executable), then `slurmd -D -N NODE`,
# and reaps every orphan (slurmd double-forks its slurmstepds, which then belong to this init).
#
# Usage: node.sh NODE [CLUSTER_DIR]
# Ends when slurmd ends, or on SIGTERM/SIGINT (after stopping slurmd). Because this script is the
# namespace's init, the kernel then kills every process left in the namespace (slurmstepds, tasks,
# autopard): a node dies as a whole, which is what kill-node.sh relies on (it sends SIGKILL).
set -euo pipefail

node=${1:?usage: node.sh NODE [CLUSTER_DIR]}
dir=${2:-${AUTOPAR_CLUSTER_DIR:-/tmp/autopar-cluster}}
conf=$dir/etc/slurm.conf

say() { printf '%s node.sh %s: %s\n' "$(date -u +%FT%TZ)" "$node" "$*"; }

if (($$ != 1)); then
  say "error: must be PID 1 of its own PID namespace (start it with tests/cluster/start.sh)" >&2
  exit 1
fi
# Only when started with --uts by start.sh: otherwise this would rename the whole machine.
if [[ ${AUTOPAR_NODE_UTS:-0} == 1 ]]; then
  hostname "$node"
fi

slurmd_pid=""
autopard_pid=""

# alive PID: exists and is not a zombie (kill -0 also succeeds for a zombie not yet reaped).
alive() {
  local stat=""
  [[ -n $1 ]] || return 1
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z && ${stat:0:1} != X ]]
}
stopping=0

shutdown() {
  stopping=1
  say "stopping"
  # slurmd alone leaves steps running; they die with this init when it exits just below.
  if [[ -n $slurmd_pid ]]; then kill -TERM "$slurmd_pid" 2>/dev/null || true; fi
  if [[ -n $autopard_pid ]]; then kill -TERM "$autopard_pid" 2>/dev/null || true; fi
  local i
  for ((i = 0; i < 50; i++)); do
    alive "$slurmd_pid" || break
    sleep 0.1
  done
  exit 0
}
trap shutdown TERM INT

if [[ -n ${AUTOPAR_AUTOPARD:-} ]]; then
  if [[ -x $AUTOPAR_AUTOPARD ]]; then
    "$AUTOPAR_AUTOPARD" --config "$dir/etc/autopard-$node.conf" >>"$dir/log/autopard-$node.log" 2>&1 &
    autopard_pid=$!
    say "autopard started (pid $autopard_pid in this namespace)"
  else
    say "warning: AUTOPAR_AUTOPARD=$AUTOPAR_AUTOPARD is not executable; no autopard on this node"
  fi
fi

slurmd -D -N "$node" -f "$conf" &
slurmd_pid=$!
say "slurmd started (pid $slurmd_pid in this namespace)"

# `wait PID` returns when slurmd exits or a trapped signal arrives; while waiting, bash reaps every
# child that exits, including the orphans the kernel re-parents to this init.
while :; do
  rc=0
  wait "$slurmd_pid" || rc=$?
  ((stopping)) && exit 0
  if ! alive "$slurmd_pid"; then
    say "slurmd exited with status $rc; the node goes down with it"
    exit "$rc"
  fi
done
