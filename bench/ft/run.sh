#!/usr/bin/env bash
# Per-step fault tolerance (docs/ft.md) on the local cluster: etc/examples/ft_train.py on 4 nodes
# x 2 ranks with --fault-tolerance=step, a random rank's program SIGKILLed every 2-3 s (20 times by
# default), and per fault the seconds from the kill to the group's next committed step (the
# ledger's commit times), the steps discarded, and whether any other rank's program restarted.
# Prints p50/p99 and the run's result against a fault-free run of the same job (bit for bit).
#
# Usage: bench/ft/run.sh [FAULTS]
# Environment: SLURM_CONF (the test cluster, with autopard on every node), AUTOPAR_BUILD_DIR.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
: "${SLURM_CONF:?set SLURM_CONF to the slurm.conf of the test cluster}"
cd "$here/../../tests/integration"
FT_BENCH_FAULTS=${1:-20} /usr/bin/python3 -m pytest -q -s -p no:cacheprovider "$here/bench_ft.py"
