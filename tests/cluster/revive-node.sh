#!/usr/bin/env bash
# Brings a node killed by kill-node.sh back: starts its namespace and slurmd again (node.sh), resumes
# it in Slurm if it stays DOWN, and waits until it is idle (or allocated).
#
# Usage: revive-node.sh NODE
# Environment: AUTOPAR_CLUSTER_TIMEOUT (seconds to wait, default 60) and the other variables of
# start.sh that locate the cluster (AUTOPAR_CLUSTER_DIR, AUTOPAR_CLUSTER_PORT_BASE). The node runs
# the autopard that start.sh was given (AUTOPAR_AUTOPARD at start time).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

parse_node_arg "${BASH_SOURCE[0]}" "$@"
node=$NODE
timeout=${AUTOPAR_CLUSTER_TIMEOUT:-60}

[[ -f $CONF ]] || die "no cluster in $CLUSTER_DIR; run start.sh first"
lock_cluster
ctld_pid >/dev/null || die "slurmctld is not running; run start.sh"
t0=$SECONDS
if node_init_pid "$node" >/dev/null; then
  log "$node is running already"
else
  # A leftover unshare without its init would keep the node's name busy: end it first.
  stop_nodes KILL "$node" >/dev/null
  # What the killed node's steps left of PMIx in its spool and tmp goes, as with a reboot that
  # empties the runtime directories: Slurm 22.05's PMIx plugin fails on a stale
  # stepd.slurm.pmix.JOB.STEP socket, pmix.JOB.STEP or spmix_appdir_UID_JOB.STEP directory, so a
  # requeued job (the same id) could not launch its step here.
  rm -rf "$CLUSTER_DIR/spool/$node"/stepd.slurm.pmix.* "$CLUSTER_DIR/spool/$node"/pmix.* \
    "$CLUSTER_DIR/tmp/$node"/spmix_appdir_*
  start_node "$node"
fi
if ! wait_nodes_up "$timeout" "$node"; then
  sinfo -N -n "$node" -o '%N %t %E' >&2 || true
  die "$node did not come up (waited at most ${timeout}s); $(logs_hint)"
fi
log "$node is $(node_state "$node") after $((SECONDS - t0))s"
