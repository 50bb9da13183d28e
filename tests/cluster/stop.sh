#!/usr/bin/env bash
# Stops the local test cluster started by start.sh: exactly the processes recorded in
# $AUTOPAR_CLUSTER_DIR/pids (each checked against its command line first), nodes first, and waits
# until they are gone. Idempotent. Keeps the directory (logs, state) unless --clean.
#
# Usage: stop.sh [--clean]
#   --clean   also remove the cluster directory (only if start.sh made it)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

parse_flag_arg "${BASH_SOURCE[0]}" --clean "$@"
clean=$FLAG_GIVEN
if [[ ! -d $CLUSTER_DIR ]]; then
  log "nothing to stop: $CLUSTER_DIR does not exist"
  exit 0
fi
[[ -e $CLUSTER_DIR/$MARKER_NAME ]] || die "$CLUSTER_DIR is not a test cluster directory (no $MARKER_NAME)"

lock_cluster
stop_all
log "stopped ($CLUSTER_DIR)"
if ((clean)); then
  rm -rf -- "$CLUSTER_DIR"
  log "removed $CLUSTER_DIR"
fi
