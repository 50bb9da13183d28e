# shellcheck shell=bash
# free_port_base FIRST LAST: prints the first base of FIRST, FIRST+1000, ..., LAST where nothing
# listens on base..base+499 (a cluster's slurmctld, slurmd, autopard metrics and srun ports:
# lib.sh), or fails. Sourced by the scripts that start a cluster of their own beside the suite's
# (17817): packages 18817-20817, scale 21817-25817, selftest 27817-31817. All stay below Linux's
# ephemeral ports (32768-60999): with a base in there, a node's port can be busy as the local port
# of some connection ("Address already in use"), which 32 nodes' worth of connections made happen.
free_port_base() {
  local first=$1 last=$2 base listening
  listening=$(ss -Hltn | awk '{ n = split($4, a, ":"); print a[n] }')
  for ((base = first; base <= last; base += 1000)); do
    if ! awk -v lo="$base" -v hi="$((base + 499))" '$1 >= lo && $1 <= hi { found = 1 } END { exit !found }' \
      <<<"$listening"; then
      printf '%s' "$base"
      return 0
    fi
  done
  return 1
}
