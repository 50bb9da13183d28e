#!/usr/bin/env bash
# Kills one node of the local test cluster at once, like a power failure: SIGKILL to the init of
# the node's PID namespace, so the kernel ends its slurmd, slurmstepds, tasks and autopard together.
# Waits until none of them is left and reports how many processes died. slurmctld notices after
# SlurmdTimeout (10 s) and marks the node DOWN; revive-node.sh brings it back.
#
# Usage: kill-node.sh NODE
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

parse_node_arg "${BASH_SOURCE[0]}" "$@"
node=$NODE

[[ -e $CLUSTER_DIR/$MARKER_NAME ]] || die "no cluster in $CLUSTER_DIR"
lock_cluster
node_init_pid "$node" >/dev/null || die "$node is not running (no live namespace init recorded in $PIDS)"
count=$(stop_nodes KILL "$node") || die "could not kill $node"
log "killed $node: $count processes died"
