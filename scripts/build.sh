#!/usr/bin/env bash
# Configures and builds autopar into build/ (or $AUTOPAR_BUILD_DIR). Extra arguments go to cmake.
set -euo pipefail
# shellcheck source=cluster-env.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/cluster-env.sh"
cmake -S "$AUTOPAR_REPO" -B "$AUTOPAR_BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$AUTOPAR_BUILD_DIR" -j"$(nproc)"
