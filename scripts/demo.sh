#!/usr/bin/env bash
# The main job, on a fresh machine (root, Debian 12): installs its dependencies, builds autopar,
# starts the local 4-node Slurm cluster with the plugin, submits etc/examples/train.sbatch (a
# Hugging Face Trainer run, etc/examples/hf_train.py, with #SBATCH autopar options) and follows it
# to its final loss. On the way
# it shows a recovered fault: once a checkpoint is COMPLETE it kills one rank (kill -9); every
# rank's program is restarted in place (the same job on the same nodes, no requeue) and resumes
# from that checkpoint; at the end `autopar events` prints the job's story merged from every node's
# journal.
# The cluster keeps running afterwards: `source $AUTOPAR_CLUSTER_DIR/env.sh` to use it,
# `bash tests/cluster/stop.sh` to stop it.
set -euo pipefail
# shellcheck source=cluster-env.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/cluster-env.sh"
cd "$AUTOPAR_REPO"

# Only what this job needs; the test command (scripts/test.sh) installs and builds the rest.
bash scripts/install-deps.sh --demo
bash scripts/build.sh --demo
bash tests/cluster/start.sh
# shellcheck source=/dev/null
source "$AUTOPAR_CLUSTER_DIR/env.sh"

# autopar-launch and the autopar CLI from the build (the job inherits this PATH).
export PATH=$AUTOPAR_BUILD_DIR/launcher:$AUTOPAR_BUILD_DIR/cli:$PATH
workdir=$AUTOPAR_CLUSTER_DIR/demo
mkdir -p "$workdir"
chmod 0777 "$workdir"
# The training finds autopar's Python module (checkpoints, heartbeats) here; checkpoints are
# uploaded to a directory all nodes of this cluster share.
export PYTHONPATH=$AUTOPAR_REPO/python
# A new store per demo run: restoring by URI would otherwise resume from an earlier demo's job.
store=$(mktemp -d "$workdir/store.XXXXXX")
chmod 0777 "$store"
job=$(sbatch --parsable --chdir="$workdir" --output="$workdir/train-%j.out" --open-mode=append \
  --ckpt-upload="file://$store" etc/examples/train.sbatch)
echo "demo: submitted job $job (etc/examples/train.sbatch); following $workdir/train-$job.out"
out=$workdir/train-$job.out

# autopar asks a node's autopard (here node1's socket; on a real cluster the node's default one).
sock=$AUTOPAR_CLUSTER_DIR/run/autopard-node1.sock
job_state() { scontrol -o show job "$job" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
# rank_pid RANK: the PID of the job's Python process of that rank (all nodes are this host).
rank_pid() {
  local pid
  for pid in $(pgrep -f hf_train.py); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "SLURM_JOB_ID=$job" &&
      tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "RANK=$1" &&
      [[ $(cat "/proc/$pid/comm" 2>/dev/null) == python3 ]]; then
      echo "$pid"
      return 0
    fi
  done
  return 1
}

# The fault: once a checkpoint is COMPLETE, rank 5 dies (kill -9) in the middle of training.
killed=""
while [[ -z $killed ]]; do
  case $(job_state) in
    PENDING | RUNNING | CONFIGURING) ;;
    *) break ;;
  esac
  if autopar events "$job" --json --socket "$sock" | grep -q '"kind":"ckpt_complete"'; then
    if pid=$(rank_pid 5); then
      kill -9 "$pid"
      killed=$pid
      echo "demo: killed rank 5 (pid $pid) of job $job after its first COMPLETE checkpoint;" \
        "every rank restarts in place and resumes from that checkpoint"
    fi
  fi
  sleep 0.5
done
while :; do
  state=$(job_state)
  case $state in
    PENDING | RUNNING | CONFIGURING | COMPLETING | REQUEUED) sleep 1 ;;
    *) break ;;
  esac
done
cat "$out"
echo "demo: job $job ended $state ($(scontrol -o show job "$job" | grep -o 'Restarts=[0-9]*'): recovered in place)"
echo "demo: autopar events $job (every node's journal, merged in time order; the per-rank" \
  "ckpt_committed, ckpt_uploaded and ckpt_retention lines are left out here):"
sleep 1.5  # nodes publish their journals at most once a second
autopar events "$job" --socket "$sock" |
  grep -v -E '  (ckpt_committed|ckpt_uploaded|ckpt_retention[a-z_]*)  ' | cut -c1-160
[[ $state == COMPLETED && -n $killed ]]
