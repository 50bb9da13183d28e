# shellcheck shell=bash
# A private s3rver on loopback for the upload benches (upload_bench.sh, upload_ab.sh). Sourced,
# never run.

s3rver_scripts=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../../tests/s3" && pwd)

# start_s3rver PORT BUCKET WORK: starts s3rver (tests/s3/start-s3rver.sh) on 127.0.0.1:PORT with
# BUCKET, its data in WORK/s3, and writes its fixed credentials to WORK/creds; when the script
# exits, s3rver is stopped and WORK removed.
start_s3rver() {
  s3rver_port=$1 s3rver_work=$3
  trap stop_s3rver EXIT
  AUTOPAR_S3_PORT=$1 AUTOPAR_S3_BUCKET=$2 bash "$s3rver_scripts/start-s3rver.sh" "$3/s3" >/dev/null
  printf 'S3RVER\nS3RVER\n' >"$3/creds"
  chmod 600 "$3/creds"
}

stop_s3rver() {
  AUTOPAR_S3_PORT=$s3rver_port bash "$s3rver_scripts/stop-s3rver.sh" "$s3rver_work/s3" >/dev/null 2>&1 || true
  rm -rf "$s3rver_work"
}
