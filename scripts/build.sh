#!/usr/bin/env bash
# Configures and builds autopar into build/ (or $AUTOPAR_BUILD_DIR). Extra arguments go to cmake.
# The prefix is /usr, Debian's, so scripts/package.sh packages this very build (the paths compiled
# into the programs are the installed ones).
set -euo pipefail
# shellcheck source=cluster-env.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/cluster-env.sh"
cmake -S "$AUTOPAR_REPO" -B "$AUTOPAR_BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_INSTALL_PREFIX=/usr "$@" >/dev/null
cmake --build "$AUTOPAR_BUILD_DIR" -j"$(nproc)"
