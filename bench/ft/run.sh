#!/usr/bin/env bash
# Per-step fault tolerance (docs/ft.md) on the local cluster: etc/examples/ft_train.py on 4 nodes
# x 2 ranks with --fault-tolerance=step, against a fault-free run of the same job:
#  - crashes: a random rank's program SIGKILLed every 2-3 s (FAULTS, 20 by default);
#  - crashes of young replacements: a random rank's program SIGKILLed, then its replacement 2-3 s
#  into its run (FAULTS/2 such pairs);
#  - hangs: a random rank's program SIGSTOPped every 12-13 s, with --heartbeat-timeout=10;
#  per fault the seconds from the fault to the group's next committed step (the ledger's commit
#  times), p50/p99, the steps discarded, the programs restarted that had not failed, and whether
#  the result is the fault-free run's bit for bit;
#  - the steady-state step time with and without fault tolerance (the same program, --plain:
#  torch.distributed and one all-reduce), interleaved, for 100 ms and for 0 ms of compute a step;
#  - node losses (one per job, 3 nodes in use and a spare): the kill to the next committed step,
#  FAULTS with the spare's interpreters prepared in reserve and FAULTS cold, alternating;
#  - the effective training time ratio (ETTR) over 10 minutes (FT_BENCH_ETTR_S) of a run of 4
#  nodes x 2 ranks and a spare node, a crash, a hang or a node lost every 20-30 s (the same
#  sequence each time), under three policies side by side: per-step fault tolerance, the in-place
#  restart of every program from the latest checkpoint, requeue. It needs 6 nodes and more
#  requeues and in-place restarts than the test cluster's site allows: run.sh restarts the
#  cluster with them (and as it was at the end);
#  - 3 crashes with a 257 MiB state: the bytes and seconds of each heal.
# Usage: bench/ft/run.sh [FAULTS [ONLY]]   (ONLY: a pytest -k expression, e.g. "node_losses or
#        effective": the parts to run)
# Environment: SLURM_CONF (the test cluster, with autopard on every node), AUTOPAR_BUILD_DIR.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../scripts/cluster-env.sh
source "$here/../../scripts/cluster-env.sh"
: "${SLURM_CONF:?set SLURM_CONF to the slurm.conf of the test cluster}"
cd "$here/../../tests/integration"
only=${2:-}
k() { [[ -z $only ]] && echo "$1" || echo "($only) and $1"; }
FT_BENCH_FAULTS=${1:-20} "$AUTOPAR_PYTHON" -m pytest -q -s -p no:cacheprovider "$here/bench_ft.py" \
  -k "$(k "not effective_training_time_ratio")" || (($? == 5)) # 5: ONLY selected none of them
nodes=$(cat "${AUTOPAR_CLUSTER_DIR:-/tmp/autopar-cluster}/etc/nodes" 2>/dev/null || echo 4)
restart_cluster() {  # NODES PLUGSTACK_ARGS
  bash "$here/../../tests/cluster/stop.sh"
  AUTOPAR_CLUSTER_NODES=$1 AUTOPAR_PLUGSTACK_ARGS="$AUTOPAR_PLUGSTACK_ARGS $2" \
    bash "$here/../../tests/cluster/start.sh" >/dev/null
}
trap 'restart_cluster "$nodes" ""' EXIT
restart_cluster 6 "max_requeue=50 max_restarts_in_place=50"
[[ -n $only && $only != *effective* ]] && exit 0
"$AUTOPAR_PYTHON" -m pytest -q -s -p no:cacheprovider "$here/bench_ft.py" -k "$(k effective_training_time_ratio)"
