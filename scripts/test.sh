#!/usr/bin/env bash
# Runs autopar's whole test suite on this machine (root, Debian 12): installs the dependencies,
# builds, starts the local 4-node Slurm cluster (tests/cluster/) with the fresh plugin, and runs
# every unit and integration test through ctest. Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
# shellcheck source=cluster-env.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/cluster-env.sh"
cd "$AUTOPAR_REPO"

bash scripts/install-deps.sh
bash scripts/build.sh

bash tests/cluster/start.sh --restart
trap 'bash tests/cluster/stop.sh' EXIT
# shellcheck source=/dev/null
source "$AUTOPAR_CLUSTER_DIR/env.sh"

ctest --test-dir "$AUTOPAR_BUILD_DIR" --output-on-failure -j2 "$@"
