# shellcheck shell=bash
# Shared helpers of the local test cluster scripts (start.sh, stop.sh, kill-node.sh, revive-node.sh,
# selftest.sh). Sourced, never run. Everything the cluster owns lives under $CLUSTER_DIR; every
# process it starts is recorded in $CLUSTER_DIR/pids/ and checked against its command line before
# anything is signalled, so these scripts never end a process they did not start.

CLUSTER_LIB_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC2034 # used by the scripts that source this file
REPO_ROOT=$(cd -- "$CLUSTER_LIB_DIR/../.." && pwd)

CLUSTER_DIR=${AUTOPAR_CLUSTER_DIR:-/tmp/autopar-cluster}
PORT_BASE=${AUTOPAR_CLUSTER_PORT_BASE:-17817}
# The nodes are node1..nodeN, N=AUTOPAR_CLUSTER_NODES (default 4). Ports limit N: slurmd of nodeK
# listens on PORT_BASE+K and its autopard's metrics on PORT_BASE+60+K, below srun's +100..+499.
MAX_NODES=39
# start.sh records the count of the cluster it starts here, so that stop.sh, kill-node.sh,
# revive-node.sh (and start.sh, when it stops or checks a running cluster) act on that cluster's
# real nodes whatever AUTOPAR_CLUSTER_NODES says now. Without the file (nothing started yet, or a
# cluster started before the count was recorded) the count is AUTOPAR_CLUSTER_NODES.
NODE_COUNT_FILE=$CLUSTER_DIR/etc/nodes
REQUESTED_NODES=${AUTOPAR_CLUSTER_NODES:-4}
RECORDED_NODES=$REQUESTED_NODES
if [[ -s $NODE_COUNT_FILE ]]; then read -r RECORDED_NODES <"$NODE_COUNT_FILE" || true; fi

# valid_node_count N: N is a whole number in 1..MAX_NODES.
valid_node_count() { [[ $1 =~ ^[1-9][0-9]*$ ]] && (($1 <= MAX_NODES)); }

# use_nodes N: NODES=(node1 ... nodeN).
use_nodes() {
  local i
  NODES=()
  for ((i = 1; i <= $1; i++)); do NODES+=("node$i"); done
}
# An invalid count is refused by check_settings; until then NODES holds the default's nodes.
if valid_node_count "$RECORDED_NODES"; then use_nodes "$RECORDED_NODES"; else use_nodes 4; fi
# Marks a directory as ours, so `stop.sh --clean` never removes anything else.
# shellcheck disable=SC2034 # used by the scripts that source this file
MARKER_NAME=.autopar-test-cluster

CONF=$CLUSTER_DIR/etc/slurm.conf
# The autopard executable the nodes run (one line, empty for none), fixed by start.sh so that
# revive-node.sh starts a node exactly as start.sh did.
AUTOPARD_PATH_FILE=$CLUSTER_DIR/etc/autopard.path
PIDS=$CLUSTER_DIR/pids
MUNGE_DIR=$CLUSTER_DIR/munge
MUNGE_SOCKET=$MUNGE_DIR/munge.socket.2
# A minimal, fixed environment for every daemon, so the caller's variables never leak into the
# cluster (and from there into jobs).
DAEMON_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

export SLURM_CONF=$CONF

