#!/usr/bin/env bash
# Acts on one node's autopard alone, leaving its slurmd and the job's tasks running: what a
# systemd restart, an upgrade or a crash of the daemon does on a real node.
#
# Usage: node-autopard.sh NODE stop [SIGNAL]   stops it (SIGTERM by default; KILL for a crash)
#                                              and waits until it is gone
#        node-autopard.sh NODE start           starts it again inside the node's namespaces
#                                              (its /proc, pids and hostname), appending to
#                                              log/autopard-NODE.log; waits for its socket
#        node-autopard.sh NODE signal SIGNAL   sends SIGNAL (e.g. HUP) to it
#        node-autopard.sh NODE pid             prints its pid (as seen here); fails when none
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

parse_node_arg "${BASH_SOURCE[0]}" "${1:-}"
node=$NODE
action=${2:-}
conf=$CLUSTER_DIR/etc/autopard-$node.conf
[[ -f $conf ]] || die "no autopard configuration for $node ($conf)"

# The node's autopard: the process whose command line is autopard's with this node's config.
autopard_pid() {
  local p cmd
  for p in $(pgrep -x autopard || true); do
    cmd=$(pid_cmdline "$p")
    if [[ $cmd == *" --config $conf "* || $cmd == *" --config $conf" ]]; then
      printf '%s\n' "$p"
      return 0
    fi
  done
  return 1
}

case $action in
  pid) autopard_pid ;;
  signal)
    pid=$(autopard_pid) || die "$node has no autopard running"
    kill -s "${3:?usage: node-autopard.sh NODE signal SIGNAL}" "$pid"
    ;;
  stop)
    pid=$(autopard_pid) || die "$node has no autopard running"
    kill -s "${3:-TERM}" "$pid"
    wait_pids_gone 30 "$pid" || die "$node's autopard (pid $pid) did not stop within 30 s"
    log "$node: autopard (pid $pid) stopped with SIG${3:-TERM}"
    ;;
  start)
    if pid=$(autopard_pid); then die "$node's autopard runs already (pid $pid)"; fi
    init=$(node_init_pid "$node") || die "$node is not running"
    [[ -s $AUTOPARD_PATH_FILE ]] || die "the cluster was started without AUTOPAR_AUTOPARD"
    read -r autopard <"$AUTOPARD_PATH_FILE"
    log_file=$CLUSTER_DIR/log/autopard-$node.log
    served=$(grep -c " serving on " "$log_file" 2>/dev/null || true)
    # nsenter forks into the node's PID namespace; once it exits the daemon is the node's init's
    # child, reaped by node.sh like every orphan there.
    spawn "$log_file" env -i PATH="$DAEMON_PATH" HOME=/root LANG=C.UTF-8 \
      nsenter --target "$init" --pid --mount --uts -- "$autopard" --config "$conf"
    # Up once it logged that it serves (its socket listens; a SIGKILLed one left the file).
    for ((i = 0; i < 100; i++)); do
      if (($(grep -c " serving on " "$log_file" 2>/dev/null || true) > ${served:-0})) && pid=$(autopard_pid); then
        log "$node: autopard started (pid $pid)"
        exit 0
      fi
      sleep 0.1
    done
    die "$node's autopard did not come up within 10 s; see $log_file"
    ;;
  *) die "usage: node-autopard.sh NODE stop [SIGNAL] | start | signal SIGNAL | pid" ;;
esac
