#!/usr/bin/env bash
# Two builds of the file:// upload path side by side: autopar-storage-tool from build A and from
# build B upload one checkpoint (SMALL files of 64 KiB and 2 of BIG_MIB MiB) into a fresh store on
# /dev/shm, in turn A B A B ..., ROUNDS times; prints each one's median seconds and the median of
# the pairwise ratios A/B. With AS_UID (as root): A acts with that uid's rights (--as-uid, what
# autopard does for a job's owner: a store directory of theirs); B as the caller (a build older
# than --as-uid cannot do otherwise).
#
#   bench/ckpt/posix_ab.sh A_BUILD_DIR B_BUILD_DIR [ROUNDS (9)]
# Environment: SMALL (400), BIG_MIB (128), AS_UID (unset).
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n 2,11p "$0" >&2; exit 2; }
tool_a=$1/service/storage/autopar-storage-tool
tool_b=$2/service/storage/autopar-storage-tool
rounds=${3:-9}
for t in "$tool_a" "$tool_b"; do
  [[ -x $t ]] || { echo "posix_ab: $t not built" >&2; exit 1; }
done
src=$(mktemp -d /var/tmp/autopar-posix-ab.XXXXXX)
trap 'rm -rf "$src" /dev/shm/autopar-posix-ab.*' EXIT
mkdir -p "$src/sub"
for ((i = 0; i < ${SMALL:-400}; i++)); do head -c 65536 /dev/urandom >"$src/sub/f$i.bin"; done
for i in 0 1; do head -c $((${BIG_MIB:-128} << 20)) /dev/urandom >"$src/big$i.bin"; done

once() {  # TOOL [--as-uid UID]: seconds of one upload
  local d t0 t1
  d=$(mktemp -d /dev/shm/autopar-posix-ab.XXXXXX)
  if [[ $# -gt 1 ]]; then chown "$3:$3" "$d"; fi
  t0=$(date +%s%N)
  "$1" "${@:2}" "file://$d/store" upload "$src" job-1/step-1/rank-0 >/dev/null
  t1=$(date +%s%N)
  rm -rf "$d"
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", (b - a) / 1e9 }'
}
as_a=()
[[ -n ${AS_UID:-} ]] && as_a=(--as-uid "$AS_UID")
a=() b=() r=()
once "$tool_a" "${as_a[@]}" >/dev/null  # warm the page cache
for ((k = 0; k < rounds; k++)); do
  ta=$(once "$tool_a" "${as_a[@]}")
  tb=$(once "$tool_b")
  a+=("$ta") b+=("$tb") r+=("$(awk -v a="$ta" -v b="$tb" 'BEGIN { printf "%.4f\n", a / b }')")
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
echo "posix_ab: ${SMALL:-400} x 64 KiB + 2 x ${BIG_MIB:-128} MiB to /dev/shm, $rounds rounds${AS_UID:+, A as uid $AS_UID}"
echo "posix_ab: A median $(median "${a[@]}") s, B median $(median "${b[@]}") s, A/B median $(median "${r[@]}")"