log() { printf 'autopar-cluster: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

check_settings() {
  [[ $CLUSTER_DIR == /* ]] || die "AUTOPAR_CLUSTER_DIR must be an absolute path: $CLUSTER_DIR"
  [[ $CLUSTER_DIR != *[[:space:]]* ]] || die "AUTOPAR_CLUSTER_DIR must not contain spaces: $CLUSTER_DIR"
  if ! [[ $PORT_BASE =~ ^[0-9]+$ ]] || ((PORT_BASE < 1024 || PORT_BASE > 64000)); then
    die "AUTOPAR_CLUSTER_PORT_BASE must be a number in 1024..64000: $PORT_BASE"
  fi
  valid_node_count "$REQUESTED_NODES" ||
    die "AUTOPAR_CLUSTER_NODES must be a number in 1..$MAX_NODES: $REQUESTED_NODES"
  valid_node_count "$RECORDED_NODES" ||
    die "$NODE_COUNT_FILE must hold a number in 1..$MAX_NODES: $RECORDED_NODES"
}

# lock_cluster: serialises the scripts that change the cluster (start, stop, kill, revive) through
# an flock on $CLUSTER_DIR/.lock held on fd 9 until the script exits. Daemons are started through
# spawn, which closes it.
lock_cluster() {
  exec 9>"$CLUSTER_DIR/.lock"
  flock -w 300 9 || die "another start/stop/kill/revive of $CLUSTER_DIR holds $CLUSTER_DIR/.lock"
}

require_root() {
  ((EUID == 0)) || die "must run as root (it starts slurmd/slurmctld and edits /etc/hosts)"
}

# print_usage SCRIPT: SCRIPT's header comment (from line 2 to `set -euo`), its --help.
print_usage() { sed -n '2,/^set -euo/p' "$1" | sed '$d; s/^# \{0,1\}//'; }

# parse_flag_arg SCRIPT FLAG ARG...: the arguments of start.sh (--restart) and stop.sh (--clean):
# sets FLAG_GIVEN=1 when FLAG is among them (else 0), prints the usage for -h/--help and exits,
# dies on anything else; then checks the settings and that it runs as root.
# shellcheck disable=SC2034 # FLAG_GIVEN is read by the calling script
parse_flag_arg() {
  local script=$1 flag=$2 arg
  shift 2
  FLAG_GIVEN=0
  for arg in "$@"; do
    case $arg in
      "$flag") FLAG_GIVEN=1 ;;
      -h | --help)
        print_usage "$script"
        exit 0
        ;;
      *) die "unknown argument: $arg (see --help)" ;;
    esac
  done
  check_settings
  require_root
}

# parse_node_arg SCRIPT [NODE]: the argument of kill-node.sh and revive-node.sh: sets NODE, prints
# the usage for -h/--help and exits, dies unless it names a node; then checks the settings and root.
parse_node_arg() {
  local script=$1
  NODE=${2:-}
  if [[ $NODE == -h || $NODE == --help ]]; then
    print_usage "$script"
    exit 0
  fi
  is_node_name "$NODE" || die "usage: ${script##*/} NODE (one of ${NODES[*]}); got '${NODE}'"
  check_settings
  require_root
}

# node_index node3 -> 3
node_index() { printf '%s' "${1#node}"; }

is_node_name() {
  local n
  for n in "${NODES[@]}"; do [[ $1 == "$n" ]] && return 0; done
  return 1
}

node_addr() { printf '127.0.2.%s' "$(node_index "$1")"; }
node_port() { printf '%s' $((PORT_BASE + $(node_index "$1"))); }

# pid_alive PID: the process exists and is not a zombie.
pid_alive() {
  local stat=""
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z && ${stat:0:1} != X ]]
}

