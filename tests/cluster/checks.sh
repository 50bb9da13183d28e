# shellcheck shell=bash
# The checks of the scripts that print one line per check (selftest.sh, scale_test.sh,
# tests/packages/test_packages.sh): `ok   WHAT` or `FAIL WHAT`. $checks counts the checks and
# $failures the failed ones, for the script's summary and exit status. Sourced, never run.

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
