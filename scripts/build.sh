#!/usr/bin/env bash
# Configures and builds autopar into build/ (or $AUTOPAR_BUILD_DIR). Extra arguments go to cmake.
# With --demo (first) only the product: the plugin, autopard, the launcher, the CLI, the Python
# module and the man pages (what scripts/demo.sh runs), no tests or benchmarks; a later build
# without it adds them to the same tree.
# The prefix is /usr, Debian's, so scripts/package.sh packages this very build (the paths compiled
# into the programs are the installed ones).
set -euo pipefail
# shellcheck source=cluster-env.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/cluster-env.sh"
parts=(-DAUTOPAR_BUILD_TESTS=ON -DAUTOPAR_UNIT_TESTS=ON -DAUTOPAR_BUILD_BENCH=ON)
if [[ ${1:-} == --demo ]]; then
  parts=(-DAUTOPAR_BUILD_TESTS=OFF -DAUTOPAR_BUILD_BENCH=OFF)
  shift
fi
cmake -S "$AUTOPAR_REPO" -B "$AUTOPAR_BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_INSTALL_PREFIX=/usr "${parts[@]}" "$@" >/dev/null
cmake --build "$AUTOPAR_BUILD_DIR" -j"$(nproc)"