# pid_cmdline PID: the process's command line with NULs as spaces ("" if it is gone or a zombie).
# While a process is in execve() its command line can read as empty for a moment: retry then.
pid_cmdline() {
  local c="" try
  for try in 1 2 3 4 5; do
    c=$({ tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null) || c=""
    [[ -n $c ]] && break
    pid_alive "$1" || break
    ((try < 5)) && sleep 0.02
  done
  printf '%s' "$c"
}

# recorded_pid NAME: prints the pid recorded in $PIDS/NAME.pid and succeeds only when that process
# is alive and its command line contains every further argument (so a recycled pid never matches).
recorded_pid() {
  local name=$1 pid cmd tok
  shift
  [[ -r $PIDS/$name.pid ]] || return 1
  read -r pid <"$PIDS/$name.pid" || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  cmd=$(pid_cmdline "$pid")
  [[ -n $cmd ]] || return 1
  for tok in "$@"; do [[ $cmd == *"$tok"* ]] || return 1; done
  printf '%s' "$pid"
}

# The command-line tokens that identify each process we start.
munged_pid() { recorded_pid munged munged "$MUNGE_SOCKET"; }
ctld_pid() { recorded_pid slurmctld slurmctld "$CONF"; }
node_init_pid() { recorded_pid "$1.init" node.sh " $1 $CLUSTER_DIR"; }
node_unshare_pid() { recorded_pid "$1.unshare" unshare node.sh " $1 $CLUSTER_DIR"; }

# ns_members INIT_PID: every pid (as seen here) in the PID namespace whose init is INIT_PID.
ns_members() {
  local ns
  ns=$(stat -L -c %i "/proc/$1/ns/pid" 2>/dev/null) || return 0
  ps -e -o pid=,pidns= | awk -v ns="$ns" '$2 == ns { print $1 }'
}

# wait_pids_gone TIMEOUT_S PID...: succeeds once none of the pids is alive (zombies count as gone).
wait_pids_gone() {
  local deadline=$((SECONDS + $1)) p alive
  shift
  while :; do
    alive=0
    for p in "$@"; do pid_alive "$p" && alive=1; done
    ((alive)) || return 0
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# spawn LOG COMMAND...: starts COMMAND in the background in its own session (so the caller's
# terminal or process group never signals it), stdin from /dev/null, stdout+stderr appended to LOG,
# and every other descriptor closed: a daemon that inherited, say, the write end of a test harness's
# output pipe would keep that harness waiting for EOF forever, or hold the cluster lock. $! is the
# daemon's pid (the subshell execs into setsid, which execs the command without forking).
spawn() {
  local log=$1
  shift
  (
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      if ((fd > 2)); then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec setsid "$@" </dev/null >>"$log" 2>&1
  ) &
}

# start_node NODE: runs tests/cluster/node.sh as the init of new PID, mount (own /proc) and UTS
# (hostname NODE) namespaces, detached from the caller, and records both the outer `unshare` pid and
# the namespace init's pid (as seen here) in $PIDS.
start_node() {
  local node=$1 upid ipid="" deadline autopard=""
  if [[ -s $AUTOPARD_PATH_FILE ]]; then read -r autopard <"$AUTOPARD_PATH_FILE" || true; fi
  rm -f "$PIDS/$node.init.pid" "$PIDS/$node.unshare.pid"
  # --kill-child: if unshare itself is killed, the kernel kills the namespace init (and so the node).
  spawn "$CLUSTER_DIR/log/$node.init.log" env -i PATH="$DAEMON_PATH" HOME=/root LANG=C.UTF-8 \
    AUTOPAR_CLUSTER_DIR="$CLUSTER_DIR" AUTOPAR_AUTOPARD="$autopard" AUTOPAR_NODE_UTS=1 \
    unshare --pid --fork --mount-proc --uts --kill-child \
    bash "$CLUSTER_LIB_DIR/node.sh" "$node" "$CLUSTER_DIR"
  upid=$!
  printf '%s\n' "$upid" >"$PIDS/$node.unshare.pid"
  deadline=$((SECONDS + 10))
  while [[ -z $ipid ]]; do
    read -r ipid _ <"/proc/$upid/task/$upid/children" 2>/dev/null || true
    if [[ -z $ipid ]]; then
      pid_alive "$upid" || die "$node: unshare exited at once; see $CLUSTER_DIR/log/$node.init.log"
      ((SECONDS < deadline)) || die "$node: namespace init did not appear; see $CLUSTER_DIR/log/$node.init.log"
      sleep 0.05
    fi
  done
  printf '%s\n' "$ipid" >"$PIDS/$node.init.pid"
}

# stop_nodes SIGNAL NODE...: ends the nodes' namespaces (TERM lets node.sh stop slurmd first; KILL
# is a node crash), all at once, and waits until every process in them is gone. Prints how many
# processes died.
stop_nodes() {
  local sig=$1 node ipid upid members=() upids=() inits=()
  shift
  for node in "$@"; do
    if ipid=$(node_init_pid "$node"); then
      inits+=("$ipid")
      mapfile -t -O "${#members[@]}" members < <(ns_members "$ipid")
      kill "-$sig" "$ipid" 2>/dev/null || true
    fi
    if upid=$(node_unshare_pid "$node"); then upids+=("$upid"); fi
  done
  if ! wait_pids_gone 15 "${members[@]}"; then
    log "nodes $* still running 15 s after SIG$sig; sending SIGKILL to their namespace inits"
    for ipid in "${inits[@]}"; do kill -KILL "$ipid" 2>/dev/null || true; done
    wait_pids_gone 10 "${members[@]}" || die "processes of nodes $* survive SIGKILL"
  fi
  # unshare exits on its own once its child is gone; only a lone unshare (no init) needs a signal,
  # and it must be SIGKILL: `unshare --fork` ignores SIGTERM/SIGINT while it waits for its child.
  if ! wait_pids_gone 5 "${upids[@]}"; then
    for upid in "${upids[@]}"; do kill -KILL "$upid" 2>/dev/null || true; done
    wait_pids_gone 5 "${upids[@]}" || die "unshare of nodes $* does not exit"
  fi
  for node in "$@"; do rm -f "$PIDS/$node.init.pid" "$PIDS/$node.unshare.pid"; done
  printf '%s\n' "${#members[@]}"
}

# stop_daemon NAME PID: SIGTERM, wait, SIGKILL if needed.
stop_daemon() {
  local name=$1 pid=$2
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_pids_gone 15 "$pid"; then
    log "$name (pid $pid) ignores SIGTERM; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_pids_gone 5 "$pid" || die "$name (pid $pid) survives SIGKILL"
  fi
}

# stop_all: ends everything start.sh started; idempotent. slurmctld goes first: stopped after its
# nodes, it spends seconds on shutdown waiting for RPCs to them.
stop_all() {
  local pid
  if pid=$(ctld_pid); then stop_daemon slurmctld "$pid"; fi
  stop_nodes TERM "${NODES[@]}" >/dev/null
  if pid=$(munged_pid); then stop_daemon munged "$pid"; fi
  rm -f "$PIDS"/*.pid
}

# node_state NODE: Slurm's short state of the node (idle, alloc, mix, down*, ...), "" if unknown.
node_state() {
  sinfo -h -n "$1" -o '%t' 2>/dev/null | head -n1 || true
}

# wait_node_state TIMEOUT_S NODE REGEX: succeeds once the node's state matches REGEX (anchored).
wait_node_state() {
  local deadline=$((SECONDS + $1)) node=$2 re=$3 st
  while :; do
    st=$(node_state "$node")
    [[ $st =~ ^($re)$ ]] && return 0
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# resume_if_down NODE: a node that Slurm keeps DOWN/DRAINED although its slurmd answers (no "*")
# is put back into service; ReturnToService=2 usually makes this unnecessary.
resume_if_down() {
  local st
  st=$(node_state "$1")
  case $st in
    down | drain | drng | fail | failg)
      log "$1 is $st although its slurmd responds; resuming it"
      scontrol update nodename="$1" state=resume 2>/dev/null || true
      ;;
  esac
}

# wait_nodes_up TIMEOUT_S NODE...: waits until each node is idle, allocated or mixed. Fails at once,
# showing the end of its log, when a node's namespace is gone (its slurmd exited, e.g. because a
# required SPANK plugin refused its plugstack.conf arguments).
wait_nodes_up() {
  local deadline=$((SECONDS + $1)) node st ok
  shift
  while :; do
    ok=1
    for node in "$@"; do
      if ! node_init_pid "$node" >/dev/null; then
        log "$node is not running (its slurmd exited); end of $CLUSTER_DIR/log/$node.init.log:"
        tail -n 4 "$CLUSTER_DIR/log/$node.init.log" | sed 's/^/    /' >&2 || true
        return 1
      fi
      st=$(node_state "$node")
      case $st in
        idle | alloc | mix) ;;
        *)
          ok=0
          resume_if_down "$node"
          ;;
      esac
    done
    ((ok)) && return 0
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

logs_hint() {
  printf 'logs: %s/log/ (slurmctld.log, slurmd-NODE.log, NODE.init.log, munged.log)' "$CLUSTER_DIR"
}
