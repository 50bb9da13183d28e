#!/usr/bin/env bash
# NCCL checks of autopar-launch and libautopar; they need real GPUs and run whenever
# `nvidia-smi -L` lists at least one (otherwise the script says so and exits 0 without testing).
#
# What it checks, on the local Slurm test cluster (tests/cluster/start.sh; all GPUs of this
# machine are given to the step through CUDA_VISIBLE_DEVICES, one per task):
#   1. libautopar's C API: autopar-nccl-comm-test creates the NCCL communicator from rank 0's
#      ncclUniqueId shared through PMIx and checks an all-reduce (1 task, then one task per GPU).
#   2. `autopar-launch --nccl-check`: the all-reduce preflight over every GPU of the step prints
#      the bus bandwidth and passes; the program after it runs.
#   (The slow-node verdict itself is unit-tested without GPUs: launcher/nccl_bootstrap_test.cpp.)
#
# Usage: tests/gpu/run-nccl-checks.sh [BUILD_DIR]   (default: <repo>/build-gpu, configured and
#        built here with CUDA/NCCL when missing)
# Environment: SLURM_CONF to use a running test cluster; otherwise one is started in
#        /tmp/apc-gpu (ports 20817+) and stopped at the end.
set -euo pipefail

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-$REPO/build-gpu}

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "run-nccl-checks: no GPU (nvidia-smi -L lists none): nothing to check"
  exit 0
fi
mapfile -t gpus < <(nvidia-smi -L | grep '^GPU ')
ngpu=${#gpus[@]}
echo "run-nccl-checks: $ngpu GPU(s): ${gpus[*]}"

if [[ ! -x $BUILD/launcher/autopar-nccl-comm-test ]]; then
  cmake -S "$REPO" -B "$BUILD" -DAUTOPAR_WITH_CUDA=ON >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target autopar-launch autopar-nccl-check \
    autopar-nccl-comm-test
fi
LAUNCH=$BUILD/launcher/autopar-launch
[[ -x $BUILD/launcher/autopar-nccl-check ]] || { echo "run-nccl-checks: $BUILD was built without NCCL" >&2; exit 1; }

started_cluster=0
if [[ -z ${SLURM_CONF:-} ]]; then
  export AUTOPAR_CLUSTER_DIR=/tmp/apc-gpu AUTOPAR_CLUSTER_PORT_BASE=20817
  "$REPO/tests/cluster/start.sh"
  export SLURM_CONF=$AUTOPAR_CLUSTER_DIR/etc/slurm.conf
  started_cluster=1
fi
cleanup() {
  if ((started_cluster)); then "$REPO/tests/cluster/stop.sh" || true; fi
}
trap cleanup EXIT

visible=$(seq -s, 0 $((ngpu - 1)))
fail=0
check() {  # check NAME COMMAND...
  local name=$1
  shift
  echo "--- $name"
  if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fail=1; fi
}

comm_test() {  # comm_test NTASKS
  local out
  out=$(CUDA_VISIBLE_DEVICES=$visible srun -N1 -n"$1" --mpi=pmix "$LAUNCH" -- \
    "$BUILD/launcher/autopar-nccl-comm-test")
  echo "$out"
  [[ $(grep -c " $1 ok$" <<<"$out") -eq $1 ]]
}
check "C API communicator, 1 rank" comm_test 1
if ((ngpu > 1)); then check "C API communicator, $ngpu ranks" comm_test "$ngpu"; fi

# shellcheck disable=SC2016  # $RANK is for the program's shell
preflight() {
  local out
  out=$(CUDA_VISIBLE_DEVICES=$visible AUTOPAR_NCCL_CHECK_MAX_BYTES=$((64 << 20)) \
    srun -N1 -n"$ngpu" --mpi=pmix "$LAUNCH" --nccl-check -- \
    sh -c 'echo "program ran on rank $RANK"' 2>&1)
  echo "$out"
  grep -q "nccl-check: node .*GB/s" <<<"$out" &&
    [[ $(grep -c "program ran on rank" <<<"$out") -eq $ngpu ]]
}
check "autopar-launch --nccl-check" preflight

if ((fail)); then echo "run-nccl-checks: FAILED"; exit 1; fi
echo "run-nccl-checks: all passed"
