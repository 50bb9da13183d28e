#!/usr/bin/env bash
# Runs one integration test (COMMAND...) on a local test cluster of its own for as long as it
# runs: ctest's wrapper for every test that needs the cluster (tests/CMakeLists.txt).
#
#   tests/cluster/on_cluster.sh [--alone] COMMAND [ARG...]
#
# --alone: a test that runs clusters of its own (the self-test, the packages', the scale test):
# it is given every cluster (tests/CMakeLists.txt asks ctest for all three), so that nothing runs beside
# it, and needs none of them to be running.
#
# Which cluster: with ctest's resource allocation (scripts/test.sh runs three clusters and gives
# ctest tests/cluster/clusters.json), the clusters ctest allocated to the test: id c1 is
# $AUTOPAR_CLUSTER_DIR (default /tmp/autopar-cluster), cN is $AUTOPAR_CLUSTER_DIR-N. Without it
# (ctest run by hand), the cluster that SLURM_CONF names. The test gets SLURM_CONF and
# AUTOPAR_CLUSTER_DIR of the first.
#
# Each cluster is also locked (flock on <dir>/test.lock) while the test runs, so that two tests
# never share a cluster, whoever starts them (`ctest -j2` without a resource spec waits here).
set -euo pipefail
alone=0
if [[ ${1:-} == --alone ]]; then
  alone=1
  shift
fi
(($# > 0)) || { echo "on_cluster.sh: usage: on_cluster.sh [--alone] COMMAND [ARG...]" >&2; exit 2; }

first=${AUTOPAR_CLUSTER_DIR:-}
if [[ -z $first && -n ${SLURM_CONF:-} ]]; then
  first=$(dirname -- "$(dirname -- "$SLURM_CONF")")
fi
first=${first:-/tmp/autopar-cluster}

dirs=()
groups=${CTEST_RESOURCE_GROUP_COUNT:-0}
for ((g = 0; g < groups; g++)); do
  var=CTEST_RESOURCE_GROUP_${g}_CLUSTERS
  spec=${!var:-}  # "id:c2,slots:1"
  id=${spec#id:}
  id=${id%%,*}
  case $id in
    c1) dirs+=("$first") ;;
    c[23]) dirs+=("$first-${id#c}") ;;
    *) echo "on_cluster.sh: $var: unknown cluster '$spec' (tests/cluster/clusters.json has c1, c2, c3)" >&2
       exit 2 ;;
  esac
done
((${#dirs[@]} > 0)) || dirs=("$first")

cmd=("$@")
for d in "${dirs[@]}"; do
  if ((alone)) && [[ ! -d $d ]]; then
    continue  # nothing to keep off a cluster that is not there
  fi
  [[ -f $d/etc/slurm.conf ]] || ((alone)) || {
    echo "on_cluster.sh: no test cluster at $d (tests/cluster/start.sh; scripts/test.sh starts them)" >&2
    exit 2
  }
  # -o: the lock's descriptor is not inherited by the test, so a daemon it starts (a node it
  # revives) does not hold the cluster after the test ends.
  cmd=(flock -o "$d/test.lock" "${cmd[@]}")
done

if ((!alone)); then
  export AUTOPAR_CLUSTER_DIR=${dirs[0]}
  export SLURM_CONF=${dirs[0]}/etc/slurm.conf
fi
exec "${cmd[@]}"
