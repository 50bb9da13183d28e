#!/usr/bin/env bash
# Installs the system dependencies of autopar on a fresh Debian 12 machine (run as root).
# With --demo only what the main job (scripts/demo.sh) builds and runs on: the compilers, Slurm,
# munge, PMIx, the libraries autopar links, and the Python environment (PyTorch from PyPI, pinned in
# scripts/python-requirements.txt, in one virtual environment at $AUTOPAR_VENV that the demo, the
# cluster's jobs and the tests use). Without it everything the tests and benchmarks use besides.
# Idempotent: a second run only checks.
set -euo pipefail

DEMO_PKGS=(
  build-essential cmake pkg-config git
  slurm-wlm slurmctld slurmd slurm-client libslurm-dev munge libmunge-dev
  libpmix-dev libpmix-bin
  libcurl4-openssl-dev libjsoncpp-dev libtinyxml2-dev libboost-program-options-dev
  libsqlite3-dev libssl-dev libhwloc-dev
  python3 python3-venv
  util-linux procps iproute2
)
TEST_PKGS=(
  libgtest-dev libgmock-dev libbenchmark-dev sqlite3
  hyperfine awscli curl jq shellcheck
  mypy  # tests/CMakeLists.txt's python_types checks python/autopar's type hints
  chromium  # tests/integration/test_health.py renders the --html report headless
  mandoc  # tests/man/lint_man_pages.sh lints the man pages (docs/man)
  file  # CPack's DEB generator finds the binaries to give to dpkg-shlibdeps (scripts/package.sh)
  prometheus  # promtool checks autopard's metrics in the integration tests (docs/metrics.md)
  clang libclang-rt-14-dev  # scripts/test.sh's sanitizer + libFuzzer build (fuzz/)
)

demo=0
[[ ${1:-} == --demo ]] && demo=1
PKGS=("${DEMO_PKGS[@]}")
((demo)) || PKGS+=("${TEST_PKGS[@]}")

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # No package's service (prometheus, the system's munge and Slurm daemons) is started by the
  # install: the tests run their own. policy-rc.d is Debian's switch for that, removed after.
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
  fi
  rc=0
  apt-get install -y -qq --no-install-recommends "${missing[@]}" || rc=$?
  if ((own_policy)); then rm -f "$policy"; fi
  ((rc == 0)) || exit "$rc"
fi

# The Python environment: Debian's python3 (the one the cluster's nodes run) with every package of
# scripts/python-requirements.txt, readable by every user (the jobs of the tests' second account
# too). The lock file's digest in the environment says it is current; a changed lock rebuilds it.
venv=${AUTOPAR_VENV:-/opt/autopar-venv}
lock=$(dirname -- "${BASH_SOURCE[0]}")/python-requirements.txt
digest=$(sha256sum <"$lock" | cut -d' ' -f1)
if [[ $(cat "$venv/.autopar-lock" 2>/dev/null) != "$digest" ]]; then
  rm -rf "$venv"
  (umask 022 && /usr/bin/python3 -m venv "$venv" &&
    "$venv/bin/pip" install --quiet --no-cache-dir -r "$lock" && echo "$digest" >"$venv/.autopar-lock")
fi

if ((demo)); then
  echo "autopar: the main job's dependencies installed"
  exit 0
fi

# Node.js with npm: this machine's image may already ship one (nodesource, npm bundled); Debian's
# nodejs and npm packages conflict with it, so install them only when there is no npm at all.
if ! command -v npm >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends nodejs npm
fi

# s3rver: an S3-speaking server on loopback for the checkpoint tests (npm, not in Debian).
S3RVER_DIR=${AUTOPAR_S3RVER_DIR:-/opt/autopar-s3rver}
if [[ ! -x "$S3RVER_DIR/node_modules/.bin/s3rver" ]]; then
  mkdir -p "$S3RVER_DIR"
  npm install --silent --no-audit --no-fund --prefix "$S3RVER_DIR" s3rver@3.7.1 >/dev/null
fi
echo "autopar: dependencies installed"
