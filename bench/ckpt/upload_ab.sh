#!/usr/bin/env bash
# Two builds of the S3 upload path side by side, to show that a change of it does not slow it
# down. Runs autopar-storage-tool from build A and from build B in turn, A B A B ..., against
# one private s3rver on loopback, for three shapes of checkpoint:
#   big:       FILES files of BIG_MIB MiB, multipart (16 MiB parts, 8 in flight)
#   whole:     the same files, one streamed PUT each (the default below the multipart threshold)
#   small:     SMALL files of 64 KiB (per-request cost: signing, headers, XML replies)
# Prints the median seconds of each and the ratio B/A (pair by pair, then the median); with
# --record appends the table to bench/RESULTS.md.
#
#   bench/ckpt/upload_ab.sh [--record] A_BUILD_DIR B_BUILD_DIR [ROUNDS (5)]
#
# Build a past commit's tool with, e.g.:
#   git worktree add /tmp/old-src COMMIT && cmake -S /tmp/old-src -B /tmp/old-build \
#     -DAUTOPAR_BUILD_TESTS=OFF && cmake --build /tmp/old-build --target autopar-storage-tool
# Environment: AUTOPAR_BENCH_S3_PORT (default 18961), FILES (4), BIG_MIB (128), SMALL (200).
set -euo pipefail

record=0
if [[ ${1:-} == --record ]]; then
  record=1
  shift
fi
[[ $# -ge 2 ]] || { sed -n 2,17p "$0" >&2; exit 2; }
tool_a=$1/service/storage/autopar-storage-tool
tool_b=$2/service/storage/autopar-storage-tool
rounds=${3:-5}
files=${FILES:-4}
big_mib=${BIG_MIB:-128}
small=${SMALL:-200}
for t in "$tool_a" "$tool_b"; do
  [[ -x $t ]] || { echo "upload_ab: $t not built" >&2; exit 1; }
done
repo=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
port=${AUTOPAR_BENCH_S3_PORT:-18961}
bucket=autopar-bench
endpoint=http://127.0.0.1:$port

work=$(mktemp -d /tmp/autopar-upload-ab.XXXXXX)
# shellcheck source=bench/ckpt/s3rver.sh
source "$repo/bench/ckpt/s3rver.sh"
start_s3rver "$port" "$bucket" "$work"

mkdir -p "$work/big" "$work/small"
for ((i = 0; i < files; i++)); do head -c "${big_mib}M" /dev/urandom >"$work/big/rank-$i.pt"; done
for ((i = 0; i < small; i++)); do head -c 64K /dev/urandom >"$work/small/obj-$i"; done

now() { date +%s.%N; }
# One upload by `tool` of shape `shape`, its objects removed afterwards; prints its seconds.
run() {
  local tool=$1 shape=$2 t opts=(--part-size-mib 16 --concurrency 8) src=$work/big
  case $shape in
    big) opts+=(--multipart-threshold-mib 16) ;;
    whole) opts+=(--multipart-threshold-mib 1024) ;;
    small) src=$work/small ;;
  esac
  t=$(now)
  "$tool" --credentials "$work/creds" --endpoint "$endpoint" "${opts[@]}" "s3://$bucket" \
    upload "$src" "ab-$shape" >/dev/null
  echo "$(now) - $t" | bc -l
  "$tool" --credentials "$work/creds" --endpoint "$endpoint" "s3://$bucket" rm "ab-$shape/" >/dev/null
}
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

report="| shape | A median s | B median s | B/A (median of pairs) |
|---|---|---|---|"
for shape in big whole small; do
  run "$tool_a" "$shape" >/dev/null  # warm-up (page cache, server)
  a_times=() b_times=() ratios=()
  for ((r = 0; r < rounds; r++)); do
    a=$(run "$tool_a" "$shape")
    b=$(run "$tool_b" "$shape")
    a_times+=("$a") b_times+=("$b") ratios+=("$(echo "$b / $a" | bc -l)")
  done
  am=$(printf '%s\n' "${a_times[@]}" | median)
  bm=$(printf '%s\n' "${b_times[@]}" | median)
  rm_=$(printf '%s\n' "${ratios[@]}" | median)
  report+=$'\n'"| $shape | $(printf %.3f "$am") | $(printf %.3f "$bm") | $(printf %.2f "$rm_") |"
done
echo "$report"
if ((record)); then
  {
    echo
    echo "## Upload path A/B (\`bench/ckpt/upload_ab.sh\`) — $(date -u +%Y-%m-%d)"
    echo
    echo "A: $(cd "$1" && pwd), B: $(cd "$2" && pwd). Shapes: big = $files x $big_mib MiB multipart"
    echo "(16 MiB parts, 8 in flight); whole = the same files as one streamed PUT each; small = $small"
    echo "objects of 64 KiB. $rounds rounds A B A B against one s3rver on loopback; $(nproc) cores, load"
    echo "average $(cut -d' ' -f1 /proc/loadavg) at the end."
    echo
    echo "$report"
  } >>"$repo/bench/RESULTS.md"
fi
