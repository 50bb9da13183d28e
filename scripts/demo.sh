#!/usr/bin/env bash
# The main job, on a fresh machine (root, Debian 12): installs the dependencies, builds autopar,
# starts the local 4-node Slurm cluster with the plugin, submits etc/examples/train.sbatch (a
# PyTorch DDP training with #SBATCH autopar options) and follows it to its final loss.
# The cluster keeps running afterwards: `source $AUTOPAR_CLUSTER_DIR/env.sh` to use it,
# `bash tests/cluster/stop.sh` to stop it.
set -euo pipefail
# shellcheck source=cluster-env.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/cluster-env.sh"
cd "$AUTOPAR_REPO"

bash scripts/install-deps.sh
bash scripts/build.sh
bash tests/cluster/start.sh
# shellcheck source=/dev/null
source "$AUTOPAR_CLUSTER_DIR/env.sh"

# autopar-launch and the autopar CLI from the build (the job inherits this PATH).
export PATH=$AUTOPAR_BUILD_DIR/launcher:$AUTOPAR_BUILD_DIR/cli:$PATH
workdir=$AUTOPAR_CLUSTER_DIR/demo
mkdir -p "$workdir"
chmod 0777 "$workdir"
job=$(sbatch --parsable --chdir="$workdir" --output="$workdir/train-%j.out" \
  etc/examples/train.sbatch)
echo "demo: submitted job $job (etc/examples/train.sbatch); following $workdir/train-$job.out"
out=$workdir/train-$job.out
while :; do
  state=$(scontrol -o show job "$job" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  case $state in
    PENDING | RUNNING | CONFIGURING | COMPLETING | REQUEUED) sleep 1 ;;
    *) break ;;
  esac
done
cat "$out"
echo "demo: job $job ended $state"
[[ $state == COMPLETED ]]
