#!/usr/bin/env bash
# Proves the local test cluster works: start (twice: the second is a no-op), srun/sbatch/salloc as
# root and as the second account, PMIx (a Put/Fence/Get client across the four nodes), PyTorch gloo
# DDP with MASTER_ADDR=node1, killing a node completely (slurmd, slurmstepd and tasks) and reviving
# it, recovering from a crashed slurmctld+munged and from a crash of everything, and a stop that ends
# exactly the cluster's processes. Prints one line per check and the time of each phase.
#
# Uses its own cluster (so it never disturbs one that is in use):
#   AUTOPAR_SELFTEST_DIR        default /tmp/autopar-cluster-selftest
#   AUTOPAR_SELFTEST_PORT_BASE  default: the first of 27817, 28817, ..., 31817 whose ports are all free
#   AUTOPAR_SELFTEST_TORCH=0    skips the PyTorch check (about 15 s on 2 cores)
#   AUTOPAR_PYTHON              the interpreter with torch (default: scripts/install-deps.sh's)
# Exit status 0 when every check passed. On failure the cluster is stopped and its logs kept.
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
python=${AUTOPAR_PYTHON:-/opt/autopar-venv/bin/python3}
export AUTOPAR_CLUSTER_DIR=${AUTOPAR_SELFTEST_DIR:-/tmp/autopar-cluster-selftest}
# Its checks expect node1..node4, whatever the caller's AUTOPAR_CLUSTER_NODES.
export AUTOPAR_CLUSTER_NODES=4

# shellcheck source=tests/cluster/ports.sh
source "$here/ports.sh"
if [[ -z ${AUTOPAR_SELFTEST_PORT_BASE:-} ]]; then
  AUTOPAR_SELFTEST_PORT_BASE=$(free_port_base 27817 31817) || { echo "selftest: no free port range" >&2; exit 1; }
fi
export AUTOPAR_CLUSTER_PORT_BASE=$AUTOPAR_SELFTEST_PORT_BASE
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"
check_settings
require_root

# shellcheck source-path=SCRIPTDIR source=checks.sh
source "$here/checks.sh"
t_start=$SECONDS
phase_t=$SECONDS
timings=()
work=$(mktemp -d /tmp/autopar-selftest-work.XXXXXX)
chmod 0755 "$work"
bystander=""
outside_munged=""  # PID:START of the munged this script starts outside the cluster

phase() {
  timings+=("$(printf '%-28s %3ds' "$1" $((SECONDS - phase_t)))")
  phase_t=$SECONDS
}

cleanup() {
  local rc=$?
  if [[ -n $bystander ]]; then kill "$bystander" 2>/dev/null || true; fi
  if [[ -n $outside_munged ]] && kill "${outside_munged%%:*}" 2>/dev/null; then
    # munged writes its seed file and removes its socket as it exits: its directory can be
    # removed only after that (rm -rf beside it: "Directory not empty").
    for _ in $(seq 50); do
      kill -0 "${outside_munged%%:*}" 2>/dev/null || break
      sleep 0.1
    done
  fi
  if ((failures || rc)); then
    "$here/stop.sh" >/dev/null 2>&1 || true
    printf 'selftest FAILED (%d of %d checks); logs kept in %s/log\n' "$failures" "$checks" "$CLUSTER_DIR" >&2
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# all_node_members: every process (as seen here) of the cluster's four node namespaces.
all_node_members() {
  local node ipid
  for node in "${NODES[@]}"; do
    if ipid=$(node_init_pid "$node"); then ns_members "$ipid"; fi
  done
}

# cluster_procs: every process whose command line names the cluster directory, plus every process
# in its node namespaces (tasks there need not name the directory).
cluster_procs() {
  {
    pgrep -f -- "$CLUSTER_DIR/" || true
    all_node_members
  } | sort -un
}

# process_id PID: "PID:START" (START: the kernel's start time in ticks, so a reused pid never
# matches) of a live process; fails for a process that is exiting: a zombie its parent has not
# reaped yet (this cluster's daemons are re-parented to PID 1 once start.sh exits, and a PID 1 may
# reap seconds late), or one whose memory is already gone (its command line reads empty).
process_id() {
  local stat="" fields
  [[ $1 =~ ^[0-9]+$ ]] || return 1
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  read -r -a fields <<<"${stat##*) }"  # fields[0] is the state (stat's field 3), [19] the start
  [[ ${fields[0]} != Z && ${fields[0]} != X && -n $(pid_cmdline "$1") ]] || return 1
  printf '%s:%s\n' "$1" "${fields[19]}"
}

# other_daemons OURS...: "PID:START" of every live slurm/munge daemon that is not among OURS (this
# cluster's processes: its pid files, its node namespaces, its command lines), e.g. another test
# cluster, a system munged or a site's Slurm; each must survive stop.sh. Daemons of this cluster
# that are still exiting from an earlier phase (a killed slurmctld not yet reaped) are not "others".
other_daemons() {
  local p
  for p in $(pgrep -x 'slurmd|slurmctld|munged' || true); do
    [[ " $* " == *" $p "* ]] || process_id "$p" || true
  done
}

# dead_daemons ID...: the IDs (from other_daemons) whose process no longer runs, with its name.
dead_daemons() {
  local id
  for id in "$@"; do
    [[ $(process_id "${id%%:*}") == "$id" ]] || printf '%s ' "$id"
  done
}

is_zombie() {
  local stat=""
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} == Z ]]
}

