#!/usr/bin/env bash
# Checkpoint upload throughput: one checkpoint of TOTAL MiB in FILES rank
# files, uploaded to a private s3rver on loopback by
#   1. autopar's transfer engine (autopar-storage-tool upload) with its default settings
#      (multipart_threshold auto: here one streamed PUT per file), and with multipart forced
#   2. `aws s3 cp --recursive` (Debian's awscli, default settings)
#   3. one `curl -T` per file, all in parallel (the server's ceiling)
# and copied to a directory (the POSIX target) by autopar vs `cp -r` + `sync`.
# Prints the times and ratios; with --record appends them to bench/RESULTS.md.
#
#   bench/ckpt/upload_bench.sh [--record] [TOTAL_MIB (2048)] [FILES (8)]
#
# Environment: AUTOPAR_BUILD_DIR (default <repo>/build), AUTOPAR_BENCH_S3_PORT (default 18960),
# AUTOPAR_BENCH_DIR (scratch directory, default a new one under /tmp; needs ~3x TOTAL free).
set -euo pipefail

record=0
if [[ ${1:-} == --record ]]; then
  record=1
  shift
fi
total_mib=${1:-2048}
files=${2:-8}
repo=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
build=${AUTOPAR_BUILD_DIR:-$repo/build}
tool=$build/service/storage/autopar-storage-tool
port=${AUTOPAR_BENCH_S3_PORT:-18960}
bucket=autopar-bench
endpoint=http://127.0.0.1:$port
aws_cli=/usr/bin/aws
[[ -x $tool ]] || { echo "upload_bench: $tool not built (cmake --build ... --target autopar-storage-tool)" >&2; exit 1; }
[[ -x $aws_cli ]] || aws_cli=$(command -v aws)

work=${AUTOPAR_BENCH_DIR:-$(mktemp -d /tmp/autopar-ckpt-bench.XXXXXX)}
mkdir -p "$work/src"
# shellcheck source=bench/ckpt/s3rver.sh
source "$repo/bench/ckpt/s3rver.sh"
start_s3rver "$port" "$bucket" "$work"

per_file=$((total_mib / files))
for ((i = 0; i < files; i++)); do
  head -c "${per_file}M" /dev/urandom >"$work/src/rank-$i.pt"
done
bytes=$((per_file * files * 1024 * 1024))

now() { date +%s.%N; }
elapsed() { echo "$(now) - $1" | bc -l; }
st() { "$tool" --credentials "$work/creds" --endpoint "$endpoint" "$@"; }
# Every uploaded object is there with the right size, then the run's objects go away.
check_and_clear() {
  local prefix=$1 listed
  listed=$(st "s3://$bucket" ls "$prefix/" | awk -v s=$((per_file * 1024 * 1024)) '$1 == s' | wc -l)
  if ((listed != files)); then
    echo "upload_bench: $prefix: expected $files objects of $per_file MiB, found $listed" >&2
    exit 1
  fi
  st "s3://$bucket" rm "$prefix/" >/dev/null
}

echo "upload_bench: $files files x $per_file MiB to s3rver at $endpoint" >&2

t=$(now)
st --part-size-mib 16 --concurrency 8 "s3://$bucket" upload "$work/src" autopar >/dev/null
t_autopar=$(elapsed "$t")
check_and_clear autopar

t=$(now)
st --multipart-threshold-mib 16 --part-size-mib 16 --concurrency 8 "s3://$bucket" upload "$work/src" multipart >/dev/null
t_multipart=$(elapsed "$t")
check_and_clear multipart

t=$(now)
AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1 \
  AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
  "$aws_cli" --endpoint-url "$endpoint" s3 cp --recursive --only-show-errors "$work/src" "s3://$bucket/aws/"
t_aws=$(elapsed "$t")
check_and_clear aws

t=$(now)
pids=()
for f in "$work"/src/*; do
  curl -sS -f -o /dev/null --aws-sigv4 "aws:amz:us-east-1:s3" --user "S3RVER:S3RVER" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "$f" "$endpoint/$bucket/curl/$(basename "$f")" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
t_curl=$(elapsed "$t")
check_and_clear curl

sync
t=$(now)
st --part-size-mib 8 --concurrency 4 "file://$work/posix-autopar" upload "$work/src" ckpt >/dev/null
t_posix=$(elapsed "$t")
t=$(now)
cp -r "$work/src" "$work/posix-cp" && sync
t_cp=$(elapsed "$t")
cmp -s "$work/src/rank-0.pt" "$work/posix-autopar/ckpt/rank-0.pt" || { echo "upload_bench: POSIX copy differs" >&2; exit 1; }

mibs() { echo "scale=1; $bytes / 1048576 / $1" | bc -l; }
ratio() { echo "scale=2; $1 / $2" | bc -l; }
report=$(cat <<EOT
| method | seconds | MiB/s | vs autopar |
|---|---|---|---|
| autopar, defaults (16 MiB parts, 8 in flight, multipart threshold auto) | $(printf %.2f "$t_autopar") | $(mibs "$t_autopar") | 1.00 |
| autopar, multipart forced (\`--multipart-threshold-mib 16\`) | $(printf %.2f "$t_multipart") | $(mibs "$t_multipart") | $(ratio "$t_multipart" "$t_autopar") |
| \`aws s3 cp --recursive\` | $(printf %.2f "$t_aws") | $(mibs "$t_aws") | $(ratio "$t_aws" "$t_autopar") (autopar is this many times faster; target >= 2) |
| parallel \`curl -T\` per file | $(printf %.2f "$t_curl") | $(mibs "$t_curl") | $(ratio "$t_autopar" "$t_curl") (autopar takes this many times as long; target <= 1.2) |
| POSIX: autopar (8 MiB parts, 4 in flight, auto: whole files, fsync + rename) | $(printf %.2f "$t_posix") | $(mibs "$t_posix") | |
| POSIX: \`cp -r\` + \`sync\` | $(printf %.2f "$t_cp") | $(mibs "$t_cp") | $(ratio "$t_posix" "$t_cp") (autopar / cp; target <= 1.2) |
EOT
)
echo "$report"
if ((record)); then
  {
    echo
    echo "## Checkpoint upload (\`bench/ckpt/upload_bench.sh\`) — $(date -u +%Y-%m-%d)"
    echo
    echo "What: one checkpoint of $files files x $per_file MiB ($((per_file * files)) MiB) from the page cache to s3rver"
    echo "3.7.1 on loopback (one Node process), then to a local directory. Machine: $(nproc) cores, load"
    echo "average $(cut -d' ' -f1 /proc/loadavg) at the end (shared with other builds); one run, so the ratios are noisy."
    echo
    echo "$report"
  } >>"$repo/bench/RESULTS.md"
fi
