# shellcheck shell=bash
# The checks of the scripts that print one line per check (selftest.sh, scale_test.sh,
# tests/packages/test_packages.sh): `ok   WHAT` or `FAIL WHAT`. $checks counts the checks and
# $failures the failed ones, for the script's summary and exit status. Sourced, never run.

checks_cluster_scripts=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
failures=0
checks=0
ok() {
  checks=$((checks + 1))
  printf 'ok   %s\n' "$*"
}
bad() {
  checks=$((checks + 1))
  failures=$((failures + 1))
  printf 'FAIL %s\n' "$*"
}
# check DESCRIPTION COMMAND...: ok if the command succeeds.
check() {
  local what=$1
  shift
  if "$@"; then ok "$what"; else bad "$what"; fi
}
# stop_here MESSAGE: a failure the later steps cannot go on from.
stop_here() {
  bad "$*"
  exit 1
}

# At the end of a script that tests on a cluster of its own (scale_test.sh, test_packages.sh),
# with the script's own `say`:
# stop_own_cluster RC: stops it (tests/cluster/stop.sh); after a failure (RC, or a failed check)
# its logs stay, and it says where, else all of it goes.
stop_own_cluster() {
  if (($1 || failures)); then
    "$checks_cluster_scripts/stop.sh" >/dev/null 2>&1 || true
    say "logs kept in $AUTOPAR_CLUSTER_DIR/log" >&2
  else
    "$checks_cluster_scripts/stop.sh" --clean >/dev/null 2>&1 || true
  fi
}
# exit_with_verdict RC: says FAILED (how many checks failed) or passed, and exits with RC, or 1
# when only a check failed.
exit_with_verdict() {
  local rc=$1
  if ((rc == 0 && failures)); then rc=1; fi
  if ((rc)); then say "FAILED ($failures failed checks)" >&2; else say "passed"; fi
  exit "$rc"
}
