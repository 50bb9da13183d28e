#!/usr/bin/env bash
# Stops the s3rver that start-s3rver.sh started (by its pid file; never by name).
#
#   tests/s3/stop-s3rver.sh [STATE_DIR] [--purge]
#
# Same STATE_DIR/AUTOPAR_S3_STATE/AUTOPAR_S3_PORT defaults as start-s3rver.sh. The data directory
# is kept (a later start serves the same objects) unless --purge is given.
set -euo pipefail

purge=0
args=()
for a in "$@"; do
  if [[ $a == --purge ]]; then purge=1; else args+=("$a"); fi
done
port=${AUTOPAR_S3_PORT:-18900}
state=${args[0]:-${AUTOPAR_S3_STATE:-/tmp/autopar-s3rver-$(id -u)-$port}}
pidfile=$state/s3rver.pid

say() { echo "stop-s3rver: $*" >&2; }

if [[ -f $pidfile ]]; then
  pid=$(cat "$pidfile")
  # Only a live process that is really our s3rver (the pid may have been reused).
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q s3rver; then
    kill -TERM "$pid"
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "pid $pid did not stop on SIGTERM; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    say "stopped pid $pid"
  else
    say "pid $pid from $pidfile is not running"
  fi
  rm -f "$pidfile"
else
  say "no pid file at $pidfile; nothing to stop"
fi
if ((purge)); then
  rm -rf "$state"
fi
