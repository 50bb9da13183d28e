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

# The unit tests once more under AddressSanitizer + UndefinedBehaviorSanitizer (CONVENTIONS.md).
asan=$AUTOPAR_BUILD_DIR-asan
cmake -S . -B "$asan" -DCMAKE_BUILD_TYPE=Debug -DAUTOPAR_SANITIZE=ON -DAUTOPAR_BUILD_BENCH=OFF >/dev/null
cmake --build "$asan" -j"$(nproc)" --target autopar_unit_tests
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir "$asan" -L gtest --output-on-failure -j2

bash tests/cluster/start.sh --restart
trap 'bash tests/cluster/stop.sh' EXIT
# shellcheck source=/dev/null
source "$AUTOPAR_CLUSTER_DIR/env.sh"

ctest --test-dir "$AUTOPAR_BUILD_DIR" --output-on-failure -j2 "$@"