not() { ! "$@"; }

expect_lines() { # expect_lines WANT GOT: compares two newline-separated lists
  if [[ $1 == "$2" ]]; then return 0; fi
  printf '  want: %s\n  got:  %s\n' "${1//$'\n'/ }" "${2//$'\n'/ }"
  return 1
}

cd "$work"

# A stand-in for autopard: proves that node.sh starts AUTOPAR_AUTOPARD inside the node with its
# --config file, and that the daemon dies and comes back with its node.
cat >"$work/autopard-stub" <<'EOF'
#!/bin/bash
[[ ${1:-} == --config && -r ${2:-} ]] || { echo "usage: autopard-stub --config FILE" >&2; exit 2; }
state_dir=$(awk -F ' = ' '$1 == "state_dir" { print $2 }' "$2")
node=$(awk -F ' = ' '$1 == "node" { print $2 }' "$2")
echo "$node $(hostname)" >"$state_dir/stub-started"
exec -a autopard-stub sleep 100000
EOF
chmod 0755 "$work/autopard-stub"
export AUTOPAR_AUTOPARD=$work/autopard-stub
# stubs_on NODE: how many autopard stand-ins run inside NODE's namespace.
stubs_on() {
  local ipid
  ipid=$(node_init_pid "$1") || { echo 0; return 0; }
  ns_members "$ipid" | xargs -r ps -o args= -p 2>/dev/null | grep -c '^autopard-stub' || true
}

# An outside munged, started as Debian's munge.service starts one (as the munge user; it
# daemonizes, so its parent is PID 1), with its own key and socket: another cluster's daemon on
# this machine, which neither start.sh nor stop.sh may touch (a system munged or Slurm may run too).
start_outside_munged() {
  local d=$work/outside-munge pid
  mkdir -p "$d"
  dd if=/dev/urandom of="$d/munge.key" bs=1024 count=1 status=none
  chmod 0755 "$d"  # munged: the socket's directory must be searchable by all
  chmod 0600 "$d/munge.key"
  chown -R munge:munge "$d"
  runuser -u munge -- munged --socket="$d/munge.socket.2" --key-file="$d/munge.key" \
    --pid-file="$d/munged.pid" --log-file="$d/munged.log" --seed-file="$d/munged.seed" || return 1
  read -r pid <"$d/munged.pid" || return 1
  outside_munged=$(process_id "$pid")
}

