#!/usr/bin/env bash
# The local cluster at scale: starts a cluster of its own with AUTOPAR_SCALE_NODES nodes
# (default 16; 32 by hand), each slurmd with its own autopard, beside the suite's cluster (own
# directory and ports), and runs a deterministic PyTorch DDP training (gloo) of NODES x TASKS ranks
# as a batch job with the plugin's checkpoint and recovery options, under
# `srun --mpi=pmix autopar-launch`, twice:
#  - uninterrupted: every rank's RANK/WORLD_SIZE/MASTER_ADDR as the step says, launch and
#    rendezvous, `autopar events JOBID` through node1's autopard merging every node's journal,
#    every checkpoint step COMPLETE with all ranks (in the timeline and in storage);
#  - with the last rank's program killed mid-run: the failure seen on every node, exactly one
#    recovery (in place, no requeue), every rank restored, every step COMPLETE, and the final model
#    bit for bit the uninterrupted run's (tests/cluster/scale_check.py checks what the jobs left).
# Prints one line per check and the times (cluster start, launch, first step, checkpoint
# completion, events merge, restart); stops its cluster whatever happens.
#
# Usage: scale_test.sh BUILD_DIR   (ctest: integration.scale16; run as root)
# Environment:
#   AUTOPAR_SCALE_NODES      nodes (default 16; at most 39, tests/cluster/start.sh)
#   AUTOPAR_SCALE_TASKS      ranks per node (default 2)
#   AUTOPAR_SCALE_STEPS      training steps (default 20; a checkpoint every 5)
#   AUTOPAR_SCALE_DIR        the cluster's directory (default /tmp/autopar-cluster-scale)
#   AUTOPAR_SCALE_PORT_BASE  default: the first of 21817, 22817, ..., 25817 whose ports are all free
#   AUTOPAR_SCALE_FIRST_JOB_ID  the first job id (default 900000)
set -euo pipefail

build=$(cd -- "${1:?usage: scale_test.sh BUILD_DIR}" && pwd)
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
nodes=${AUTOPAR_SCALE_NODES:-16}
tasks=${AUTOPAR_SCALE_TASKS:-2}
world=$((nodes * tasks))
python=${AUTOPAR_PYTHON:-/opt/autopar-venv/bin/python3} # the pinned environment (scripts/install-deps.sh), with torch

# Only this cluster's settings reach start.sh: nothing of the suite's (s3rver, extra autopard keys).
unset AUTOPAR_S3_ENDPOINT AUTOPAR_AUTOPARD_CONF_EXTRA AUTOPAR_PLUGSTACK_INCLUDE
export AUTOPAR_CLUSTER_DIR=${AUTOPAR_SCALE_DIR:-/tmp/autopar-cluster-scale}
export AUTOPAR_CLUSTER_NODES=$nodes
export AUTOPAR_PLUGIN=$build/spank/autopar.so
export AUTOPAR_AUTOPARD=$build/service/autopard/autopard
# As scripts/cluster-env.sh sets them for the suite's cluster, with this cluster's sockets.
export AUTOPAR_PLUGSTACK_ARGS="socket=$AUTOPAR_CLUSTER_DIR/run/autopard-%n.sock max_requeue=5 min_heartbeat_timeout=2 nccl_env=NCCL_SOCKET_IFNAME=lo"
# 32 slurmd registering on 2 cores take longer than the default 60 s allows.
export AUTOPAR_CLUSTER_TIMEOUT=${AUTOPAR_CLUSTER_TIMEOUT:-240}
export SLURM_CONF=$AUTOPAR_CLUSTER_DIR/etc/slurm.conf
# Job ids of its own (the suite's clusters: from 1, 500000 and 700000): what a job leaves under its id
# (the Python stack dumps' directory, its owner's) never meets another cluster's job.
export AUTOPAR_CLUSTER_FIRST_JOB_ID=${AUTOPAR_SCALE_FIRST_JOB_ID:-900000}

say() { printf 'scale: %s\n' "$*"; }
# shellcheck source=tests/cluster/checks.sh
source "$here/checks.sh"
((EUID == 0)) || { say "error: run as root (the cluster)" >&2; exit 1; }

# shellcheck source=tests/cluster/ports.sh
source "$here/ports.sh"
export AUTOPAR_CLUSTER_PORT_BASE=${AUTOPAR_SCALE_PORT_BASE:-$(free_port_base 21817 25817)}

