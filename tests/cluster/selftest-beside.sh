#!/usr/bin/env bash
# Proves that selftest.sh tells this project's daemons from everyone else's: runs it N
# times in a row beside a system munged (started as Debian's munge.service starts one, unless one
# already runs) and beside the main test cluster (tests/cluster/start.sh, unless it already runs),
# then once with AUTOPAR_SELFTEST_KILL_OUTSIDE=1, where an outside munged is killed while stop.sh
# runs: that run must fail, on exactly the "other daemons survive" check. Stops only what it started.
#
# Usage: selftest-beside.sh [N]   (default 10; about 50 s a run)
# Exit status 0 when the N runs passed and the variant failed as it must.
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
runs=${1:-10}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "usage: selftest-beside.sh [N]" >&2; exit 2; }
((EUID == 0)) || { echo "selftest-beside: must run as root" >&2; exit 1; }

started_munged=""
started_cluster=0
finish() {
  if [[ -n $started_munged ]]; then kill "$started_munged" 2>/dev/null || true; fi
  if ((started_cluster)); then bash "$here/stop.sh" >/dev/null 2>&1 || true; fi
}
trap finish EXIT

# The system munged: /run/munge as munge.service's RuntimeDirectory, the package's key, as the
# munge user, daemonizing (Type=forking).
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  install -d -o munge -g munge -m 0755 /run/munge
  runuser -u munge -- /usr/sbin/munged
  read -r started_munged </run/munge/munged.pid
  echo "selftest-beside: started a system munged (pid $started_munged)"
fi
if ! bash "$here/start.sh" 2>&1 | grep -q "already running and healthy"; then started_cluster=1; fi

passed=0
for ((i = 1; i <= runs; i++)); do
  log=$(mktemp /tmp/autopar-selftest-beside.XXXXXX)
  if bash "$here/selftest.sh" >"$log" 2>&1; then
    passed=$((passed + 1))
    echo "run $i: passed ($(grep -o 'daemons of other clusters ([0-9]*)' "$log"))"
    rm -f "$log"
  else
    echo "run $i: FAILED; output in $log"
    grep '^FAIL' "$log" || true
  fi
done

log=$(mktemp /tmp/autopar-selftest-beside.XXXXXX)
variant_ok=0
if AUTOPAR_SELFTEST_KILL_OUTSIDE=1 bash "$here/selftest.sh" >"$log" 2>&1; then
  echo "variant (outside munged killed during stop.sh): passed, but it must fail; output in $log"
else
  fails=$(grep '^FAIL' "$log" || true)
  if [[ $fails == "FAIL slurm/munge daemons of other clusters ("*") survive"$'\n'"FAIL the outside munged started before the cluster"* ]]; then
    variant_ok=1
    echo "variant (outside munged killed during stop.sh): failed as it must:"
    printf '  %s\n' "${fails//$'\n'/$'\n'  }"
    rm -f "$log"
  else
    echo "variant: failed for another reason; output in $log"
    printf '  %s\n' "${fails//$'\n'/$'\n'  }"
  fi
fi
echo "selftest-beside: $passed of $runs runs passed; variant detected: $((variant_ok))"
((passed == runs && variant_ok))
