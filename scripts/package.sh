#!/usr/bin/env bash
# Builds autopar's Debian packages: installs the dependencies, builds (scripts/build.sh, prefix
# /usr), then CPack (cmake/Packaging.cmake) writes autopar_<version>_<arch>.deb and
# autopard_<version>_<arch>.deb to <build>/packages and this prints their paths. Extra arguments
# go to cmake (e.g. -DAUTOPAR_WITH_CUDA=OFF).
set -euo pipefail
# shellcheck source=cluster-env.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/cluster-env.sh"

bash "$AUTOPAR_REPO/scripts/install-deps.sh"
bash "$AUTOPAR_REPO/scripts/build.sh" "$@"
rm -f "$AUTOPAR_BUILD_DIR"/packages/*.deb
(cd "$AUTOPAR_BUILD_DIR" && cpack -G DEB >/dev/null)
ls "$AUTOPAR_BUILD_DIR"/packages/*.deb
