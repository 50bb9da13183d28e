#!/usr/bin/env bash
# Restore wall time of a resumed job: one 4-rank job (4 nodes x 1 rank) writes FILE_MIB
# of random data per rank and commits it as step 1 to URI; once step 1 is COMPLETE, resumed jobs
# run `srun --mpi=pmix LAUNCHER -- true` and report srun's wall time (rendezvous + restore of the
# 4 files + a no-op program), the given launchers taking turns ROUNDS times (e.g. an older
# build's autopar-launch and this one's, for a before/after). Prints one line per run.
#
#   bench/ckpt/restore_bench.sh URI FILE_MIB ROUNDS LAUNCHER...
#
# Needs the test cluster running with autopard on every node (tests/cluster/start.sh, SLURM_CONF
# from its env.sh) and, for an s3:// URI, s3rver as scripts/test.sh starts it. Environment:
# AUTOPAR_BUILD_DIR (default <repo>/build), AUTOPAR_CLUSTER_DIR, AUTOPAR_BENCH_DIR (scratch
# directory, default a new one under /tmp; needs ~2 x 4 x FILE_MIB free).
set -euo pipefail

[[ $# -ge 4 ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
uri=$1 mib=$2 rounds=$3
shift 3
repo=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
build=${AUTOPAR_BUILD_DIR:-$repo/build}
cluster=${AUTOPAR_CLUSTER_DIR:-/tmp/autopar-cluster}
: "${SLURM_CONF:?SLURM_CONF is not set: source \$AUTOPAR_CLUSTER_DIR/env.sh}"
work=${AUTOPAR_BENCH_DIR:-$(mktemp -d /tmp/autopar-restore-bench.XXXXXX)}
chmod 1777 "$work"
trap 'rm -rf "$work"' EXIT

# Submits a 4-node job running CMD under srun (its output in $work/<name>.out), waits for it.
job() {
  local name=$1 cmd=$2
  cat >"$work/$name.sh" <<EOF
#!/bin/bash
#SBATCH -N 4 --ntasks-per-node=1 -o $work/$name.out
#SBATCH --ckpt-dir=$work/ck/%j/%n --ckpt-upload=$uri
$cmd
EOF
  sbatch --wait --parsable --chdir="$work" "$work/$name.sh" >/dev/null ||
    { echo "restore_bench: job $name failed:" >&2; cat "$work/$name.out" >&2; exit 1; }
}

job write "srun --mpi=pmix $build/launcher/autopar-launch -- bash -c 'd=\$AUTOPAR_CKPT_DIR/step-1/rank-\$RANK && mkdir -p \$d && head -c ${mib}M /dev/urandom >\$d/data.bin && $build/cli/autopar ckpt commit --step 1'"
for _ in $(seq 600); do
  "$build/cli/autopar" ckpt ls "$uri" --socket "$cluster/run/autopard-node1.sock" | grep -q COMPLETE && break
  sleep 1
done
"$build/cli/autopar" ckpt ls "$uri" --socket "$cluster/run/autopard-node1.sock"
rm -rf "$work/ck"

for r in $(seq "$rounds"); do
  for launcher in "$@"; do
    job resume "t0=\$(date +%s.%N); srun --mpi=pmix $launcher -- true; echo WALL \$t0 \$(date +%s.%N)"
    grep -q "resuming from checkpoint step 1" "$work/resume.out" ||
      { echo "restore_bench: no resume:" >&2; cat "$work/resume.out" >&2; exit 1; }
    awk -v r="$r" -v l="$launcher" '/^WALL/ {printf "round %s %s: %.2f s\n", r, l, $3 - $2}' "$work/resume.out"
    rm -rf "$work/ck"
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
