#!/usr/bin/env bash
# Starts s3rver (an S3-speaking server, npm s3rver 3.7.1 installed by scripts/install-deps.sh) on
# loopback for the checkpoint tests, with a private data directory and one bucket.
#
#   tests/s3/start-s3rver.sh [STATE_DIR]
#
# Environment (all optional):
#   AUTOPAR_S3_PORT    port on 127.0.0.1 (default 18900)
#   AUTOPAR_S3_BUCKET  bucket created at start (default autopar-test)
#   AUTOPAR_S3_STATE   state directory when STATE_DIR is not given
#                      (default /tmp/autopar-s3rver-<uid>-<port>); data lives in STATE/data and
#                      survives a stop/start (the fault tests stop s3rver mid-upload)
#   AUTOPAR_S3RVER     the s3rver executable (default /opt/autopar-s3rver/node_modules/.bin/s3rver)
#
# s3rver's credentials are fixed: access key S3RVER, secret S3RVER. It does not check SigV4
# signatures (only V2); tests/s3/sigv4_proxy.py in front of it does, for storage_s3_test.
# On success prints shell assignments for the tests and exits 0 once the server answers.
set -euo pipefail

port=${AUTOPAR_S3_PORT:-18900}
bucket=${AUTOPAR_S3_BUCKET:-autopar-test}
s3rver=${AUTOPAR_S3RVER:-/opt/autopar-s3rver/node_modules/.bin/s3rver}
state=${1:-${AUTOPAR_S3_STATE:-/tmp/autopar-s3rver-$(id -u)-$port}}
endpoint=http://127.0.0.1:$port
pidfile=$state/s3rver.pid
log=$state/s3rver.log

say() { echo "start-s3rver: $*" >&2; }

if [[ ! -x $s3rver ]]; then
  say "$s3rver not found; run scripts/install-deps.sh (or set AUTOPAR_S3RVER)"
  exit 1
fi

answers() { curl -s -o /dev/null --max-time 2 "$endpoint/"; }

print_env() {
  echo "AUTOPAR_S3_ENDPOINT=$endpoint"
  echo "AUTOPAR_S3_BUCKET=$bucket"
  echo "AUTOPAR_S3_STATE=$state"
}

if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  if answers; then
    say "already running (pid $(cat "$pidfile")) at $endpoint"
    print_env
    exit 0
  fi
fi
if answers; then
  say "port $port is in use by another process; set AUTOPAR_S3_PORT"
  exit 1
fi

mkdir -p "$state/data"
# s3rver signs ListObjectsV2 continuation tokens with DES, which Node >= 17 (OpenSSL 3) refuses
# ("error:0308010C:digital envelope routines::unsupported", a 500 on every truncated listing);
# the legacy provider brings DES back.
export NODE_OPTIONS="${NODE_OPTIONS:+$NODE_OPTIONS }--openssl-legacy-provider"
# setsid: the server outlives this script and the caller's terminal; its pid is recorded so
# stop-s3rver.sh ends exactly this process.
setsid "$s3rver" -d "$state/data" -a 127.0.0.1 -p "$port" -s \
  --configure-bucket "$bucket" </dev/null >"$log" 2>&1 &
pid=$!
echo "$pid" >"$pidfile"

for _ in $(seq 1 150); do
  if ! kill -0 "$pid" 2>/dev/null; then
    say "s3rver exited during start-up; its log ($log):"
    tail -n 20 "$log" >&2 || true
    rm -f "$pidfile"
    exit 1
  fi
  if answers; then
    say "running (pid $pid) at $endpoint, bucket $bucket, data in $state/data"
    print_env
    exit 0
  fi
  sleep 0.2
done
say "s3rver did not answer at $endpoint within 30 s; stopping it"
kill "$pid" 2>/dev/null || true
rm -f "$pidfile"
exit 1