# --- start ---------------------------------------------------------------------------------------
"$here/stop.sh" --clean >/dev/null 2>&1 || true
check "an outside munged runs (started as Debian's munge.service does)" start_outside_munged
check "start.sh starts the cluster" "$here/start.sh"
phase "start (fresh)"
pids_before=$(cat "$PIDS"/*.pid | sort | tr '\n' ' ')
out=$("$here/start.sh" 2>&1) || true
check "second start.sh is a no-op" grep -q "already running and healthy" <<<"$out"
check "second start.sh keeps every process" test "$pids_before" == "$(cat "$PIDS"/*.pid | sort | tr '\n' ' ')"
check "env.sh points at the cluster" grep -qx "export SLURM_CONF=$CONF" "$CLUSTER_DIR/env.sh"
check "node1..node4 resolve to 127.0.2.1..4" expect_lines $'127.0.2.1\n127.0.2.2\n127.0.2.3\n127.0.2.4' \
  "$(for n in "${NODES[@]}"; do getent hosts "$n" | awk '{print $1}'; done)"
check "slurm.conf uses the private munge socket" grep -q "^AuthInfo=socket=$MUNGE_SOCKET,cred_expire=" "$CONF"
plugin=${AUTOPAR_PLUGIN:-$REPO_ROOT/build/spank/autopar.so}
if [[ -f $plugin ]]; then
  check "plugstack.conf loads $plugin" grep -q "^required $plugin" "$CLUSTER_DIR/etc/plugstack.conf"
else
  check "plugstack.conf is empty without a plugin" not grep -q "^required" "$CLUSTER_DIR/etc/plugstack.conf"
fi
check "autopard (stand-in) runs on each node with its config" expect_lines \
  $'node1 node1\nnode2 node2\nnode3 node3\nnode4 node4' \
  "$(for n in "${NODES[@]}"; do cat "$CLUSTER_DIR/autopard/$n/stub-started" 2>/dev/null; done)"
phase "start (again, no-op)"

# --- jobs ----------------------------------------------------------------------------------------
check "srun -N4 -n8 --ntasks-per-node=2 hostname: 2 tasks on each node (own hostname)" expect_lines \
  $'2 node1\n2 node2\n2 node3\n2 node4' \
  "$(srun -N4 -n8 --ntasks-per-node=2 hostname | sort | uniq -c | awk '{print $1, $2}')"
check "srun -N4 -n8: SLURMD_NODENAME is node1..node4" expect_lines $'node1\nnode2\nnode3\nnode4' \
  "$(srun -N4 -n8 printenv SLURMD_NODENAME | sort -u)"
check "srun --mpi=pmix -N4 -n8: PMIX_RANK 0..7" expect_lines "$(seq 0 7)" \
  "$(srun --mpi=pmix -N4 -n8 printenv PMIX_RANK | sort -n)"
if command -v cc >/dev/null && pkg-config --exists pmix; then
  # shellcheck disable=SC2046 # pkg-config prints several words on purpose
  cc -O1 -o "$work/pmix_check" "$here/pmix_check.c" $(pkg-config --cflags --libs pmix)
  check "PMIx Put/Commit/Fence/Get across 4 nodes (8 ranks)" expect_lines \
    "$(for r in $(seq 0 7); do echo "pmix rank $r of 8 ok"; done)" \
    "$(srun --mpi=pmix -N4 -n8 "$work/pmix_check" | sort -V)"
else
  printf 'skip PMIx client check (no cc or pmix.pc)\n'
fi
check "salloc -N2 srun hostname" expect_lines $'node1\nnode2' "$(salloc -N2 srun hostname 2>/dev/null | sort)"
printf '#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1\nsrun hostname\n' >"$work/job.sh"
jid=$(sbatch --parsable --wait -o "$work/job-%j.out" "$work/job.sh")
check "sbatch --wait with #SBATCH lines" expect_lines $'node1\nnode2' "$(sort "$work/job-$jid.out")"
check "srun as autopar-test2" expect_lines $'autopar-test2\nautopar-test2' \
  "$(runuser -u autopar-test2 -- env SLURM_CONF="$CONF" srun -N2 id -un)"
check "srun --mpi=pmix as autopar-test2" expect_lines "$(seq 0 3)" \
  "$(runuser -u autopar-test2 -- env SLURM_CONF="$CONF" srun --mpi=pmix -N4 -n4 printenv PMIX_RANK | sort -n)"
phase "srun/salloc/sbatch/PMIx"

if [[ ${AUTOPAR_SELFTEST_TORCH:-1} != 0 ]]; then
  cat >"$work/ddp.py" <<'EOF'
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")  # env:// from MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
model(torch.ones(2, 4)).sum().backward()  # gradients all-reduced across the 8 ranks
x = torch.tensor([float(dist.get_rank())])
dist.all_reduce(x)
print(os.environ["SLURMD_NODENAME"], dist.get_rank(), dist.get_world_size(), int(x.item()), flush=True)
dist.destroy_process_group()
# torch's gloo teardown at interpreter exit sometimes aborts ("terminate called without an active
# exception", a fresh-clone CI run): the check is done, so end here.
os._exit(0)
EOF
  port=$((AUTOPAR_CLUSTER_PORT_BASE + 50))
  # shellcheck disable=SC2016 # expanded by the task's shell
  out=$(srun -N4 -n8 --ntasks-per-node=2 bash -c \
    'MASTER_ADDR=node1 MASTER_PORT='"$port"' RANK=$SLURM_PROCID WORLD_SIZE=8 exec '"$python"' '"$work/ddp.py" |
    sort -k2n | awk '{print $1, $2, $3, $4}')
  check "PyTorch gloo DDP, 8 ranks on node1..node4, MASTER_ADDR=node1" expect_lines \
    "$(for r in $(seq 0 7); do echo "node$((r / 2 + 1)) $r 8 28"; done)" "$out"
  phase "PyTorch DDP"
else
  printf 'skip PyTorch check\n'
fi

zombies=""
for p in $(all_node_members); do is_zombie "$p" && zombies+="$p "; done
check "no zombies in the node namespaces" test -z "$zombies"

# --- kill a node -------------------------------------------------------------------------------------
jid=$(sbatch --parsable -w node2 -N1 --no-requeue -o /dev/null --wrap 'srun sleep 300')
ipid=$(node_init_pid node2)
sleep_pid=""
for _ in $(seq 100); do
  for p in $(ns_members "$ipid"); do
    [[ $(pid_cmdline "$p") == *"sleep 300"* && $(pid_cmdline "$p") != *srun* ]] && sleep_pid=$p
  done
  [[ -n $sleep_pid ]] && break
  sleep 0.1
done
check "job $jid runs 'sleep 300' on node2" test -n "$sleep_pid"
mapfile -t node2_procs < <(ns_members "$ipid")
phase "job on node2"
out=$("$here/kill-node.sh" node2 2>&1) || true
printf '  %s\n' "$out"
check "kill-node.sh reports the processes that died (${#node2_procs[@]} seen before)" \
  grep -qE "killed node2: [0-9]+ processes died" <<<"$out"
survivors=""
for p in "${node2_procs[@]}"; do pid_alive "$p" && survivors+="$p "; done
check "no process of node2 is left (slurmd, slurmstepd, sleep)" test -z "$survivors"
check "the sleep task (pid $sleep_pid) is gone" not pid_alive "${sleep_pid:-0}"
check "no slurmd of node2 runs" not pgrep -f "slurmd -D -N node2 -f $CONF"
check "node2's autopard died with it" test "$(stubs_on node2)" -eq 0
check "other nodes keep running" test "$(for n in node1 node3 node4; do node_init_pid "$n" >/dev/null && echo up; done | wc -l)" -eq 3
phase "kill-node"
t=$SECONDS
check "Slurm marks node2 DOWN" wait_node_state 60 node2 'down\*'
printf '  node2 DOWN %ds after the kill\n' $((SECONDS - t))
phase "wait for DOWN"
check "revive-node.sh node2" "$here/revive-node.sh" node2
check "node2 is idle again" wait_node_state 5 node2 idle
check "job $jid ended with NODE_FAIL" bash -c "scontrol show job $jid | grep -q 'JobState=NODE_FAIL'"
check "srun on all 4 nodes after revive" expect_lines $'node1\nnode2\nnode3\nnode4' "$(srun -N4 hostname | sort)"
check "node2's autopard runs again" test "$(stubs_on node2)" -eq 1
phase "revive-node"
ctld_before=$(ctld_pid)
"$here/kill-node.sh" node3 >/dev/null 2>&1
out=$("$here/start.sh" 2>&1) || true
check "start.sh revives only a dead node" grep -q "reviving dead nodes: node3" <<<"$out"
check "... and keeps slurmctld" test "$(ctld_pid)" == "$ctld_before"
check "node3 is idle again" wait_node_state 5 node3 idle
phase "start.sh revives a node"
old_pids=$(cat "$PIDS"/*.pid | sort)
out=$(AUTOPAR_PLUGIN=$work/no-such-plugin.so "$here/start.sh" 2>&1) || true
check "a changed configuration restarts the cluster" grep -q "configuration changed" <<<"$out"
check "... with new processes" not grep -qxF -f <(printf '%s\n' "$old_pids") <(cat "$PIDS"/*.pid)
check "... and an empty plugstack.conf" not grep -q "^required" "$CLUSTER_DIR/etc/plugstack.conf"
export AUTOPAR_PLUGIN=$work/no-such-plugin.so
phase "restart on config change"

# --- crashes -------------------------------------------------------------------------------------------
kill -KILL "$(ctld_pid)" "$(munged_pid)"
wait_pids_gone 5 "$(cat "$PIDS/slurmctld.pid")" "$(cat "$PIDS/munged.pid")" || true
out=$("$here/start.sh" 2>&1) || true
check "start.sh recovers from a killed slurmctld and munged" grep -q "cleaning up" <<<"$out"
check "all nodes idle after recovery" wait_nodes_up 5 "${NODES[@]}"
check "srun works after recovery" expect_lines $'node1\nnode2\nnode3\nnode4' "$(srun -N4 hostname | sort)"
phase "recover ctld+munged crash"
# Everything dies at once (like a reboot): stale pid files, sockets and spool files stay behind.
mapfile -t all < <(cat "$PIDS"/*.pid)
kill -KILL "${all[@]}" 2>/dev/null || true
wait_pids_gone 10 "${all[@]}" || true
check "start.sh recovers after everything was killed" "$here/start.sh"
check "srun works after a full crash" expect_lines $'node1\nnode2\nnode3\nnode4' "$(srun -N4 hostname | sort)"
phase "recover full crash"

# --- stop ------------------------------------------------------------------------------------------
sleep 900 &
bystander=$!
# A running step: stop.sh must end its tasks. Its srun (a client, not part of the cluster) runs in
# its own process group so that this script can end it afterwards: srun keeps retrying a cluster
# that has gone away.
# (Started from a subshell so that it is not a job of this shell, which would report its death.)
srun_pid=$(
  setsid srun -N4 -n4 sleep 600 >"$work/srun.out" 2>&1 &
  echo $!
)
sleeps_on_nodes() { all_node_members | xargs -r ps -o args= -p 2>/dev/null | grep -c '^/usr/bin/sleep 600'; }
for _ in $(seq 100); do
  [[ $(sleeps_on_nodes) == 4 ]] && break
  sleep 0.1
done
check "a 4-node step runs before stop.sh" test "$(sleeps_on_nodes)" -eq 4
mapfile -t ours < <(cluster_procs)
mapfile -t others < <(other_daemons "${ours[@]}")
check "the outside munged is among the other daemons" grep -qxF "$outside_munged" <(printf '%s\n' "${others[@]}")
killer=""
if [[ ${AUTOPAR_SELFTEST_KILL_OUTSIDE:-0} == 1 ]]; then
  # The variant that proves the check: an outside daemon dies while stop.sh runs.
  (
    sleep 0.2
    kill -KILL "${outside_munged%%:*}"
  ) &
  killer=$!
fi
out=$("$here/stop.sh" 2>&1) || true
if [[ -n $killer ]]; then wait "$killer" || true; fi
kill -KILL -- "-$srun_pid" 2>/dev/null || true
wait_pids_gone 5 "$srun_pid" || true
check "stop.sh stops the cluster" grep -q "stopped" <<<"$out"
check "no process of the cluster is left (${#ours[@]} before)" test -z "$(cluster_procs)"
survivors=""
for p in "${ours[@]}"; do pid_alive "$p" && survivors+="$p "; done
check "every process seen before stop.sh is gone" test -z "$survivors"
check "a process the cluster did not start survives" pid_alive "$bystander"
dead_others=$(dead_daemons "${others[@]}")
check "slurm/munge daemons of other clusters (${#others[@]}) survive" test -z "$dead_others"
[[ -z $dead_others ]] || printf '  gone (pid:start): %s\n' "$dead_others"
check "the outside munged started before the cluster (pid ${outside_munged%%:*}) still runs" \
  test -z "$(dead_daemons "$outside_munged")"
check "the cluster's ports are free" not grep -qE ":($PORT_BASE|$((PORT_BASE + 1))|$((PORT_BASE + 4)))\$" \
  <<<"$(ss -Hltn | awk '{print $4}')"
check "stop.sh again is a no-op" "$here/stop.sh"
check "logs are kept" test -s "$CLUSTER_DIR/log/slurmctld.log"
phase "stop"

printf '\nTimings:\n'
printf '  %s\n' "${timings[@]}"
printf '  %-28s %3ds\n' "total" $((SECONDS - t_start))
if ((failures)); then exit 1; fi
"$here/stop.sh" --clean >/dev/null
printf 'selftest passed: %d checks\n' "$checks"
