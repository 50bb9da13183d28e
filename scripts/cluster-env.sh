# Sourced by scripts/demo.sh and scripts/test.sh: how the local test cluster is set up for autopar.
# (tests/cluster/start.sh documents each variable.)
# shellcheck shell=bash
AUTOPAR_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export AUTOPAR_BUILD_DIR=${AUTOPAR_BUILD_DIR:-$AUTOPAR_REPO/build}
export AUTOPAR_CLUSTER_DIR=${AUTOPAR_CLUSTER_DIR:-/tmp/autopar-cluster}
export AUTOPAR_PLUGIN=$AUTOPAR_BUILD_DIR/spank/autopar.so
# autopard on every node (tests/cluster/node.sh starts it; its config comes from start.sh and picks
# up AUTOPAR_S3_ENDPOINT when s3rver was started first, as scripts/test.sh does).
export AUTOPAR_AUTOPARD=${AUTOPAR_AUTOPARD:-$AUTOPAR_BUILD_DIR/service/autopard/autopard}
# The plugin's site arguments on the test cluster: one autopard socket per node, requeue limits,
# short heartbeat timeouts allowed for the fault tests, and a site NCCL default (loopback here).
export AUTOPAR_PLUGSTACK_ARGS="socket=$AUTOPAR_CLUSTER_DIR/run/autopard-%n.sock max_requeue=5 min_heartbeat_timeout=2 nccl_env=NCCL_SOCKET_IFNAME=lo"
# The Python environment (scripts/install-deps.sh, pinned in scripts/python-requirements.txt):
# first on PATH, so `python3` here and in the jobs submitted from here (sbatch exports PATH) is its
# interpreter, the one with torch; AUTOPAR_PYTHON names it where a script needs the path.
export AUTOPAR_VENV=${AUTOPAR_VENV:-/opt/autopar-venv}
export AUTOPAR_PYTHON=${AUTOPAR_PYTHON:-$AUTOPAR_VENV/bin/python3}
case ":$PATH:" in
  *":$AUTOPAR_VENV/bin:"*) ;;
  *) export PATH=$AUTOPAR_VENV/bin:$PATH ;;
esac
