#!/usr/bin/env bash
# Failure recovery benchmark: runs the end-to-end fault tests of
# tests/integration/test_requeue_faults.py and test_time_limit.py on a running local test cluster (with autopard on every
# node) and prints, per fault, the seconds from the fault to the first training step after the
# resume, the steps computed twice, and for node loss the ratio to Slurm's own node-failure
# requeue of the same job (no --requeue-on-failure; the batch script survives the failed step).
# For the time limit (d) the "fault" is autopard's checkpoint request (time_limit_request).
#
# Usage: bench/failure/run.sh [PYTEST_ARGS...]
# Environment: SLURM_CONF (the test cluster), AUTOPAR_BUILD_DIR (the build tree), as for the
# integration tests. The cluster's scheduling settings that bound recovery time are in
# tests/cluster/start.sh: cred_expire=10 (how long a requeued job waits), SlurmdTimeout=10,
# sched_interval=1, KillWait=5.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd -- "$here/../.." && pwd)
AUTOPAR_PYTHON=${AUTOPAR_PYTHON:-/opt/autopar-venv/bin/python3}  # scripts/install-deps.sh's, with torch
: "${SLURM_CONF:?set SLURM_CONF to the slurm.conf of the test cluster}"
out=$(mktemp /tmp/autopar-failure-bench.XXXXXX.jsonl)
trap 'rm -f "$out"' EXIT
cd "$repo/tests/integration"
AUTOPAR_BENCH_OUT=$out "$AUTOPAR_PYTHON" -m pytest -q test_requeue_faults.py test_time_limit.py "$@"
"$AUTOPAR_PYTHON" - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"{'fault':28} {'fault->requeue':>14} {'fault->restore':>14} {'fault->1st step':>15} {'steps lost':>10}  other")
by = {}
for r in rows:
    by[r["fault"]] = r
    other = {k: v for k, v in r.items() if k not in ("fault", "to_requeue_s", "to_restore_s", "recovery_s", "steps_lost")}
    f = lambda k: "-" if r.get(k) is None else f"{r[k]:.1f} s"
    print(f"{r['fault']:28} {f('to_requeue_s'):>14} {f('to_restore_s'):>14} {f('recovery_s'):>15} {r.get('steps_lost', '-'):>10}  {other or ''}")
a, s = by.get("node loss (autopar)"), by.get("node loss (Slurm only)")
if a and s:
    print(f"node loss: autopar / Slurm-only recovery = {a['recovery_s'] / s['recovery_s']:.2f}")
PY