work=$(mktemp -d /tmp/autopar-scale-test.XXXXXX)
chmod 0755 "$work"
cluster=0
cleanup() {
  local rc=$?
  if ((cluster)); then
    if ((rc || failures)); then
      for d in "$work"/*/; do
        [[ -f $d/out.txt ]] && cp "$d/out.txt" "$AUTOPAR_CLUSTER_DIR/log/scale-$(basename "$d").out"
        [[ -f $d/events.json ]] && cp "$d/events.json" "$AUTOPAR_CLUSTER_DIR/log/scale-$(basename "$d").events.json"
      done
    fi
    stop_own_cluster "$rc"
  fi
  rm -rf "$work"
  exit_with_verdict "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# --- the cluster -------------------------------------------------------------------------------

t=$SECONDS
cluster=1
# A fresh cluster: one left by a killed run keeps jobs in its Slurm state that hold the nodes.
"$here/stop.sh" --clean >/dev/null
"$here/start.sh" >"$work/start.log" 2>&1 ||
  { cat "$work/start.log" >&2; stop_here "start.sh with $nodes nodes ($AUTOPAR_CLUSTER_DIR)"; }
start_s=$((SECONDS - t))
idle=$(sinfo -h -N -t idle -o '%N' | sort -u | wc -l)
((idle == nodes)) || stop_here "$nodes nodes idle after start.sh (sinfo: $idle)"
ok "a cluster of $nodes nodes started in ${start_s}s ($AUTOPAR_CLUSTER_DIR, port $AUTOPAR_CLUSTER_PORT_BASE)"
socks=$(find "$AUTOPAR_CLUSTER_DIR/run" -name 'autopard-node*.sock' | wc -l)
check_autopards() {
  local deadline=$((SECONDS + 30))
  while ((socks < nodes && SECONDS < deadline)); do
    sleep 0.5
    socks=$(find "$AUTOPAR_CLUSTER_DIR/run" -name 'autopard-node*.sock' | wc -l)
  done
  ((socks == nodes))
}
check_autopards || stop_here "every node runs its autopard (sockets: $socks of $nodes)"
ok "every node runs its autopard ($socks sockets)"


# --- the training: NODES x TASKS ranks of a deterministic DDP run, checkpointing through autopard --

# Each rank checks the launcher's variables against the step and says when its program started,
# then runs the DDP training of the failure tests (tests/integration/requeue_train.py: gloo, every
# rank a line per step with its time, a checkpoint every 5 steps committed to its node's autopard
# and uploaded to a file:// store, a resumed run bit for bit the uninterrupted one).
src=$(cd -- "$here/../.." && pwd)
steps=${AUTOPAR_SCALE_STEPS:-20}
every=5
# The hang timeout: on 2 cores a rank's start-up (importing torch) and step grow with the ranks;
# the first step is allowed 3 times the timeout (core/failure/hang_detector.h).
hb_timeout=$((20 + world / 2))
cat >"$work/rank.py" <<'PY'
import os, runpy, socket, sys, time
started = time.time()
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
assert world == int(sys.argv[1]), f"WORLD_SIZE={world}, want {sys.argv[1]}"
assert rank == int(os.environ["SLURM_PROCID"]), f"RANK={rank} SLURM_PROCID={os.environ['SLURM_PROCID']}"
print(f"SCALE rank={rank} node={socket.gethostname()} master={os.environ['MASTER_ADDR']}"
      f" job={os.environ['SLURM_JOB_ID']} started={started:.3f}", flush=True)
train = sys.argv[2]
sys.path.insert(0, os.path.dirname(train))
sys.argv = [train] + sys.argv[3:]
runpy.run_path(train, run_name="__main__")
PY
chmod -R a+rX "$work"

# submit NAME: the training as a batch job with the plugin's checkpoint and recovery options (its
# output, checkpoints and final model under $work/NAME); prints the job id. The restart starts
# cold (--no-prewarm): a warm interpreter per rank is one more torch import per rank on the
# machine's 2 cores, and the warm start is proven in tests/integration/test_recover_in_place.py.
submit() {
  local name=$1 dir=$work/$1
  mkdir -p "$dir"
  cat >"$dir/job.sh" <<JOB
#!/bin/bash
#SBATCH -N$nodes --ntasks-per-node=$tasks -o $dir/out.txt -e $dir/out.txt --open-mode=append
#SBATCH --ckpt-upload=file://$dir/store --ckpt-dir=$dir/local/%n --ckpt-keep=10
#SBATCH --requeue-on-failure=3 --heartbeat-timeout=$hb_timeout
export PYTHONPATH=$src/python OMP_NUM_THREADS=1
srun --mpi=pmix $build/launcher/autopar-launch --no-prewarm -- $python $work/rank.py $world \
  $src/tests/integration/requeue_train.py --steps $steps --every $every --batch $((2 * world)) \
  --step-sleep 0.2 --out $dir/final.pt
JOB
  sbatch --parsable --chdir="$dir" "$dir/job.sh" | cut -d';' -f1
}
job_state() { scontrol show job "$1" 2>/dev/null | grep -oP '\bJobState=\K\S+' || echo GONE; }
# wait_job JOBID SECONDS: prints the job's final state (or "still STATE" when the time ran out).
wait_job() {
  local deadline=$((SECONDS + $2)) st
  while :; do
    st=$(job_state "$1")
    case $st in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | GONE)
        echo "$st"
        return
        ;;
    esac
    ((SECONDS < deadline)) || { echo "still $st"; return; }
    sleep 1
  done
}
# events JOBID KIND FILE: the job's timeline merged through node1's autopard, once it holds events
# of KIND from every node (each node publishes its journal at most once a second); prints seconds.
events() {
  local t deadline=$((SECONDS + 60)) have
  t=$(date +%s.%N)
  while :; do
    "$build/cli/autopar" events "$1" --json --socket "$AUTOPAR_CLUSTER_DIR/run/autopard-node1.sock" \
      >"$3" 2>"$work/events.err" || true
    have=$("$python" -c 'import json, sys; print(len({e["node"] for e in json.load(open(sys.argv[1]))["events"] if e["kind"] == sys.argv[2]}))' \
      "$3" "$2" 2>/dev/null || echo 0)
    ((have >= nodes || SECONDS >= deadline)) && break
    sleep 0.5
  done
  ((have >= nodes)) || sed 's/^/scale: autopar events: /' "$work/events.err" >&2
  awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}
# scale_check ARGS...: tests/cluster/scale_check.py's checks, counted; sets $times to its times.
# A checker that ends without naming a failed check (it crashed: a missing file, an empty events
# list) is a failure too.
scale_check() {
  local out rc=0 failed
  out=$("$python" "$here/scale_check.py" "$@" 2>&1) || rc=$?
  grep -v '^times ' <<<"$out" || true
  failed=$(grep -c '^FAIL' <<<"$out" || true)
  failures=$((failures + failed))
  ((rc == 0 || failed > 0)) || bad "scale_check.py $1 exited $rc without naming a failed check"
  times=$(sed -n 's/^times //p' <<<"$out")
}
ckpt_ls() { "$build/cli/autopar" ckpt ls "file://$work/$1/store" --json --socket "$AUTOPAR_CLUSTER_DIR/run/autopard-node1.sock"; }

# The uninterrupted run: launch, rendezvous, every node's journal merged, checkpoints COMPLETE.
t0=$(date +%s.%N)
ref=$(submit reference)
state=$(wait_job "$ref" 900)
[[ $state == COMPLETED ]] ||
  { tail -n 30 "$work/reference/out.txt" >&2; stop_here "the training of $world ranks (job $ref) ended $state"; }
ok "job $ref: $world ranks trained $steps steps and ended COMPLETED"
# The launcher gives MASTER_ADDR as rank 0's node's address (127.0.2.1 for node1).
grep '^SCALE ' "$work/reference/out.txt" | sed -E 's/[a-z]+=//g; s/^SCALE //' | sort -n >"$work/ranks"
node0=$(awk '$1 == 0 { print $2 }' "$work/ranks")
masters=$(awk '{ print $3 }' "$work/ranks" | sort -u | tr '\n' ' ')
node1_addr=$(getent ahostsv4 node1 | awk 'NR == 1 { print $1 }')
check "rank 0 runs on node1 and every rank's MASTER_ADDR is node1's (rank 0 on $node0; MASTER_ADDR $masters)" \
  test "$node0 $masters" = "node1 $node1_addr " -o "$node0 $masters" = "node1 node1 "
check "$tasks ranks on each of the $nodes nodes" \
  test "$(awk '{ print $2 }' "$work/ranks" | sort | uniq -c | awk -v t="$tasks" '$1 == t' | wc -l)" = "$nodes"
events_s=$(events "$ref" ckpt_committed "$work/reference/events.json")
check "autopar events wrote nothing to stderr" test ! -s "$work/events.err"
ckpt_ls reference >"$work/reference/ls.json" || bad "autopar ckpt ls of the reference's store"
scale_check reference "$work/reference/events.json" "$work/reference/ls.json" "$work/reference/out.txt" \
  "$t0" --nodes "$nodes" --world "$world" --steps "$steps" --every "$every"
ref_times="$times events_merged=$events_s"

# The same run with the last rank's program (on the last node) stopped mid-run (SIGSTOP: a hang):
# every other rank waits for it in the next all_reduce, so every node's autopard sees no progress
# and detects the hang; the job must recover exactly once, in place (no requeue), from its latest
# COMPLETE checkpoint, and end with the uninterrupted run's model.
job=$(submit recover)
victim=$((world - 1))
deadline=$((SECONDS + 600))
# The victim's program is found as soon as it has started (finding it reads every python3's
# environment: seconds on a loaded machine, more than the steps left after step 11), and stopped
# at the first poll that sees it past step 11.
victim_pid=
until [[ -n $victim_pid ]]; do
  ((SECONDS < deadline)) || stop_here "the program of rank $victim of job $job"
  [[ $(job_state "$job") =~ ^(PENDING|RUNNING|CONFIGURING|COMPLETING)$ ]] || stop_here "job $job ended early: $(job_state "$job")"
  if grep -q "^SCALE rank=$victim " "$work/recover/out.txt" 2>/dev/null; then
    for p in $(pgrep -x python3); do
      env=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null) || continue
      grep -qx "SLURM_JOB_ID=$job" <<<"$env" && grep -qx "RANK=$victim" <<<"$env" && { victim_pid=$p; break; }
    done
  fi
  [[ -n $victim_pid ]] || sleep 0.5
done
until awk -v r="$victim" '$1 == "train:" && $2 == "rank" && $3 == r && $5 >= 11 { f = 1 } END { exit !f }' \
  "$work/recover/out.txt" 2>/dev/null; do
  ((SECONDS < deadline)) || stop_here "rank $victim of job $job reached step 11"
  kill -0 "$victim_pid" 2>/dev/null || stop_here "rank $victim of job $job (pid $victim_pid) still running at step 11"
  sleep 0.1
done
fault=$(date +%s.%N)
kill -STOP "$victim_pid"
sleep 1 # its last line out
last=$(awk -v r="$victim" '$1 == "train:" && $2 == "rank" && $3 == r && $5 > m { m = $5 } END { print m + 0 }' "$work/recover/out.txt")
check "rank $victim stopped mid-run (at step $last of 0..$((steps - 1)))" test "$last" -lt $((steps - 1))
state=$(wait_job "$job" 900)
[[ $state == COMPLETED ]] || { tail -n 30 "$work/recover/out.txt" >&2; bad "job $job ended $state"; }
restarts=$(scontrol show job "$job" | grep -oP '\bRestarts=\K\d+' || echo '?')
kill -KILL "$victim_pid" 2>/dev/null && bad "the stopped program of rank $victim outlived its job"
check "job $job: rank $victim stopped, ended COMPLETED without a requeue (Restarts=$restarts)" test "$state $restarts" = "COMPLETED 0"
events "$job" restored "$work/recover/events.json" >/dev/null
ckpt_ls recover >"$work/recover/ls.json" || bad "autopar ckpt ls of the recovered run's store"
scale_check recovered "$work/recover/events.json" "$work/recover/ls.json" "$work/recover/out.txt" \
  "$fault" --nodes "$nodes" --world "$world" --steps "$steps" --every "$every"
rec_times=$times
scale_check same-model "$work/recover/final.pt" "$work/reference/final.pt"

say "times at $nodes nodes x $tasks ranks: cluster start ${start_s}s; uninterrupted run: $ref_times;" \
  "rank $victim stopped (--heartbeat-timeout=$hb_timeout): $rec_times"
