#!/usr/bin/env bash
# autopar-launch benchmarks, one command: bench/launch/run.sh [BUILD_DIR]
#  (a) overhead: hyperfine, `srun --mpi=pmix autopar-launch -- true` vs `srun --mpi=pmix true` at
#      8, 16 and 32 tasks on the 4 nodes (target: at most 1.10x), beside the floor: a bare PMIx
#      client (launcher/bench-pmix-floor, bench/launch/pmix_floor.cpp) doing only PMIx_Init +
#      PMIx_Finalize, and doing Init + Put/Commit + Fence + Get + Finalize as the launcher must;
#  (b) time-to-ready: srun start until every rank's program runs with its environment
#      (bench/launch/ready.py records the time on its first line), autopar-launch vs torchrun with
#      c10d rendezvous (one agent per node under srun), 4 nodes x 2 ranks (target: 3x faster);
#      and, for information, until every rank holds an initialized gloo process group.
# Uses the test cluster named by SLURM_CONF, or starts one in /tmp/apc-bench (ports 21817+) and
# stops it afterwards. Results: bench/launch/out/*.json and .md (paste into bench/RESULTS.md).
# Environment: RUNS (hyperfine runs, default 10), READY_RUNS (default 5).
set -euo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd -- "$HERE/../.." && pwd)
AUTOPAR_PYTHON=${AUTOPAR_PYTHON:-/opt/autopar-venv/bin/python3}  # scripts/install-deps.sh's, with torch
BUILD=${1:-$REPO/build}
LAUNCH=$BUILD/launcher/autopar-launch
FLOOR=$BUILD/launcher/bench-pmix-floor
RUNS=${RUNS:-10}
READY_RUNS=${READY_RUNS:-5}
OUT=$HERE/out
for exe in "$LAUNCH" "$FLOOR"; do
  [[ -x $exe ]] || { echo "bench/launch: $exe not built" >&2; exit 1; }
done
command -v hyperfine >/dev/null || { echo "bench/launch: hyperfine not installed" >&2; exit 1; }
mkdir -p "$OUT"

started=0
if [[ -z ${SLURM_CONF:-} ]]; then
  export AUTOPAR_CLUSTER_DIR=/tmp/apc-bench AUTOPAR_CLUSTER_PORT_BASE=21817
  "$REPO/tests/cluster/start.sh"
  export SLURM_CONF=$AUTOPAR_CLUSTER_DIR/etc/slurm.conf
  started=1
fi
cleanup() { if ((started)); then "$REPO/tests/cluster/stop.sh" || true; fi; }
trap cleanup EXIT

echo "== (a) overhead over srun --mpi=pmix (hyperfine, $RUNS runs)"
for n in 8 16 32; do
  per=$((n / 4))
  hyperfine --warmup 2 --runs "$RUNS" --export-json "$OUT/overhead-$n.json" \
    --export-markdown "$OUT/overhead-$n.md" \
    -n "srun ${n} tasks" "srun -N4 --ntasks-per-node=$per --mpi=pmix true" \
    -n "srun ${n} tasks + PMIx Init/Finalize only" \
    "srun -N4 --ntasks-per-node=$per --mpi=pmix $FLOOR --init-only -- true" \
    -n "srun ${n} tasks + bare PMIx client" \
    "srun -N4 --ntasks-per-node=$per --mpi=pmix $FLOOR -- true" \
    -n "srun ${n} tasks + autopar-launch" \
    "srun -N4 --ntasks-per-node=$per --mpi=pmix $LAUNCH -- true"
done
"$AUTOPAR_PYTHON" - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
for n in (8, 16, 32):
    r = json.load(open(f"{out}/overhead-{n}.json"))["results"]
    base = r[0]["mean"]
    line = f"{n:2d} tasks: srun {base:.3f} s"
    for label, x in (("PMIx init-only", r[1]), ("bare PMIx client", r[2]), ("autopar-launch", r[3])):
        m = x["mean"]
        line += f"; {label} {m:.3f} s {m / base:.2f}x (+{(m - base) * 1000:.0f} ms)"
    print(line)
PY

echo "== (b) time to ready vs torchrun c10d ($READY_RUNS runs each)"
"$AUTOPAR_PYTHON" "$HERE/time_to_ready.py" --launch "$LAUNCH" --runs "$READY_RUNS" \
  --json "$OUT/ready.json"
echo "== (b, information) time to an initialized process group"
"$AUTOPAR_PYTHON" "$HERE/time_to_ready.py" --launch "$LAUNCH" --runs 3 --pg --json "$OUT/ready-pg.json"
